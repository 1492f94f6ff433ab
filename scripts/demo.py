"""The main job on tiny random weights: a cached best-of-N search through the real ComfyUI engine.

    bash scripts/demo.sh [--candidates 4] [--steps 30] [--tau 0.10] [--prompt "..."]

Starts a real ComfyUI server (CPU, loopback) with this extension, queues a
tiny Wan 2.1 text-to-video graph: Apply Cache -> CachedSearch Sampler ->
VAEDecode -> Verifier (ImageReward architecture) -> Recommit -> VAEDecode ->
SaveAnimatedWEBP, and prints the search report and where the delivered video
was saved. All weights are random (diffusion model, VAE, verifier), so the
videos are noise and the scores arbitrary: the machinery is real, the pictures
are not.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, graphs, tiny_image_reward, tiny_models  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description="CachedSearch demo on tiny random weights")
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--tau", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--prompt", default="a red ball on the grass", help="the text the verifier scores against")
    args = parser.parse_args()

    base = pathlib.Path(tempfile.mkdtemp(prefix="cachedsearch_demo_"))
    print("[demo] TINY RANDOM WEIGHTS: the videos are noise; the search machinery is the real one.")
    comfy_runtime.prepare_base_directory(base)
    tiny_models.generate_tiny_models(base / "models")
    tiny_image_reward.write_tiny_image_reward(base / "models" / "image_reward")
    graph = graphs.wan_search(seed=args.seed, num_candidates=args.candidates, steps=args.steps, tau=args.tau,
                              verifier_prompt=args.prompt, filename_prefix="cachedsearch_demo")
    graph["cache"]["inputs"].update(warmup_steps=5, cooldown_steps=5)
    graph["latent"]["inputs"].update(width=256, height=256, length=33)
    graph["save"] = {"class_type": "SaveAnimatedWEBP",
                     "inputs": {"images": ["decode", 0], "filename_prefix": "cachedsearch_demo", "fps": 16.0,
                                "lossless": False, "quality": 90, "method": "default"}}
    with comfy_runtime.ComfyServer(base) as server:
        print(f"[demo] ComfyUI {comfy_runtime.comfyui_root()} on {server.url}; verifier prompt: {args.prompt!r}")
        start = time.perf_counter()
        entry = server.run_prompt(graph, progress=show_progress)
        print(f"\r[demo] finished in {time.perf_counter() - start:.1f} s{' ' * 30}")
        print(entry["outputs"]["recommit"]["text"][0])
        (video,) = entry["outputs"]["save"]["images"]
        print(f"[demo] delivered video: {base / 'output' / video['subfolder'] / video['filename']}")


def show_progress(node: str, value: int, maximum: int) -> None:
    """One terminal line per node, redrawn in place: drafts (N x steps) then the commit."""
    label = {"search": "drafts", "ranking": "scoring", "recommit": "commit"}.get(node, node)
    filled = round(30 * value / maximum)
    print(f"\r[demo] {label:7s} [{'#' * filled}{'.' * (30 - filled)}] {value}/{maximum}", end="", flush=True)


if __name__ == "__main__":
    main()
