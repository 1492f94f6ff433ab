"""Pruning in rounds, and width bought with the savings, on the ball-and-spot model with the audit's protocol.

    .venv/bin/python -m bench.prune_rounds [--prompts 36] [--steps 16] [--tau 0.1] [--out DIR]

Side by side in one process, for each prompt (the audit's prompts, ``bench/audit.py`` ShapesBackend: the small Wan
model trained on the ball-and-spot world, euler/simple, cfg 4, its analytic verifier scoring latents and x0
previews alike):

- full best-of-8: seeds 0-7 at full compute, the best delivered;
- the cache alone: cached drafts of seeds 0-7 (tau), the best draft recommitted;
- pruned arms (``run_pruned_search`` on the cached model; the best final draft is recommitted): one prune (the
  report's setting, 8 seeds to 40 % of the steps, keep 4), two and three rounds, and wider searches (N = 12, 16)
  whose schedules run the one prune's sampler steps (``pruning.pruned_search_steps``).

The full rollouts of seeds 0-15 are the ground truth: a search delivers the full rollout of the seed it recommits.
Per arm: computed transformer calls against full best-of-8's (exploration, and with the commit), capture of
best-of-8's gain (gain: delivered score minus the mean full score of seeds 0-7; ratio of means, 95 % prompt
bootstrap), top-1 (delivers the best full rollout among the seeds it explored), how often that true best seed survives
every round, and the mean delivered score. Rollouts are kept in DIR/rollouts.jsonl, so a stopped run resumes.
Writes DIR/report.md.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np
import torch

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.audit import TRAINED_MODEL, ShapesBackend, cache_window  # noqa: E402
from cachedsearch_core.budget import BudgetPlan  # noqa: E402
from cachedsearch_core.pruned_budget import pruned_budget_width  # noqa: E402
from cachedsearch_core.pruning import CacheWindow, PruningSchedule  # noqa: E402
from cachedsearch_core.search_audit import _bootstrap, _capture  # noqa: E402
from scripts import ball_spot_world  # noqa: E402

BASE_WIDTH = 8
# name: (N, schedule). The wider arms' schedules run the one prune's sampler steps at 16 steps (88 = 8 x 6 + 4 x 10):
# N = 12 to step 3, keep 4 (36 + 52); N = 16 to step 3, keep 4 to step 10, keep 2 (48 + 28 + 12).
PRUNED_ARMS = {
    "one prune (report), N = 8": (8, "40%:4"),
    "two rounds, N = 8": (8, "40%:4, 60%:2"),
    "three rounds, N = 8": (8, "40%:4, 60%:2, 80%:1"),
    "halve 3 times, N = 8": (8, "20%:1/2, 40%:1/2, 60%:1/2"),
    "wider, N = 12": (12, "3:4"),
    "wider, N = 16": (16, "3:4, 10:2"),
}


class Rollouts:
    """A resumable JSON-lines store of what each (arm, prompt) ran: one record per key."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.records = {}
        if path.exists():
            for line in path.read_text().splitlines():
                record = json.loads(line)
                self.records[(record["arm"], record["prompt"])] = record

    def get(self, arm: str, prompt: int, make, *args):
        """The record of (arm, prompt), made by ``make(*args)`` unless stored."""
        if (arm, prompt) not in self.records:
            record = {"arm": arm, "prompt": prompt, **make(*args)}
            self.records[(arm, prompt)] = record
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as file:
                file.write(json.dumps(record) + "\n")
        return self.records[(arm, prompt)]


def full_rollouts(backend: ShapesBackend, steps: int, prompt: int, seeds: int) -> dict:
    spec = {"cache": None, "steps": steps}
    runs = [backend.run("full", spec, prompt, seed) for seed in range(seeds)]
    return {"scores": [run[0] for run in runs], "calls": [run[2] - run[3] for run in runs]}


def cached_drafts(backend: ShapesBackend, steps: int, tau: float, prompt: int) -> dict:
    spec = {"cache": {"mode": "adaptive", "tau": tau}, "steps": steps}
    runs = [backend.run(f"tau {tau:g}", spec, prompt, seed) for seed in range(BASE_WIDTH)]
    return {"scores": [run[0] for run in runs], "calls": [run[2] - run[3] for run in runs]}


def pruned_search(backend: ShapesBackend, steps: int, tau: float, prompt_index: int, width: int,
                  schedule: str) -> dict:
    """One pruned search through the extension's runner: the rounds, every candidate's computed calls and the
    survivors' final draft scores."""
    search = backend.extension.nodes
    spec = {"cache": {"mode": "adaptive", "tau": tau}, "steps": steps, "tau": tau}
    model = backend._model_for(f"tau {tau:g}", spec)
    prompt = backend.prompts[prompt_index]
    stage = search.stages.KSamplerStage(model, [[ball_spot_world.conditioning(prompt), {}]], backend.negative, steps,
                                        backend.cfg, "euler", "simple")
    recipe = search.stages.StagedRecipe.single(stage, backend.latents[1.0])
    window = cache_window(steps)
    plan = PruningSchedule(schedule).plan(width, steps)
    plan.check_stages(width, [CacheWindow(0, steps, window, window)])
    seeds = list(range(width))
    # The x0 estimates are in the model's own latent space, the one the verifier reads.
    result = search.pruned_search.run_pruned_search(
        recipe, seeds, plan, lambda estimates: [ball_spot_world.adherence(x0[0], prompt) for x0 in estimates])
    candidates = result.candidates
    latent_format = backend.model.model.latent_format
    finals = [ball_spot_world.adherence(latent_format.process_in(candidates.draft_latents[i:i + 1])[0], prompt)
              for i in range(len(candidates))]
    computed = sum(d.calls_computed for d in candidates.drafts) + sum(p.draft.calls_computed
                                                                      for p in result.pruned)
    return {"survivors": list(result.survivor_indices), "finals": finals, "computed": computed,
            "search_steps": plan.search_steps(width, steps), "rounds": result.outcome.as_dict()["rounds"]}


def arm_metrics(full: np.ndarray, winners: list[int], explored: list[int], survived_best: list[bool] | None,
                computed: float, full_calls: float, commit_calls: float) -> dict:
    """full: [prompts, 16] full scores; winners: per prompt the recommitted seed; explored: seeds explored."""
    rows = np.arange(len(full))
    mean8 = full[:, :BASE_WIDTH].mean(axis=1)
    delivered = full[rows, winners]
    true_best = np.array([int(np.argmax(full[p, :n])) for p, n in enumerate(explored)])
    per_prompt = {"gain": delivered - mean8, "best_gain": full[:, :BASE_WIDTH].max(axis=1) - mean8,
                  "top1": (np.array(winners) == true_best).astype(float), "delivered": delivered}
    if survived_best is not None:
        per_prompt["survival"] = np.array(survived_best, dtype=float)

    def summarise(parts):
        summary = {"capture": _capture(parts["gain"], parts["best_gain"]), "top1": parts["top1"].mean(),
                   "delivered": parts["delivered"].mean()}
        if "survival" in parts:
            summary["survival"] = parts["survival"].mean()
        return summary

    intervals = _bootstrap(per_prompt, summarise, 2000, 0)
    return {**intervals, "computed": computed, "explore_x": full_calls / computed,
            "with_commit_x": full_calls / (computed + commit_calls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=pathlib.Path, default=TRAINED_MODEL)
    parser.add_argument("--prompts", type=int, default=36)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--tau", type=float, default=0.1)
    parser.add_argument("--cfg", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "bench" / "results" / "prune_rounds")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    backend = ShapesBackend(args.model, args.cfg, args.prompts)
    store = Rollouts(args.out / "rollouts.jsonl")
    widest = max(width for width, _ in PRUNED_ARMS.values())
    start = time.perf_counter()
    for prompt in range(args.prompts):
        store.get("full", prompt, full_rollouts, backend, args.steps, prompt, widest)
        store.get(f"tau {args.tau:g}", prompt, cached_drafts, backend, args.steps, args.tau, prompt)
        for name, (width, schedule) in PRUNED_ARMS.items():
            store.get(name, prompt, pruned_search, backend, args.steps, args.tau, prompt, width, schedule)
        print(f"[prune_rounds] prompt {prompt + 1} / {args.prompts} ({time.perf_counter() - start:.0f} s)", flush=True)

    prompts = range(args.prompts)
    full = np.array([store.records[("full", p)]["scores"] for p in prompts])
    steps = args.steps
    full_calls = BASE_WIDTH * steps * args.prompts
    arms = {"full best-of-8": arm_metrics(full, [int(np.argmax(row[:BASE_WIDTH])) for row in full],
                                          [BASE_WIDTH] * len(full), None, full_calls, full_calls, 0)}
    cached = [store.records[(f"tau {args.tau:g}", p)] for p in prompts]
    arms[f"cache alone (tau {args.tau:g}), N = 8"] = arm_metrics(
        full, [int(np.argmax(r["scores"])) for r in cached], [BASE_WIDTH] * len(full), None,
        sum(sum(r["calls"]) for r in cached), full_calls, steps * args.prompts)
    asked = {}
    for name, (width, schedule) in PRUNED_ARMS.items():
        records = [store.records[(name, p)] for p in prompts]
        winners = [r["survivors"][int(np.argmax(r["finals"]))] for r in records]
        survived = [int(np.argmax(full[p, :width])) in r["survivors"] for p, r in enumerate(records)]
        arms[f"{name}: \"{schedule}\""] = arm_metrics(full, winners, [width] * len(full), survived,
                                                     sum(r["computed"] for r in records), full_calls,
                                                     steps * args.prompts)
        asked[f"{name}: \"{schedule}\""] = records[0]["search_steps"]
    window = cache_window(steps)

    def plan_at(schedule):
        def checked(width):
            plan = PruningSchedule(schedule).plan(width, steps)
            plan.check_stages(width, [CacheWindow(0, steps, window, window)])
            return plan
        return checked

    budget = BudgetPlan(rollouts=7, max_candidates=16)
    chosen = {schedule: pruned_budget_width(plan_at(schedule), steps, budget) for schedule in ("3:4", "3:4, 10:2")}
    lines = [
        f"# Pruning in rounds on the ball-and-spot model ({args.prompts} prompts, {steps} steps, tau {args.tau:g}, "
        f"warmup = cooldown = {window})", "",
        f"`{' '.join(sys.argv)}`, {time.perf_counter() - start:.0f} s here (rollouts reused from "
        f"{args.out / 'rollouts.jsonl'} are not timed).", "",
        "| arm | sampler steps asked per prompt | computed calls (explore; vs full best-of-8) | with commit | capture of "
        "best-of-8 gain | top-1 | true best survives every round | delivered score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, metrics in arms.items():
        survival = metrics.get("survival", "-")
        lines.append(f"| {name} | {asked.get(name, '-')} | {metrics['computed']:.0f} ({metrics['explore_x']:.2f}x) | "
                     f"{metrics['with_commit_x']:.2f}x | {metrics['capture']} | {metrics['top1']} | {survival} | "
                     f"{metrics['delivered']} |")
    lines += ["", f"Full best-of-8 computes {full_calls} calls ({BASE_WIDTH} x {steps} per prompt). Capture: delivered "
              "score minus the mean full score of seeds 0-7, over best-of-8's; top-1 and survival against the best "
              "full rollout among the seeds the arm explored; 95 % prompt-bootstrap intervals.", "",
              f"Width from savings (`pruned_budget_width`, budget of {budget.rollouts} full rollouts = "
              f"{budget.rollouts * steps} steps with the commit): " + "; ".join(
                  f"\"{schedule}\" chooses N = {c.width} ({c.width_steps} + {steps} steps)"
                  for schedule, c in chosen.items()), ""]
    report = "\n".join(lines)
    (args.out / "report.md").write_text(report + "\n")
    print(report)


if __name__ == "__main__":
    main()
