"""Fetch the ImageReward-v1.0 checkpoint and the bert-base-uncased tokenizer into a ComfyUI models folder.

    python scripts/download_image_reward.py /path/to/ComfyUI/models

Run it on a machine that reaches the Hugging Face hub; the nodes themselves
never download anything. Afterwards the folder holds
``image_reward/ImageReward.pt`` and ``image_reward/bert-base-uncased/``.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil

CHECKPOINT_REPO, CHECKPOINT_FILE = "THUDM/ImageReward", "ImageReward.pt"
TOKENIZER_REPO = "google-bert/bert-base-uncased"
TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "tokenizer.json", "config.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models_dir", type=pathlib.Path, help="ComfyUI's models folder")
    args = parser.parse_args()
    from huggingface_hub import hf_hub_download

    target = args.models_dir / "image_reward"
    tokenizer = target / "bert-base-uncased"
    tokenizer.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(hf_hub_download(CHECKPOINT_REPO, CHECKPOINT_FILE), target / CHECKPOINT_FILE)
    for name in TOKENIZER_FILES:
        shutil.copyfile(hf_hub_download(TOKENIZER_REPO, name), tokenizer / name)
    print(f"ImageReward files are in {target}")


if __name__ == "__main__":
    main()
