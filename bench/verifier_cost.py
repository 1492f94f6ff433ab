"""Scoring cost of the ImageReward verifier at its real size (random weights), fp32 and bf16.

    .venv/bin/python -m bench.verifier_cost [--frames 8] [--repeats 3]

Builds ImageReward-v1.0's architecture (ViT-L/16 + BERT-base with cross-attention,
446M parameters) with random weights and a 30522-token stand-in vocabulary,
then times one candidate's scoring (K frames of 480x832, preprocessing
included) as one batch of K and as K batches of one, and the peak
resident-memory growth. Weights are random, so the rewards are meaningless;
the cost is the real one.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys
import time

import torch

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.search_cost import peak_rss_growth  # noqa: E402
from cachedsearch_core.image_reward import ImageReward, ImageRewardArchitecture, load_tokenizer  # noqa: E402
from scripts import comfy_runtime  # noqa: E402


def build(dtype: torch.dtype) -> ImageReward:
    folder = comfy_runtime.scratch_directory("cachedsearch_vocab_")
    words = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += [f"word{i}" for i in range(30522 - len(words))]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    architecture = ImageRewardArchitecture()
    widths = (architecture.text_hidden, 1024, 128, 64, 16, 1)
    head = torch.nn.Sequential(*[torch.nn.Linear(a, b) for a, b in zip(widths, widths[1:])])
    model = ImageReward(architecture, load_tokenizer(folder, architecture.text_vocab), head)
    return model.to(dtype=dtype).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], help="measure one dtype in this process (internal)")
    args = parser.parse_args()
    if args.dtype is None:
        print(f"# ImageReward architecture, random weights, {args.frames} frames of 480x832 per candidate, "
              f"torch threads {torch.get_num_threads()}, median of {args.repeats}, each dtype in a fresh process")
        print("| dtype | parameters | one batch of K s | K batches of 1 s | peak RSS growth while scoring MiB |")
        print("|---|---|---|---|---|")
        for dtype in ("fp32", "bf16"):
            command = [sys.executable, "-m", "bench.verifier_cost", "--dtype", dtype, "--frames", str(args.frames),
                       "--repeats", str(args.repeats)]
            print(subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip())
        return
    frames = torch.rand((args.frames, 480, 832, 3), generator=torch.Generator().manual_seed(0))
    prompt = "word1 word2 word3 word4 word5 word6"

    model = build({"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype])
    parameters = sum(p.numel() for p in model.parameters())
    before, peak = peak_rss_growth(lambda: model.score(prompt, frames))  # first call: activations included
    batched, single = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        model.score(prompt, frames)
        batched.append(time.perf_counter() - start)
        start = time.perf_counter()
        for index in range(args.frames):
            model.score(prompt, frames[index : index + 1])
        single.append(time.perf_counter() - start)
    print(f"| {args.dtype} | {parameters / 1e6:.0f}M | {statistics.median(batched):.2f} | "
          f"{statistics.median(single):.2f} | {(peak - before) / 2**20:.0f} |")


if __name__ == "__main__":
    main()
