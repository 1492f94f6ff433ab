"""Search policies side by side on the same rollouts of the audit world: chosen on one half of the prompts, reported
on the other (docs/pruning-and-budget.md, "Search policies").

    .venv/bin/python -m bench.search_policies [--seeds 48] [--prompts 36] [--steps 16] [--tau 0.1] [--out DIR]
        [--chooser M ...]

1. Collects (resumable, ``bench.policy_rollouts``) per prompt and seed the full-compute rollout and the cached draft
   with every step's preview (x0 of the cached draft, x0 of the full rollout, the two-step lookahead).
2. The preview curves: per prune step and preview kind, the rank correlation of the preview with the final
   full-compute score, and how often the best final seed is in the preview's top k (N = 16).
3. Replays a grid of policies (the core's replay, ``cachedsearch_core.search_policy``: width N, one or two rounds,
   fixed keep or a margin from the previews' measured noise, x0 or lookahead previews, widths bought from a call
   budget at the measured skip rate) on the selection half (prompts 0-17), and chooses for each goal with the core's
   chooser (``cachedsearch_core.policy_chooser``):
   - better at equal cost: exploration and commit within full best-of-8's calls on every prompt, the highest mean
     delivered score;
   - cheaper at equal quality: capture >= 0.93 of full best-of-8's gain, the fewest exploration calls.
4. Reports the chosen policies and references on the held-out half (prompts 18-35), 95 % prompt-bootstrap
   intervals, and runs every chosen x0 policy through the extension's runner there (``run_pruned_search``) to check
   the replay's calls and winners. With --chooser, the core's own chooser for those budgets, chosen and reported
   the same way. Writes DIR/report.md.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import sys
import time

import numpy as np
import torch

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.audit import TRAINED_MODEL, ShapesBackend  # noqa: E402
from bench.policy_replay import PREVIEW_KINDS, best_in_top, load_rollouts, preview_noise, spearman  # noqa: E402
from bench.policy_rollouts import LOOKAHEAD_STEPS, RolloutStore, collect  # noqa: E402
from cachedsearch_core.policy_chooser import (  # noqa: E402
    best_within, cheapest_capturing, choose_within_budget, fewest_calls,
)
from cachedsearch_core.pruning import PruningSchedule  # noqa: E402
from cachedsearch_core.search_audit import _bootstrap  # noqa: E402
from cachedsearch_core.search_policy import (  # noqa: E402
    Policy, Replay, Rollouts, Round, full_best_of, replay, replay_all, replay_block, widest_width,
)

BASE_WIDTH = 8
CURVE_WIDTH = 16
CAPTURE_TARGET = 0.93
FEWER_CALLS_TARGET = 3.5
# The previous measurement's arms (bench/prune_rounds.py), as references.
PREVIOUS_ARMS = {"one prune (the report), N = 8": (8, "40%:4"), "two rounds, N = 8": (8, "40%:4, 60%:2"),
                 "wider, N = 12": (12, "3:4"), "wider, N = 16": (16, "3:4, 10:2")}


def scheduled(width: int, schedule: str, steps: int) -> Policy:
    plan = PruningSchedule(schedule).plan(width, steps)
    return Policy(schedule, width, tuple(Round(prune.step, prune.keep) for prune in plan.rounds))


def preview_curves(rollouts: Rollouts, width: int) -> list[str]:
    """Markdown: per preview kind and prune step, rank correlation and best-in-top-k rates."""
    final = rollouts.full[:, :width]
    lines = [f"| preview | step | rank correlation with the final full score | best seed in top 1 | top 2 | top 4 | "
             f"top 8 (of {width}) | noise (preview units) |", "|---|---|---|---|---|---|---|---|"]
    for kind in PREVIEW_KINDS:
        for step in range(1, rollouts.steps):
            preview = rollouts.preview(kind, step)
            if preview is None:
                continue
            preview = preview[:, :width]
            rho = _bootstrap({"rho": spearman(preview, final)}, lambda parts: {"rho": parts["rho"].mean()}, 1000, 0)
            tops = " | ".join(f"{best_in_top(preview, final, k).mean():.2f}" for k in (1, 2, 4, 8))
            lines.append(f"| {kind} | {step} | {rho['rho']} | {tops} | "
                         f"{preview_noise(rollouts, kind, step, width):.4f} |")
    draft = rollouts.draft[:, :width]
    lines.append(f"| final cached draft | {rollouts.steps} | {spearman(draft, final).mean():.3f} | "
                 + " | ".join(f"{best_in_top(draft, final, k).mean():.2f}" for k in (1, 2, 4, 8)) + " | - |")
    return lines


def policy_grid(rollouts: Rollouts, seeds: int, budget: float) -> list[Policy]:
    """Fixed widths with one or two rounds, fixed keep or margin keep, x0 or lookahead; and per schedule the width a
    call budget buys at the measured skip rate."""
    steps = rollouts.steps
    widths = [w for w in (8, 10, 12, 16, 20, 24, 32, 40, 48) if w <= seeds]
    firsts = [(PREVIEW_KINDS[0], step) for step in (3, 4, 5, 6, 7, 9, 11) if step < steps - 2] + \
        [(PREVIEW_KINDS[2], step) for step in LOOKAHEAD_STEPS if step >= 3]
    policies = []
    for kind, step in firsts:
        noise = preview_noise(rollouts, kind, step, min(seeds, CURVE_WIDTH))
        keeps = [Round(step, k) for k in (1, 2, 3, 4, 6, 8)] + \
            [Round(step, 1, c * noise, cap) for c in (0.5, 1.0, 2.0) for cap in (4, 8)]
        seconds = [None] + [Round(later, k) for later in (11, 12) if later > step for k in (1, 2)]
        for first, second in itertools.product(keeps, seconds):
            rounds = (first,) if second is None else (first, second)
            if second is not None and (first.margin is None and first.keep <= second.keep):
                continue
            label = describe(rounds, kind)
            for width in widths:
                if width > first.keep:
                    policies.append(Policy(f"N = {width}, {label}", width, rounds, kind))
            if first.margin is None:
                width = widest_width(rollouts, rounds, budget, kind)
                if first.keep < width <= seeds:
                    policies.append(Policy(f"budget {budget:g} calls: N = {width}, {label}", width, rounds, kind))
    return policies


def describe(rounds: tuple[Round, ...], kind: str) -> str:
    parts = []
    for prune in rounds:
        keep = f"keep {prune.keep}" if prune.margin is None else \
            f"keep within {prune.margin:.4f} of the leader (at most {prune.cap})"
        parts.append(f"step {prune.step}: {keep}")
    return "; ".join(parts) + ("" if kind == PREVIEW_KINDS[0] else f" ({kind} preview)")


def summarise(rollouts: Rollouts, outcome: Replay, commit: float) -> dict:
    mean_seed, best8 = rollouts.full.mean(1), full_best_of(rollouts, BASE_WIDTH).delivered
    parts = {"delivered": outcome.delivered, "gain": outcome.delivered - mean_seed, "best_gain": best8 - mean_seed,
             "minus8": outcome.delivered - best8, "survived": outcome.survived}

    def point(values):
        return {"delivered": values["delivered"].mean(), "minus8": values["minus8"].mean(),
                "capture": values["gain"].mean() / values["best_gain"].mean(), "survived": values["survived"].mean()}

    metrics = _bootstrap(parts, point, 2000, 0)
    full_calls = BASE_WIDTH * rollouts.steps
    metrics.update(calls=float(outcome.calls.mean()), worst=float(outcome.worst.max() + commit),
                   explore_x=full_calls / outcome.calls.mean(), total_x=full_calls / (outcome.calls.mean() + commit))
    return metrics


def choose(selection: Rollouts, policies: list[Policy]) -> dict[str, Policy]:
    """The goals' winners on the selection half, among all policies, those on x0 previews, and those a Pruning Plan
    can set today (x0 previews, fixed keeps: a width and a schedule)."""
    commit, full_calls = selection.full_calls, BASE_WIDTH * selection.full_calls
    mean_seed = selection.full.mean(1)
    best_gain = (full_best_of(selection, BASE_WIDTH).delivered - mean_seed).mean()
    families = {"": lambda policy: True,
                ", x0 previews": lambda policy: policy.preview == PREVIEW_KINDS[0],
                ", settable today": lambda policy: policy.preview == PREVIEW_KINDS[0]
                and all(prune.margin is None for prune in policy.rounds)}
    replays, chosen = list(zip(policies, replay_all(selection, policies))), {}
    for family, member in families.items():
        scored = [(policy, outcome) for policy, outcome in replays if member(policy)]
        chosen[f"better at equal cost{family}"] = best_within(scored, commit, full_calls)[0]
        chosen[f"cheaper at equal quality{family}"] = cheapest_capturing(scored, mean_seed, best_gain,
                                                                         CAPTURE_TARGET)[0]
    return chosen


def row(name: str, metrics: dict, commit: float) -> str:
    return (f"| {name} | {metrics['calls']:.1f} ({metrics['explore_x']:.2f}x) | {metrics['calls'] + commit:.1f} "
            f"({metrics['total_x']:.2f}x; worst prompt {metrics['worst']:.0f}) | {metrics['delivered']} | "
            f"{metrics['minus8']} | {metrics['capture']} | {metrics['survived']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=pathlib.Path, default=TRAINED_MODEL)
    parser.add_argument("--prompts", type=int, default=36)
    parser.add_argument("--seeds", type=int, default=48)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--tau", type=float, default=0.1)
    parser.add_argument("--cfg", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--collect-only", action="store_true", help="collect the rollouts and stop")
    parser.add_argument("--replay-only", action="store_true", help="replay on the seeds collected so far")
    parser.add_argument("--no-runner-check", action="store_true", help="skip the runner check of the x0 winners")
    parser.add_argument("--chooser", type=int, nargs="*", default=[], metavar="M",
                        help="also run the core's chooser for these budgets of M full renders (about a minute each)")
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "bench" / "results" / "search_policies")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    store = RolloutStore(args.out / "rollouts.jsonl")
    start = time.perf_counter()
    backend = None
    complete = all(store.has(kind, p, s) for p in range(args.prompts) for s in range(args.seeds)
                   for kind in ("full", "cached"))
    if args.collect_only or not (args.replay_only or complete):
        backend = ShapesBackend(args.model, args.cfg, args.prompts)
        collect(backend, store, range(args.prompts), range(args.seeds), args.steps, args.tau,
                log=lambda line: print(f"{line} ({time.perf_counter() - start:.0f} s)", flush=True))
    if args.collect_only:
        return
    rollouts = load_rollouts(store, args.prompts)
    seeds = rollouts.full.shape[1]
    half = args.prompts // 2
    selection, held_out = rollouts.subset(slice(0, half)), rollouts.subset(slice(half, args.prompts))
    commit = float(args.steps)
    budget = BASE_WIDTH * args.steps - commit
    policies = policy_grid(selection, seeds, budget)
    chosen = choose(selection, policies)
    references = {f"full best-of-{width}": (full_best_of(held_out, width), 0.0) for width in (8, 16, 32)
                  if width <= seeds}
    references["cache alone, N = 8 (best final draft)"] = (replay(held_out, Policy("", 8, ())), commit)
    for name, (width, schedule) in PREVIOUS_ARMS.items():
        if width <= seeds:
            references[f"{name}: \"{schedule}\""] = (replay(held_out, scheduled(width, schedule, args.steps)), commit)
    lines = [f"# Search policies on the ball-and-spot model ({args.prompts} prompts, {args.steps} steps, tau "
             f"{args.tau:g}, seeds 0-{seeds - 1} at full compute as ground truth)", "",
             f"`{' '.join(sys.argv)}`; {len(policies)} policies replayed on the selection half (prompts 0-{half - 1}), "
             f"the winners reported on the held-out half (prompts {half}-{args.prompts - 1}).", "",
             f"## Preview curves (all {args.prompts} prompts, seeds 0-{CURVE_WIDTH - 1})", "",
             *preview_curves(rollouts, min(seeds, CURVE_WIDTH)), "", "## Chosen on the selection half", ""]
    for goal, policy in chosen.items():
        lines.append(f"- {goal}: {policy.name}")
    lines += ["", f"## Held-out half (prompts {half}-{args.prompts - 1})", "",
              "| arm | computed exploration calls per prompt (vs full best-of-8) | with the commit | delivered score | "
              "minus full best-of-8's | capture of best-of-8's gain | true best survives |",
              "|---|---|---|---|---|---|---|"]
    for name, reference in references.items():
        lines.append(row(name, summarise(held_out, *reference), reference[1]))
    outcomes = {goal: summarise(held_out, replay(held_out, policy), commit) for goal, policy in chosen.items()}
    goals_of = {}
    for goal, policy in chosen.items():
        goals_of.setdefault(policy.name, []).append(goal)
    for name, goals in goals_of.items():
        lines.append(row(f"{' = '.join(goals)}: {name}", outcomes[goals[0]], commit))
    lines += ["", "95 % prompt-bootstrap intervals. Calls: computed transformer calls per prompt, the commit a full "
              f"{args.steps}-call recommit of the winner (full best-of-N delivers its own rollouts: no commit).",
              "", *verdicts(outcomes, summarise(held_out, *references["full best-of-16"]) if seeds >= 16 else None,
                             BASE_WIDTH * args.steps)]
    if args.chooser:
        lines += ["", *core_chooser(selection, held_out, args.chooser, args.tau)]
    if not args.no_runner_check:
        lines += ["", *runner_check(backend or ShapesBackend(args.model, args.cfg, args.prompts), held_out,
                                    chosen, range(half, args.prompts), args)]
    lines.append(f"\n{time.perf_counter() - start:.0f} s here.")
    report = "\n".join(lines)
    (args.out / "report.md").write_text(report + "\n")
    print(report)


def core_chooser(selection: Rollouts, held_out: Rollouts, budgets: list[int], tau: float) -> list[str]:
    """The core's chooser (``cachedsearch_core.policy_chooser``: every width, rounds at any step keeping 1-8) chosen on
    the selection half for each budget of M full renders and for capture >= 0.93 of full best-of-M's gain, reported
    on the held-out half."""
    lines = ["The core's chooser (chosen on the selection half, reported on the held-out half; calls with the commit, "
             "worst prompt in brackets):", "",
             "| question | chosen | selection: delivered; capture | held out: delivered | minus full best-of-M's | "
             "capture of its gain | calls (worst) | exploration vs full best-of-M | seconds to choose |",
             "|---|---|---|---|---|---|---|---|---|"]
    mean_seed = held_out.full.mean(1)
    for m in budgets:
        questions = {f"best within {m} full renders": lambda: choose_within_budget({tau: selection}, m),
                     f"fewest calls at capture >= {CAPTURE_TARGET} of best-of-{m}":
                     lambda: fewest_calls({tau: selection}, m, CAPTURE_TARGET)}
        for question, choose_at in questions.items():
            started = time.perf_counter()
            chosen = choose_at()
            seconds = time.perf_counter() - started
            outcome, best = replay(held_out, chosen.policy), full_best_of(held_out, m).delivered
            minus = _bootstrap({"minus": outcome.delivered - best},
                               lambda parts: {"minus": parts["minus"].mean()}, 2000, 0)["minus"]
            capture = (outcome.delivered - mean_seed).mean() / (best - mean_seed).mean()
            commit = held_out.full_calls
            lines.append(f"| {question} | N = {chosen.width}, \"{chosen.policy.schedule}\" | {chosen.score:.3f}; "
                         f"{chosen.capture:.3f} | {outcome.delivered.mean():.3f} | {minus} | {capture:.3f} | "
                         f"{outcome.calls.mean() + commit:.1f} ({outcome.worst.max() + commit:.0f}) | "
                         f"{m * commit / outcome.calls.mean():.2f}x fewer | {seconds:.0f} |")
    return lines


def verdicts(outcomes: dict[str, dict], best_of_16: dict | None, full_calls: float) -> list[str]:
    """The issue's two goals, checked on the held-out half."""
    lines = []
    for goal, metrics in outcomes.items():
        if goal.startswith("better"):
            checks = {"with the commit within full best-of-8's calls on every prompt": metrics["worst"] <= full_calls,
                      "delivered >= full best-of-16's": best_of_16 is not None
                      and metrics["delivered"].value >= best_of_16["delivered"].value,
                      "interval of the difference to full best-of-8 above zero": metrics["minus8"].low > 0}
        else:
            checks = {f"capture >= {CAPTURE_TARGET}": metrics["capture"].value >= CAPTURE_TARGET,
                      f">= {FEWER_CALLS_TARGET}x fewer exploration calls": metrics["explore_x"] >= FEWER_CALLS_TARGET}
        verdict = "met" if all(checks.values()) else "NOT met"
        lines.append(f"- {goal}: {verdict} (" + "; ".join(f"{name}: {'yes' if passed else 'no'}"
                                                          for name, passed in checks.items()) + ")")
    return lines


def runner_check(backend, held_out: Rollouts, chosen: dict[str, Policy], prompts: range, args) -> list[str]:
    """The chosen x0 policies through ``run_pruned_search`` on the held-out prompts: calls and winners against the
    replay's."""
    from bench.prune_rounds import pruned_search

    lines = ["Runner check (held-out half, the extension's `run_pruned_search`, margin keep replayed as its fixed "
             "keep per prompt; seeds 0..N-1):", "",
             "| policy | replay calls | runner calls (worst prompt, with the commit) | same winner | "
             "delivered (replay; runner) |", "|---|---|---|---|---|"]
    for policy in {policy.name: policy for policy in chosen.values()}.values():
        if policy.preview != PREVIEW_KINDS[0]:
            continue
        replayed, ran, same, worst, delivered = 0.0, 0, 0, 0, [0.0, 0.0]
        outcome = replay_block(held_out, policy)  # seeds 0..N-1, as the runner
        for local, prompt in enumerate(prompts):
            winner, calls = int(outcome.winner[local]), float(outcome.calls[local])
            # Rounds that drop nobody are left out (a schedule's rounds keep fewer each time); a margin keep's
            # count is per prompt.
            schedule, reaching = [], policy.width
            for prune, keep in zip(policy.rounds, outcome.kept[local]):
                if keep < reaching:
                    schedule.append(f"{prune.step}:{keep}")
                    reaching = keep
            schedule = ", ".join(schedule)
            real = pruned_search(backend, args.steps, args.tau, prompt, policy.width, schedule)
            replayed += calls
            ran += real["computed"]
            worst = max(worst, real["computed"] + args.steps)
            real_winner = real["survivors"][int(np.argmax(real["finals"]))]
            same += real_winner == winner
            delivered[0] += held_out.full[local, winner] / len(prompts)
            delivered[1] += held_out.full[local, real_winner] / len(prompts)
        lines.append(f"| {policy.name} | {replayed / len(prompts):.2f} | {ran / len(prompts):.2f} ({worst}) | "
                     f"{same} of {len(prompts)} | {delivered[0]:.3f}; {delivered[1]:.3f} |")
    return lines


if __name__ == "__main__":
    main()
