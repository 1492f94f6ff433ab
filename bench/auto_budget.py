"""Budget "auto" on the audit world through the real nodes (issue 51, "Benchmarks"): CachedSearch Calibrate on the
first half of the prompts, the chooser's policy for budgets of M full renders, and each chosen search run on the
held-out half against full best-of-8 and best-of-16, in computed calls and in seconds with the previews' decoding
and verifier time and the final drafts' scoring counted.

    .venv/bin/python -m bench.auto_budget [--prompts 36] [--seeds 32] [--steps 16] [--tau 0.1] [--budgets 4 8 16]
        [--out DIR]

1. Calibrate (the node, in process as a server runs it: ``bench.calibration_prompts.WorldCalibrate``) on prompts
   0..P/2-1, full compute and our cache at --tau, --seeds seeds; it records each cached rollout's previews.
2. For each M, the core's chooser (``policy_chooser.choose_within_budget``) on that calibration, as it stands (calls
   only) and with each preview weighed at its measured seconds (``weighing_previews``,
   ``previews.preview_call_equivalents``). Until the Budget's "auto" reads the calibration memory itself (issue 51
   item 3), the calibration's rollouts are read as Calibrate returns them (``recording``).
3. On prompts P/2..P-1: each chosen search through the Pruning Plan's own search (``PreviewPruning.search``: the
   world's VAE and verifier nodes score the previews) or, with no rounds, plain cached drafts; the survivors scored
   by the verifier; the best recommitted at full compute (its full rollout: what the search delivers). Full
   best-of-8 and best-of-16 are the full rollouts of seeds 0-15, each scored.

Resumable: Calibrate keeps its rollouts in DIR/user (the node's saved rollouts); every held-out rollout and search
is kept in DIR/runs.jsonl. Writes DIR/report.md. Intervals: 95 % prompt bootstrap.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time

import numpy as np
import torch

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.audit import cache_window  # noqa: E402
from bench.calibration_prompts import WorldCalibrate, audit_prompts  # noqa: E402
from cachedsearch_core.audit import FULL_ARM, tau_arm  # noqa: E402
from cachedsearch_core.auto_policy import POLICY_FIELD, PolicyTables  # noqa: E402
from cachedsearch_core.policy_chooser import (  # noqa: E402
    ChosenPolicy, choose_within_budget, fewest_calls, weighing_previews,
)
from cachedsearch_core.previews import cached_rollout, preview_call_equivalents  # noqa: E402
from cachedsearch_core.pruning import PruningSchedule  # noqa: E402
from cachedsearch_core.search_audit import _bootstrap  # noqa: E402
from cachedsearch_core.search_policy import DRAFT_PREVIEW, FullRollout, Rollouts, full_best_of, replay  # noqa: E402
from cachedsearch_core.video_score import AVERAGE  # noqa: E402
from scripts import ball_spot_world  # noqa: E402

REFERENCE_WIDTHS = (8, 16)
# The issue's "cheaper" question: capture of full best-of-8's gain, and how many times fewer exploration calls.
CAPTURE_TARGET, BASE_WIDTH, FEWER_CALLS_TARGET = 0.93, 8, 3.5


def extension_module(name: str):
    """The loaded extension's module ``nodes.<name>`` (the one Calibrate runs)."""
    return next(module for key, module in sys.modules.items() if key.endswith(f".nodes.{name}"))


def recording(rollouts_module) -> dict:
    """Every rollout Calibrate computes or reuses, by (arm, prompt text, seed), as it returns them."""
    seen, original = {}, rollouts_module.Rollouts._rollout

    def record(self, arm, label, arm_settings, recipe, prompt, seed):
        rollout = original(self, arm, label, arm_settings, recipe, prompt, seed)
        seen[arm, prompt.text, seed] = rollout
        return rollout

    rollouts_module.Rollouts._rollout = record
    return seen


def calibration_tables(seen: dict, texts: list[str], seeds: int, steps: int, tau: float):
    """The chooser's tables of the calibration, the preview cost in calls and the seconds per computed call."""
    full = [(index, seed, seen[FULL_ARM, text, seed]) for index, text in enumerate(texts) for seed in range(seeds)]
    cached = [(index, seed, seen[tau_arm(tau), text, seed]) for index, text in enumerate(texts)
              for seed in range(seeds)]
    tables = Rollouts.from_records(
        [FullRollout(index, seed, rollout.scores[0], rollout.calls) for index, seed, rollout in full],
        [cached_rollout(index, seed, tau, rollout.scores[0], rollout.calls - rollout.skipped, steps, rollout.previews)
         for index, seed, rollout in cached])
    measured = [(r.seconds, r.calls) for _, _, r in full]
    equivalents = preview_call_equivalents([r.previews for _, _, r in cached], measured)
    return tables, equivalents, float(np.median([seconds / calls for seconds, calls in measured]))


def remembered_tables(steps: int) -> dict[float, Rollouts]:
    """The chooser's tables as Budget "auto" reads them: Calibrate's entry in the calibration memory (previews
    weighed at their recorded seconds, ``PolicyTables``)."""
    entries = extension_module("calibration_graph").calibration_memory().recall_all()
    entry = next(entry for entry in entries.values() if entry.get(POLICY_FIELD, {}).get("steps") == steps)
    return dict(PolicyTables.from_record(entry[POLICY_FIELD]).tables)


class HeldOut:
    """The world's held-out prompts run through the extension's runner and the Pruning Plan's search, with the
    calibration's model, VAE, verifier and frames (``WorldCalibrate.inputs``)."""

    def __init__(self, world: WorldCalibrate, texts: list[str], steps: int, tau: float):
        self.nodes = {name: extension_module(name) for name in
                      ("runner", "stages", "pruning_nodes", "pruned_search", "previews",
                                                     "calibration_rollouts")}
        inputs = world.inputs
        self.inputs, self.texts, self.steps, self.tau = inputs, texts, steps, tau
        window = cache_window(steps)
        self.cached = self.nodes["calibration_rollouts"].cached_model(inputs["model"], window, window, tau)
        self.positive = [world.one("CLIPTextEncode", clip=inputs["clip"], text=text) for text in texts]
        self.judges = [self.nodes["calibration_rollouts"].Judge(inputs["vae"], inputs["verifier"], text,
                                                                inputs["frames_per_candidate"], inputs["latent_image"],
                                                                AVERAGE, "") for text in texts]

    def recipe(self, index: int, model):
        stages = self.nodes["stages"]
        stage = stages.KSamplerStage(model, self.positive[index], self.inputs["negative"], self.steps,
                                     self.inputs["cfg"], self.inputs["sampler_name"], self.inputs["scheduler"])
        return stages.StagedRecipe.single(stage, self.inputs["latent_image"])

    def scored(self, index: int, latents: torch.Tensor) -> tuple[list[float], float]:
        """Each latent's verifier score (decoded and judged as Calibrate judges a rollout) and the seconds."""
        start = time.perf_counter()
        scores = [self.judges[index].score({"samples": latents[i:i + 1]}, self.texts[index])[0]
                  for i in range(len(latents))]
        return scores, time.perf_counter() - start

    def full(self, index: int, seed: int) -> dict:
        runner = self.nodes["runner"]
        recipe = self.recipe(index, self.inputs["model"])
        (state,) = runner.run_stages(recipe, [runner.CandidateState.start(seed, recipe.latent)],
                                     runner.SearchProgress(self.steps))
        (score,), judged = self.scored(index, state.latent["samples"])
        return {"score": score, "calls": state.draft.calls_computed, "sampling": state.draft.seconds,
                "judging": judged}

    def preview_scores(self, index: int, recipe, round_steps):
        """Scores a round's x0 estimates as the Pruning Plan's search does (``PreviewPruning.search``: each decoded
        alone, K frames, the verifier), less the panel's frames, which this world's 16-channel frames cannot show."""
        previews, frames = self.nodes["previews"], self.inputs["frames_per_candidate"]
        scorer = previews.PreviewScorer(self.inputs["vae"], (self.nodes["pruning_nodes"].FrameJudge(
            self.inputs["verifier"], self.texts[index], frames),), frames)
        steps = iter(round_steps)

        def score(estimates):
            model = previews.preview_model(recipe, next(steps))
            return [scorer.score(model, [estimate])[0][0][0] for estimate in estimates]
        return score

    def search(self, index: int, width: int, schedule: str) -> dict:
        """The chosen search's exploration: calls, the seconds of sampling, previews and scoring the survivors, and
        the seed it recommits."""
        runner, recipe = self.nodes["runner"], self.recipe(index, self.cached)
        seeds = list(range(width))
        if schedule:
            frames = self.inputs["frames_per_candidate"]
            plan = PruningSchedule(schedule).plan(width, self.steps, frames)
            candidates = self.nodes["pruned_search"].run_pruned_search(
                recipe, seeds, plan, self.preview_scores(index, recipe, plan.round_steps)).candidates
            drafts, latents = candidates.drafts, candidates.draft_latents
            dropped, previews = [p.draft for p in candidates.pruning.pruned], candidates.pruning.preview_seconds
        else:
            states = runner.run_stages(recipe, [runner.CandidateState.start(seed, recipe.latent) for seed in seeds],
                                       runner.SearchProgress(width * self.steps))
            drafts, dropped, previews = [s.draft for s in states], [], 0.0
            latents = torch.cat([s.latent["samples"] for s in states])
        finals, judged = self.scored(index, latents)
        return {"winner": drafts[int(np.argmax(finals))].seed,
                "calls": sum(d.calls_computed for d in (*drafts, *dropped)),
                "sampling": sum(d.seconds for d in (*drafts, *dropped)), "previews": previews, "judging": judged}


class Runs:
    """Held-out runs kept in a JSON-lines file by key, so a stopped bench resumes where it was."""

    def __init__(self, path: pathlib.Path):
        self.path, self.records = path, {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    record = json.loads(line)
                    self.records[record["key"]] = record["value"]

    def get(self, key: str, compute) -> dict:
        if key not in self.records:
            self.records[key] = compute()
            with self.path.open("a") as handle:
                handle.write(json.dumps({"key": key, "value": self.records[key]}) + "\n")
        return self.records[key]


def interval(values: np.ndarray) -> str:
    return str(_bootstrap({"v": values}, lambda parts: {"v": float(parts["v"].mean())}, 2000, 0)["v"])


def arm_row(name: str, delivered: np.ndarray, calls: np.ndarray, seconds: np.ndarray, best8: np.ndarray,
            best8_calls: float, best8_seconds: float) -> str:
    return (f"| {name} | {interval(delivered)} | {interval(delivered - best8)} | {calls.mean():.1f} (worst "
            f"{calls.max():.0f}; {best8_calls / calls.mean():.2f}x fewer than best-of-8) | {seconds.mean():.2f} "
            f"({best8_seconds / seconds.mean():.2f}x fewer) |")


def references(runs: Runs, held: HeldOut, prompts: range) -> dict[int, dict]:
    """Full best-of-8 and -16 on seeds 0..15 of each held-out prompt: delivered score, calls and seconds (each
    rollout sampled and scored)."""
    out = {}
    for width in REFERENCE_WIDTHS:
        rows = [[runs.get(f"full {p} {s}", lambda: held.full(p - prompts[0], s)) for s in range(width)]
                for p in prompts]
        out[width] = {"delivered": np.array([max(r["score"] for r in row) for row in rows]),
                      "mean_seed": np.array([np.mean([r["score"] for r in row]) for row in rows]),
                      "calls": np.array([sum(r["calls"] for r in row) for row in rows], dtype=float),
                      "seconds": np.array([sum(r["sampling"] + r["judging"] for r in row) for row in rows])}
    return out


def auto_arm(runs: Runs, held: HeldOut, prompts: range, chosen: ChosenPolicy) -> dict:
    """The chosen search on every held-out prompt, its winner recommitted at full compute."""
    delivered, calls, seconds = [], [], []
    for p in prompts:
        key = f"search {p} N={chosen.width} {chosen.policy.schedule}"
        run = runs.get(key, lambda: held.search(p - prompts[0], chosen.width, chosen.policy.schedule))
        commit = runs.get(f"full {p} {run['winner']}", lambda: held.full(p - prompts[0], run["winner"]))
        delivered.append(commit["score"])
        calls.append(run["calls"] + commit["calls"])
        seconds.append(run["sampling"] + run["previews"] + run["judging"] + commit["sampling"])
    return {"delivered": np.array(delivered), "calls": np.array(calls, dtype=float), "seconds": np.array(seconds)}


def capture_lines(runs: Runs, held: HeldOut, prompts: range, tables: dict[float, Rollouts], best8: dict,
                  commit_calls: float) -> list[str]:
    """The fewest-calls policy keeping ``CAPTURE_TARGET`` of full best-of-8's gain on the calibration, held out:
    its capture (95 % prompt bootstrap) and exploration calls against full best-of-8's."""
    chosen = fewest_calls(tables, BASE_WIDTH, CAPTURE_TARGET)
    outcome = auto_arm(runs, held, prompts, chosen)
    gain, best_gain = outcome["delivered"] - best8["mean_seed"], best8["delivered"] - best8["mean_seed"]
    capture = _bootstrap({"gain": gain, "best": best_gain},
                         lambda parts: {"capture": float(parts["gain"].mean() / parts["best"].mean())}, 2000, 0)
    fewer = best8["calls"].mean() / (outcome["calls"].mean() - commit_calls)
    return [f"## Fewest calls at capture >= {CAPTURE_TARGET} of full best-of-{BASE_WIDTH}'s gain", "",
            chosen_line("chosen on the calibration", chosen),
            f"- held out: capture {capture['capture']} (target {CAPTURE_TARGET}), {fewer:.2f}x fewer exploration "
            f"calls than full best-of-{BASE_WIDTH} (target {FEWER_CALLS_TARGET}x), delivered "
            f"{outcome['delivered'].mean():.3f}, seconds {outcome['seconds'].mean():.2f}"]


def chosen_line(question: str, chosen: ChosenPolicy) -> str:
    rounds = f"\"{chosen.policy.schedule}\"" if chosen.rounds else "no pruning"
    return (f"- {question}: N = {chosen.width}, {rounds}; expected {chosen.score:.3f}, gain over full best-of-M "
            f"{chosen.gain}, {chosen.calls:.1f} calls with the commit (worst {chosen.worst_calls:.0f} of "
            f"{chosen.budget_calls:.0f}), {chosen.previews:.1f} previews, cost {chosen.cost:.1f}")


def preview_step_study(tables: dict[float, Rollouts], budgets: list[int]) -> list[str]:
    """Which of the recorded preview steps the chooser needs (issue 51 item 1's cost: each step scored costs a decode
    and a verifier call per cached rollout): with only some steps' previews kept, chosen on one half of the
    calibration's prompts and replayed on the other (both ways), the delivered score against full best-of-M."""
    (tau, table), = tables.items()
    steps, prompts = table.scored_steps(), len(table.full)
    subsets = {"all recorded": steps, "first and last": (steps[0], steps[-1]),
               **{f"step {step} alone": (step,) for step in steps}}
    halves = (slice(0, prompts // 2), slice(prompts // 2, prompts))
    lines = [f"## Preview steps the chooser needs (calibration prompts, 2-fold: chosen on one half, replayed on the "
             f"other; recorded steps {', '.join(map(str, steps))})", "",
             "| M | previews kept at | delivered minus full best-of-M's | chosen (first fold; second fold) |",
             "|---|---|---|---|"]
    for m in budgets:
        for name, kept in subsets.items():
            mask = np.zeros(table.steps, dtype=bool)
            mask[[step - 1 for step in kept]] = True
            masked = dataclasses.replace(table, previews={
                DRAFT_PREVIEW: np.where(mask, table.previews[DRAFT_PREVIEW], np.nan)})
            differences, chosen_names = [], []
            for choose_on, judge_on in (halves, halves[::-1]):
                chosen = choose_within_budget({tau: masked.subset(choose_on)}, m)
                judged = masked.subset(judge_on)
                differences.append(replay(judged, chosen.policy).delivered - full_best_of(judged, m).delivered)
                chosen_names.append(chosen.policy.name)
            lines.append(f"| {m} | {name} | {interval(np.concatenate(differences))} | {'; '.join(chosen_names)} |")
    return lines


def chosen_arms(tables: dict[float, Rollouts], equivalents: float, budgets: list[int], steps: int):
    """For each budget, the chooser's policy counting calls and counting previews too (said where it is what
    Budget "auto" chooses from the calibration memory); the lines, and the distinct policies with their names."""
    lines, arms = [], {}
    for m in budgets:
        remembered = choose_within_budget(remembered_tables(steps), m)
        for label, weighed in (("calls", tables), ("calls + previews' seconds", weighing_previews(tables,
                                                                                               equivalents))):
            chosen = choose_within_budget(weighed, m)
            same = (chosen.width, chosen.rounds) == (remembered.width, remembered.rounds)
            lines.append(chosen_line(f"M = {m}, counting {label}", chosen) +
                         (" (= Budget \"auto\"'s choice from the calibration memory)" if same else ""))
            arms.setdefault((chosen.width, chosen.policy.schedule), (chosen, []))[1].append(f"M = {m} ({label})")
    return lines, arms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=36)
    parser.add_argument("--seeds", type=int, default=32)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--tau", type=float, default=0.1)
    parser.add_argument("--budgets", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--preview-steps", action="store_true",
                        help="also study which recorded preview steps the chooser needs (minutes)")
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "bench" / "results" / "auto_budget")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    texts = audit_prompts(args.prompts)
    half = args.prompts // 2
    world = WorldCalibrate(args.out / "user", args.steps)
    seen = recording(extension_module("calibration_rollouts"))
    world(texts[:half], args.seeds, f"{args.tau:g}", 0.9)
    calibrated = time.perf_counter() - start
    tables, equivalents, per_call = calibration_tables(seen, texts[:half], args.seeds, args.steps, args.tau)
    held, runs = HeldOut(world, texts[half:], args.steps, args.tau), Runs(args.out / "runs.jsonl")
    prompts = range(half, args.prompts)
    refs = references(runs, held, prompts)
    best8 = refs[8]
    lines = [f"# Budget \"auto\" on the ball-and-spot world ({args.prompts} prompts, {args.steps} steps, tau "
             f"{args.tau:g}, calibrated on prompts 0-{half - 1} x seeds 0-{args.seeds - 1})", "",
             f"`{' '.join(sys.argv)}`", "",
             f"Calibrate took {calibrated:.0f} s (reused rollouts cost nothing); a computed call {per_call * 1e3:.1f} "
             f"ms of sampling (median), a preview (decode + verifier) {equivalents:.2f} calls' worth.", "",
             "## Chosen", ""]
    chosen_lines, arms = chosen_arms(tables, equivalents, args.budgets, args.steps)
    lines += chosen_lines
    lines += ["", f"## Held out (prompts {half}-{args.prompts - 1}; each search on seeds 0..N-1)", "",
              "| arm | delivered | minus full best-of-8's | calls with the commit | seconds (sampling, previews, "
              "scoring, commit) |", "|---|---|---|---|---|"]
    for width in REFERENCE_WIDTHS:
        ref = refs[width]
        lines.append(arm_row(f"full best-of-{width}", ref["delivered"], ref["calls"], ref["seconds"],
                             best8["delivered"], best8["calls"].mean(), best8["seconds"].mean()))
    for (width, schedule), (chosen, names) in arms.items():
        outcome = auto_arm(runs, held, prompts, chosen)
        lines.append(arm_row(f"{'; '.join(names)}: N = {width}, \"{schedule or 'no pruning'}\"",
                             outcome["delivered"], outcome["calls"], outcome["seconds"], best8["delivered"],
                             best8["calls"].mean(), best8["seconds"].mean()))
    lines += ["", *capture_lines(runs, held, prompts, tables, best8, next(iter(tables.values())).full_calls)]
    if args.preview_steps:
        lines += ["", *preview_step_study(tables, args.budgets)]
    lines.append(f"\n{time.perf_counter() - start:.0f} s here.")
    report = "\n".join(lines)
    (args.out / "report.md").write_text(report + "\n")
    print(report)


if __name__ == "__main__":
    main()
