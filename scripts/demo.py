"""The main job: a cached best-of-N search through the real ComfyUI server, headless.

    bash scripts/demo.sh [--candidates 8] [--steps 30] [--tau 0.10] [--seed 42]
                         [--ball red] [--spot blue] [--motion right] [--sheet PATH]
    bash scripts/demo.sh --random-weights [--prompt "..."]     # machinery check on random weights
    bash scripts/demo.sh --models DIR [--prompt "..."]         # the Wan 2.1 workflow on real weights

By default it searches with the small Wan model trained in the ball-and-spot world (scripts/ball_spot_world.py,
scripts/models/tiny_wan_ball_spot.safetensors) on the CPU: a real ComfyUI server (loopback) with this extension and
a demo-only node pack (scripts/demo_nodes: the world's prompt conditioning, analytic verifier and renderer)
runs Apply Cache -> CachedSearch Sampler -> verifier -> Ranking From Scores -> Recommit. It writes a contact
sheet (every draft's frames with seed, score and skipped calls, the winner marked, and the delivered video)
and an animated WEBP of the delivered video, and prints the search report.

With real weights: if ``--models`` (default: ``$COMFYUI_PATH/models``) holds the files of the Wan 2.1 example
workflow, that workflow runs on them (on the GPU if there is one) with the given prompt, N and steps.

``--random-weights``: a tiny Wan 2.1 graph with random weights (diffusion model, VAE, ImageReward-architecture
verifier): the videos are noise and the scores arbitrary; the machinery is real.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import json  # noqa: E402
import os  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from scripts import ball_spot_world  # noqa: E402
from scripts import comfy_runtime, graphs, tiny_image_reward, tiny_models  # noqa: E402
from scripts.contact_sheet import SheetRow, contact_sheet  # noqa: E402

WAN21_WORKFLOW = REPO_ROOT / "workflows" / "api" / "01 Wan 2.1 (start here).json"
TRAINED_MODEL = ball_spot_world.TRAINED_MODEL
DEMO_NODES_DIR = REPO_ROOT / "scripts" / "demo_nodes"
TRAINING_SHIFT, WORLD_CFG = ball_spot_world.TRAINING_SHIFT, 4.0  # WORLD_CFG: as bench/audit.py samples it
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
        print(f"[demo] {candidate} lacks {', '.join(missing)}: using the small trained model instead")
        return None
    return pathlib.Path(candidate)


def main() -> None:
    parser = argparse.ArgumentParser(description="CachedSearch demo: best-of-N search through a real ComfyUI server")
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--tau", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--ball", default="red", choices=ball_spot_world.COLOUR_NAMES,
                        help="trained model: ball colour")
    parser.add_argument("--spot", default="blue", choices=ball_spot_world.COLOUR_NAMES,
                        help="trained model: spot colour")
    parser.add_argument("--motion", default="right", choices=ball_spot_world.MOTION_NAMES, help="trained model: motion")
    parser.add_argument("--sheet", type=pathlib.Path, help="trained model: also copy the contact sheet here")
    parser.add_argument("--random-weights", action="store_true",
                        help="machinery check: tiny random weights (noise videos, arbitrary scores)")
    parser.add_argument("--prompt", default="a red ball on the grass",
                        help="random weights / real weights: the text the verifier scores against")
    parser.add_argument("--models", help="a ComfyUI models folder with the Wan 2.1 workflow's files")
    args = parser.parse_args()
    if args.ball == args.spot:
        parser.error(f"--spot: got {args.spot!r}, the ball's colour; pick another colour for the spot")

    base = pathlib.Path(tempfile.mkdtemp(prefix="cachedsearch_demo_"))
    comfy_runtime.prepare_base_directory(base)
    models = None if args.random_weights else real_models_dir(args.models)
    if models is not None:
        run_real_workflow(base, models, args)
    elif args.random_weights:
        run_random_weights(base, args)
    else:
        run_trained_world(base, args)


def world_graph(args) -> dict:
    """The search on the trained ball-and-spot model, ranked by the world's verifier."""
    window = max(1, round(args.steps / 10))  # warmup = cooldown = 5 at 50 steps, as bench/audit.py scales it
    render = {"class_type": "CachedSearchDemoBallAndSpotRender", "inputs": {"scale": 12}}
    return {
        "unet": {"class_type": "UNETLoader", "inputs": {"unet_name": TRAINED_MODEL.name, "weight_dtype": "default"}},
        "shift": {"class_type": "ModelSamplingSD3", "inputs": {"model": ["unet", 0], "shift": TRAINING_SHIFT}},
        "cache": {"class_type": "CachedSearchApplyCache", "inputs": {
            "model": ["shift", 0], "mode": "adaptive", "tau": args.tau, "warmup_steps": window,
            "cooldown_steps": window, "static_interval": 2}},
        "prompt": {"class_type": "CachedSearchDemoBallAndSpotPrompt",
                   "inputs": {"ball": args.ball, "spot": args.spot, "motion": args.motion}},
        "latent": {"class_type": "EmptyHunyuanLatentVideo", "inputs": {
            "width": 8 * ball_spot_world.SIZE, "height": 8 * ball_spot_world.SIZE,
            "length": 4 * ball_spot_world.FRAMES - 3, "batch_size": 1}},
        "search": {"class_type": "CachedSearchSampler", "inputs": {
            "model": ["cache", 0], "positive": ["prompt", 0], "negative": ["prompt", 1],
            "latent_image": ["latent", 0], "seed": args.seed, "num_candidates": args.candidates, "steps": args.steps,
            "cfg": WORLD_CFG, "sampler_name": "euler", "scheduler": "simple", "denoise": 1.0}},
        "verify": {"class_type": "CachedSearchDemoBallAndSpotVerifier",
                   "inputs": {"latent": ["search", 0], "prompt": ["prompt", 2]}},
        "ranking": {"class_type": "CachedSearchRankingFromScores",
                    "inputs": {"candidates": ["search", 1], "scores": ["verify", 0]}},
        "recommit": {"class_type": "CachedSearchRecommit",
                     "inputs": {"candidates": ["search", 1], "ranking": ["ranking", 0], "mode": "commit"}},
        "verify_delivered": {"class_type": "CachedSearchDemoBallAndSpotVerifier",
                             "inputs": {"latent": ["recommit", 0], "prompt": ["prompt", 2]}},
        "render_drafts": {**render, "inputs": {**render["inputs"], "latent": ["search", 0]}},
        "render_delivered": {**render, "inputs": {**render["inputs"], "latent": ["recommit", 0]}},
        "save_drafts": {"class_type": "SaveImage", "inputs": {"images": ["render_drafts", 0],
                                                              "filename_prefix": "cachedsearch_demo_draft"}},
        "save_frames": {"class_type": "SaveImage", "inputs": {"images": ["render_delivered", 0],
                                                              "filename_prefix": "cachedsearch_demo_delivered"}},
        "save": {"class_type": "SaveAnimatedWEBP", "inputs": {
            "images": ["render_delivered", 0], "filename_prefix": "cachedsearch_demo", "fps": 3.0,
            "lossless": True, "quality": 100, "method": "default"}},
    }


def run_trained_world(base: pathlib.Path, args) -> None:
    if not TRAINED_MODEL.exists():
        sys.exit(f"[demo] {TRAINED_MODEL} is missing; train it with `python -m bench.train_tiny_wan`")
    (base / "models" / "diffusion_models" / TRAINED_MODEL.name).symlink_to(TRAINED_MODEL)
    (base / "custom_nodes" / "cachedsearch_demo_nodes").symlink_to(DEMO_NODES_DIR, target_is_directory=True)
    graph = world_graph(args)
    colours = ball_spot_world.COLOUR_NAMES
    prompt = ball_spot_world.prompt_text((colours.index(args.ball), colours.index(args.spot),
                                          ball_spot_world.MOTION_NAMES.index(args.motion)))
    print(f"[demo] small Wan model trained in the ball-and-spot world ({TRAINED_MODEL.name}); prompt: {prompt!r}")
    with comfy_runtime.ComfyServer(base) as server:
        print(f"[demo] ComfyUI {comfy_runtime.comfyui_root()} on {server.url}")
        start = time.perf_counter()
        entry = server.run_prompt(graph, progress=show_progress)
        print(f"\r[demo] finished in {time.perf_counter() - start:.1f} s{' ' * 30}")
    outputs = entry["outputs"]
    print(outputs["recommit"]["text"][0])
    scores = [float(value) for value in outputs["verify"]["text"][0].split()]
    (delivered_score,) = [float(value) for value in outputs["verify_delivered"]["text"][0].split()]
    (delivery,) = outputs["recommit"]["cachedsearch_delivery"]
    print(f"[demo] search picked seed {delivery['seed']}: adherence {delivered_score:.2f} vs "
          f"{float(np.mean(scores)):.2f} for a single random seed (mean of the {len(scores)} drafts)")
    sheet = contact_sheet(
        f"{prompt}: best of {len(scores)} seeds",
        f"{args.steps} steps; drafts cached at tau {args.tau:g}; winner re-generated at full compute",
        sheet_rows(base / "output", outputs, scores, delivered_score),
    )
    sheet_path = base / "output" / "cachedsearch_demo_contact_sheet.png"
    sheet.save(sheet_path)
    (video,) = outputs["save"]["images"]
    print(f"[demo] contact sheet: {sheet_path}")
    print(f"[demo] delivered video (animated WEBP): {base / 'output' / video['subfolder'] / video['filename']}")
    if args.sheet:
        shutil.copyfile(sheet_path, args.sheet)
        print(f"[demo] contact sheet copied to {args.sheet}")


def sheet_rows(output: pathlib.Path, outputs: dict, scores: list[float], delivered_score: float) -> list[SheetRow]:
    def frames(node):
        return [np.asarray(Image.open(output / image["subfolder"] / image["filename"]).convert("RGB"))
                for image in outputs[node]["images"]]

    draft_frames, per_draft = frames("save_drafts"), outputs["search"]["cachedsearch_drafts"]
    (delivery,) = outputs["recommit"]["cachedsearch_delivery"]
    count = len(per_draft)
    rows = []
    for index, draft in enumerate(per_draft):
        winner = index == delivery["candidate"] - 1
        rows.append(SheetRow(
            frames=draft_frames[index * ball_spot_world.FRAMES:(index + 1) * ball_spot_world.FRAMES],
            lines=[f"seed {draft['seed']}" + ("   WINNER" if winner else ""), f"adherence {scores[index]:.3f}",
                   f"skipped {draft['skipped']}/{draft['calls']} transformer calls"],
            kind="winner" if winner else "draft"))
    rows.append(SheetRow(frames=frames("save_frames"), kind="delivered", lines=[
        f"delivered: seed {delivery['seed']}", "full-compute recommit (no cache)",
        f"adherence {delivered_score:.3f}; drafts' mean {float(np.mean(scores)):.3f} (of {count})"]))
    return rows


def run_random_weights(base: pathlib.Path, args) -> None:
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
