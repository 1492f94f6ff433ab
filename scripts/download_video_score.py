"""Fetch VideoScore-v1.1 (TIGER-Lab) into a ComfyUI models folder.

    python scripts/download_video_score.py /path/to/ComfyUI/models

Run it on a machine that reaches the Hugging Face hub; the nodes themselves never download anything.
Afterwards ``video_score/VideoScore-v1.1/`` holds config.json, the safetensors shards with their index and
the Idefics2 processor files (about 16 GB).
"""

from __future__ import annotations

import argparse
import pathlib

REPOSITORY = "TIGER-Lab/VideoScore-v1.1"
PATTERNS = ["*.json", "*.safetensors", "tokenizer.model"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models_dir", type=pathlib.Path, help="ComfyUI's models folder")
    args = parser.parse_args()
    from huggingface_hub import snapshot_download

    target = args.models_dir / "video_score" / "VideoScore-v1.1"
    snapshot_download(REPOSITORY, local_dir=str(target), allow_patterns=PATTERNS)
    print(f"VideoScore-v1.1 files are in {target}")


if __name__ == "__main__":
    main()
