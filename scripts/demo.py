"""The main job on tiny random weights: a cached best-of-N search through the real ComfyUI engine.

    bash scripts/demo.sh [--candidates 4] [--steps 30] [--scores "..."]

Starts a real ComfyUI server (CPU, loopback) with this extension, queues a
tiny Wan 2.1 text-to-video graph: Apply Cache -> CachedSearch Sampler ->
VAEDecode -> ranking -> Recommit -> VAEDecode -> SaveAnimatedWEBP, and prints
the search report and where the delivered video was saved. The weights are
random, so the videos are noise: the machinery is real, the pictures are not.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, graphs, tiny_models  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description="CachedSearch demo on tiny random weights")
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--tau", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--scores", default=None,
                        help="one score per candidate; default: fixed demo scores (no verifier model is loaded)")
    args = parser.parse_args()
    scores = args.scores or " ".join(f"{(7 * i) % 5 / 10:.1f}" for i in range(1, args.candidates + 1))

    base = pathlib.Path(tempfile.mkdtemp(prefix="cachedsearch_demo_"))
    print("[demo] TINY RANDOM WEIGHTS: the videos are noise; the search machinery is the real one.")
    comfy_runtime.prepare_base_directory(base)
    tiny_models.generate_tiny_models(base / "models")
    graph = graphs.wan_search(seed=args.seed, num_candidates=args.candidates, scores=scores, steps=args.steps,
                              tau=args.tau, filename_prefix="cachedsearch_demo")
    graph["cache"]["inputs"].update(warmup_steps=5, cooldown_steps=5)
    graph["latent"]["inputs"].update(width=128, height=128, length=17)
    graph["save"] = {"class_type": "SaveAnimatedWEBP",
                     "inputs": {"images": ["decode", 0], "filename_prefix": "cachedsearch_demo", "fps": 16.0,
                                "lossless": False, "quality": 90, "method": "default"}}
    with comfy_runtime.ComfyServer(base) as server:
        print(f"[demo] ComfyUI {comfy_runtime.comfyui_root()} on {server.url}; ranking with scores: {scores}")
        start = time.perf_counter()
        entry = server.run_prompt(graph, progress=show_progress)
        print(f"\r[demo] finished in {time.perf_counter() - start:.1f} s{' ' * 30}")
        print(entry["outputs"]["recommit"]["text"][0])
        (video,) = entry["outputs"]["save"]["images"]
        print(f"[demo] delivered video: {base / 'output' / video['subfolder'] / video['filename']}")


def show_progress(node: str, value: int, maximum: int) -> None:
    """One terminal line per node, redrawn in place: drafts (N x steps) then the commit."""
    label = {"search": "drafts", "recommit": "commit"}.get(node, node)
    filled = round(30 * value / maximum)
    print(f"\r[demo] {label:7s} [{'#' * filled}{'.' * (30 - filled)}] {value}/{maximum}", end="", flush=True)


if __name__ == "__main__":
    main()
