"""How many seeds a calibration needs: CachedSearch Calibrate's recommendation at S = 2, 4 and 8 seeds on a few
prompts of the ball-and-spot world, against the 36-prompt audit's tau* (0.5 at capture target 0.85 and 0.90).

    .venv/bin/python -m bench.calibration_seeds [--prompts 0 13] [--seeds 8] [--steps 16] [--out DIR]

Each prompt's full and cached rollouts (seeds 0 .. --seeds - 1, every tau) are made once by bench/audit.py's
rollout code (whose calibration table equals the node's: tests/test_calibrate_comfy.py) and kept in DIR/scores.jsonl
(a stopped run resumes); the node's table (``Calibration.from_store``) is then computed for every disjoint window
of S consecutive seeds, which is exactly what the node recommends when given those seeds.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import torch

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import ball_spot_world  # noqa: E402
from bench.audit import ShapesBackend, arm_specs  # noqa: E402
from bench.train_tiny_wan import DEFAULT_OUT as TRAINED_MODEL  # noqa: E402
from cachedsearch_core.audit import FULL_ARM, ScoreStore, tau_arm  # noqa: E402
from cachedsearch_core.calibration import CalibrationPlan  # noqa: E402
from cachedsearch_core.calibration_results import Calibration  # noqa: E402

AUDIT_TAU_STAR = 0.5  # README, "Ranking-fidelity audit": 36 prompts x 8 seeds, 16 steps, both targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, nargs="+", default=[0, 13], help="world prompts (0-35)")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--taus", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.5, 0.8])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8], help="seed counts S compared")
    parser.add_argument("--targets", type=float, nargs="+", default=[0.85, 0.90])
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "bench" / "results" / "calibration_seeds")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bootstrap", type=int, default=100,
                        help="bootstrap draws per table (the recommendation does not depend on them)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    backend = ShapesBackend(TRAINED_MODEL, cfg=4.0, prompt_count=0)
    backend.prompts = [ball_spot_world.PROMPTS[index] for index in args.prompts]
    store = ScoreStore(args.out / "scores.jsonl")
    arms = arm_specs(args.taus, args.steps)
    for position in range(len(args.prompts)):
        for arm in (FULL_ARM, *map(tau_arm, args.taus)):
            for seed in range(args.seeds):
                if not store.has(arm, position, seed):
                    store.add(arm, position, seed, *backend.run(arm, arms[arm], position, seed))
        print(f"[calibration_seeds] prompt {args.prompts[position]} collected", flush=True)

    lines = [f"# Calibration vs seed count\n\n{backend.describe()}; {args.steps} steps, taus "
             f"{' '.join(f'{tau:g}' for tau in args.taus)}; recommendation per window of S consecutive seeds of "
             f"0-{args.seeds - 1}; the 36-prompt audit's tau* is {AUDIT_TAU_STAR:g}.\n",
             "| prompt | target | " + " | ".join(f"S = {size}" for size in args.sizes) + " |",
             "|---|---|" + "---|" * len(args.sizes)]
    for position, index in enumerate(args.prompts):
        for target in args.targets:
            cells = []
            for size in args.sizes:
                picks = [Calibration.from_store(store, CalibrationPlan(tuple(args.taus), size, first, target),
                                                [position], args.bootstrap).recommended_tau
                         for first in range(0, args.seeds - size + 1, size)]
                cells.append(", ".join(f"{tau:g}" for tau in picks))
            lines.append(f"| {index}: {ball_spot_world.prompt_text(ball_spot_world.PROMPTS[index])} | {target:.2f} | "
                         + " | ".join(cells) + " |")
    report = "\n".join(lines) + "\n"
    (args.out / "report.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
