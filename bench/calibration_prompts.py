"""How many prompts a family calibration needs, and the cache engines' frontier, on the ball-and-spot world:
CachedSearch Calibrate itself (in process) on every disjoint window of 4, 8 and 16 of the audit's 36 prompts at 8
seeds and on all 36, against the 36-prompt audit's tau* (0.5 at capture targets 0.85 and 0.90), as
bench/calibration_seeds.py does for seeds; then our cache against ComfyUI's EasyCache and LazyCache on the first
--engine-prompts prompts (capture against speed-up in transformer calls).

    .venv/bin/python -m bench.calibration_prompts [--prompts 4 8 16] [--seeds 8] [--out DIR]

The node saves every rollout in DIR/user (its saved rollouts), so every window, the second target and a stopped
run reuse what the 36-prompt calibration computed. Writes DIR/report.md and DIR/frontier.svg.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import torch

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.audit import cache_window  # noqa: E402
from bench.calibration_seeds import AUDIT_TAU_STAR  # noqa: E402
from bench.train_tiny_wan import DEFAULT_OUT as TRAINED_MODEL, TRAINING_SHIFT  # noqa: E402
from cachedsearch_core.audit import capture_plot  # noqa: E402
from scripts import ball_spot_world, comfy_runtime, demo_nodes  # noqa: E402


def audit_prompts(count: int) -> list[str]:
    """The first ``count`` prompts of bench/audit.py's order (prompt 7 i of the world)."""
    prompts = ball_spot_world.PROMPTS
    return [ball_spot_world.prompt_text(prompts[(7 * index) % len(prompts)]) for index in range(count)]


def hidden_inputs(graph: dict, node_id: str) -> dict:
    """What a server hands node ``node_id`` of the API prompt ``graph`` as its hidden inputs (the argument of
    PREPARE_CLASS_CLONE in 0.3.75 and in 0.33)."""
    hidden = {"PROMPT": graph, "UNIQUE_ID": node_id}
    return {**hidden, "hidden_inputs": dict(hidden)}


class WorldCalibrate:
    """CachedSearch Calibrate on the trained world model in an in-process ComfyUI, as a server would run it (so its
    rollouts are saved in ``user_directory``)."""

    def __init__(self, user_directory: pathlib.Path, steps: int, window: tuple[int, int] | None = None):
        """``window``: the cache's warmup and cooldown steps (default ``cache_window`` of ``steps`` for both)."""
        base = comfy_runtime.scratch_directory("cachedsearch_calibration_prompts_")
        comfy_runtime.prepare_base_directory(base)
        (base / "models" / "diffusion_models" / TRAINED_MODEL.name).symlink_to(TRAINED_MODEL.resolve())
        self.mapping = comfy_runtime.load_in_process(base).NODE_CLASS_MAPPINGS
        import folder_paths

        user_directory.mkdir(parents=True, exist_ok=True)
        folder_paths.set_user_directory(str(user_directory))
        model = self.one("UNETLoader", unet_name=TRAINED_MODEL.name, weight_dtype="default")
        warmup, cooldown = window or (cache_window(steps),) * 2
        self.inputs = dict(
            model=self.one("ModelSamplingSD3", model=model, shift=TRAINING_SHIFT),
            negative=[[ball_spot_world.conditioning(None), {}]],
            latent_image=self.one("EmptyHunyuanLatentVideo", width=8 * ball_spot_world.SIZE,
                                  height=8 * ball_spot_world.SIZE, length=4 * ball_spot_world.FRAMES - 3,
                                  batch_size=1),
            vae=demo_nodes.BallAndSpotFrames().load()[0], verifier=demo_nodes.BallAndSpotVerifierModel().load()[0],
            clip=demo_nodes.BallAndSpotTextEncoder().load()[0], first_seed=0, steps=steps, cfg=4.0,
            sampler_name="euler", scheduler="simple", denoise=1.0, warmup_steps=warmup, cooldown_steps=cooldown,
            frames_per_candidate=ball_spot_world.FRAMES)
        graph = {**self.loader_graph(), "calibrate": {"class_type": "CachedSearchCalibrate", "inputs": {
            "model": ["shift", 0], "vae": ["frames", 0], "verifier": ["verifier", 0]}}}
        self.hidden = hidden_inputs(graph, "calibrate")

    @staticmethod
    def loader_graph() -> dict:
        """The API prompt's loaders of the calibration (a server's graph names them: the model file is the
        calibration memory's key, the verifier loader what Budget "auto" matches a Pruning Plan's verifier by)."""
        return {"loader": {"class_type": "UNETLoader", "inputs": {"unet_name": TRAINED_MODEL.name}},
                "shift": {"class_type": "ModelSamplingSD3", "inputs": {"model": ["loader", 0],
                                                                       "shift": TRAINING_SHIFT}},
                "frames": {"class_type": "CachedSearchDemoBallAndSpotFrames", "inputs": {}},
                "verifier": {"class_type": "CachedSearchDemoBallAndSpotVerifierModel", "inputs": {}}}

    def one(self, node_id, **inputs):
        (result,) = comfy_runtime.run_node(self.mapping[node_id], **inputs)
        return result

    def __call__(self, prompts: list[str], seeds: int, taus: str, target: float, **engines):
        """The node's output (results and panel payload)."""
        node = self.mapping["CachedSearchCalibrate"].PREPARE_CLASS_CLONE(self.hidden)
        with torch.inference_mode():
            return node.execute(**self.inputs, prompt="\n".join(prompts), seeds=seeds, taus=taus,
                                capture_target=target, **engines)


# One colour per engine on the frontier chart.
ENGINE_COLOURS = {"CachedSearch cache": "#2a7", "EasyCache": "#c52", "LazyCache": "#36c"}


def frontier_svg(rows: list[dict]) -> str:
    """Capture against speed-up in transformer calls, one colour per engine, each point labelled by engine and
    threshold."""
    return capture_plot([(f"{row['engine'].split()[0]} {row['tau']:g}", row["call_speedup"],
                          row["capture"][0] if row["capture"][0] is not None else float("nan"),
                          ENGINE_COLOURS[row["engine"]]) for row in rows], "speed-up in transformer calls")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, nargs="+", default=[4, 8, 16], help="prompt counts compared")
    parser.add_argument("--all-prompts", type=int, default=36, help="the prompts calibrated once (the audit's 36)")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--taus", default="0.1 0.2 0.3 0.5 0.8", help="the audit's taus")
    parser.add_argument("--targets", type=float, nargs="+", default=[0.85, 0.90])
    parser.add_argument("--engine-prompts", type=int, default=16, help="prompts of the engines' frontier (0: none)")
    parser.add_argument("--easycache", default="0.05 0.2 0.5", help="EasyCache reuse_threshold values")
    parser.add_argument("--lazycache", default="0.05 0.2 0.5", help="LazyCache reuse_threshold values")
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "bench" / "results" / "calibration_prompts")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    calibrate = WorldCalibrate(args.out / "user", args.steps)
    prompts = audit_prompts(args.all_prompts)
    sizes = [*sorted(args.prompts), args.all_prompts]
    lines = [f"# Calibration vs prompt count, and the cache engines' frontier\n\nCachedSearch Calibrate on the small "
             f"Wan model trained on the ball-and-spot world: {args.steps} steps, euler/simple, cfg 4, shift "
             f"{TRAINING_SHIFT}, the world's analytic verifier, warmup = cooldown = {cache_window(args.steps)}, "
             f"{args.seeds} seeds, taus {args.taus}. The {args.all_prompts} prompts of bench/audit.py's order are "
             "calibrated once (the node saves every rollout); each cell lists the node's recommendation for every "
             "disjoint window of P consecutive prompts, in order. The 36-prompt audit's tau* is "
             f"{AUDIT_TAU_STAR:g}.\n",
             "| target | " + " | ".join(f"P = {size}" for size in sizes) + " |", "|---|" + "---|" * len(sizes)]
    for target in args.targets:
        cells = []
        for size in sorted(sizes, reverse=True):  # all the prompts first: every window reuses their rollouts
            picks = [calibrate(prompts[first:first + size], args.seeds, args.taus, target).result[0]
                     for first in range(0, len(prompts) - size + 1, size)]
            cells.insert(0, ", ".join(f"{tau:g}" for tau in picks))
        lines.append(f"| {target:.2f} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    if args.engine_prompts:
        output = calibrate(prompts[:args.engine_prompts], args.seeds, args.taus, args.targets[-1],
                           easycache_thresholds=args.easycache, lazycache_thresholds=args.lazycache)
        rows = output.ui["cachedsearch_calibration"][0]["engine_rows"]
        lines += ["", f"## Frontier: the first {args.engine_prompts} prompts x {args.seeds} seeds, target "
                  f"{args.targets[-1]:.2f}\n", "| engine | threshold | skipped calls | speed-up (calls) | capture "
                  "[95 % prompt bootstrap] | rho | top-1 |", "|---|---|---|---|---|---|---|"]
        for row in rows:
            value, *interval = row["capture"]
            bracket = f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""
            lines.append(f"| {row['engine']} | {row['tau']:g} | {100 * row['skipped']:.0f} % | "
                         f"{row['call_speedup']:.2f}x | {value:.3f}{bracket} | {row['rho'][0]:.3f} | "
                         f"{row['top1'][0]:.3f} |")
        lines += ["", next(line for line in output.result[1].splitlines()
                           if line.startswith(("Fewest computed calls", "No engine keeps")))]
        (args.out / "frontier.svg").write_text(frontier_svg(rows))
    report = "\n".join(lines) + "\n"
    (args.out / "report.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
