"""The main job: a cached best-of-N search through the real ComfyUI engine, headless.

    bash scripts/demo.sh [--models DIR] [--candidates 4] [--steps 30] [--tau 0.10] [--prompt "..."]

With real weights: if ``--models`` (default: ``$COMFYUI_PATH/models``) holds the
files of the Wan 2.1 example workflow, that workflow runs on them (on the GPU
if there is one) with the given prompt, N and steps.

Otherwise, on tiny random weights:
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

import json  # noqa: E402
import os  # noqa: E402

from scripts import comfy_runtime, graphs, tiny_image_reward, tiny_models  # noqa: E402

WAN21_WORKFLOW = REPO_ROOT / "workflows" / "api" / "cachedsearch_wan21_t2v.json"
FOLDER_OF_INPUT = {"unet_name": "diffusion_models", "clip_name": "text_encoders", "vae_name": "vae",
                   "ckpt_name": "image_reward"}


def required_model_files(workflow: dict) -> list[str]:
    return [f"{FOLDER_OF_INPUT[name]}/{value}" for node in workflow.values()
            for name, value in node["inputs"].items() if name in FOLDER_OF_INPUT]


def real_models_dir(argument: str | None) -> pathlib.Path | None:
    """The models folder to use, if it holds every file the Wan 2.1 workflow needs."""
    candidate = argument or (os.path.join(os.environ["COMFYUI_PATH"], "models") if "COMFYUI_PATH" in os.environ
                             else None)
    if candidate is None:
        return None
    workflow = json.loads(WAN21_WORKFLOW.read_text())
    missing = [f for f in required_model_files(workflow) if not (pathlib.Path(candidate) / f).exists()]
    if missing:
        print(f"[demo] {candidate} lacks {', '.join(missing)}: using tiny random weights instead")
        return None
    return pathlib.Path(candidate)


def main() -> None:
    parser = argparse.ArgumentParser(description="CachedSearch demo on tiny random weights")
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--tau", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--prompt", default="a red ball on the grass", help="the text the verifier scores against")
    parser.add_argument("--models", help="a ComfyUI models folder with the Wan 2.1 workflow's files")
    args = parser.parse_args()

    base = pathlib.Path(tempfile.mkdtemp(prefix="cachedsearch_demo_"))
    comfy_runtime.prepare_base_directory(base)
    models = real_models_dir(args.models)
    if models is not None:
        run_real_workflow(base, models, args)
        return
    print("[demo] TINY RANDOM WEIGHTS: the videos are noise; the search machinery is the real one.")
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


def run_real_workflow(base: pathlib.Path, models: pathlib.Path, args) -> None:
    """The shipped Wan 2.1 workflow on the user's weights, with the demo's prompt, N and steps."""
    workflow = json.loads(WAN21_WORKFLOW.read_text())
    for node in workflow.values():
        inputs = node["inputs"]
        if node["class_type"] == "PrimitiveStringMultiline":
            inputs["value"] = args.prompt
        elif node["class_type"] == "CachedSearchSampler":
            inputs.update(num_candidates=args.candidates, steps=args.steps, seed=args.seed)
        elif node["class_type"] == "CachedSearchApplyCache":
            inputs["tau"] = args.tau
    paths = base / "extra_model_paths.yaml"
    paths.write_text("cachedsearch_demo:\n    base_path: " + str(models) + "\n" +
                     "".join(f"    {folder}: {folder}\n" for folder in sorted(set(FOLDER_OF_INPUT.values()))))
    print(f"[demo] REAL WEIGHTS from {models}: Wan 2.1 T2V 1.3B, {args.candidates} candidates x {args.steps} steps")
    with comfy_runtime.ComfyServer(base, cpu=False, extra_args=["--extra-model-paths-config", str(paths)]) as server:
        entry = server.run_prompt(workflow, timeout=24 * 3600, progress=show_progress)
        print()
        recommit = next(k for k, n in workflow.items() if n["class_type"] == "CachedSearchRecommit")
        save = next(k for k, n in workflow.items() if n["class_type"] == "SaveVideo")
        print(entry["outputs"][recommit]["text"][0])
        (video,) = entry["outputs"][save]["images"]
        print(f"[demo] delivered video: {base / 'output' / video['subfolder'] / video['filename']}")


def show_progress(node: str, value: int, maximum: int) -> None:
    """One terminal line per node, redrawn in place: drafts (N x steps) then the commit."""
    label = {"search": "drafts", "ranking": "scoring", "recommit": "commit"}.get(node, node)
    filled = round(30 * value / maximum)
    print(f"\r[demo] {label:7s} [{'#' * filled}{'.' * (30 - filled)}] {value}/{maximum}", end="", flush=True)


if __name__ == "__main__":
    main()
