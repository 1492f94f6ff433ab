"""Ranking-fidelity audit (report Sec. 4 protocol): full rollouts against seed-matched cheap drafts.

On the small Wan model trained here on the ball-and-spot world (scripts/ball_spot_world.py; CPU):

    .venv/bin/python -m bench.audit [--prompts 12] [--seeds 8] [--steps 30] [--taus 0.05 0.1 0.2 0.3 0.5] [--out DIR]

On real weights through a real ComfyUI server (GPU), with one of the example workflows and a prompt file:

    .venv/bin/python -m bench.audit --workflow "workflows/api/01 Wan 2.1 (start here).json" \\
        --models /path/to/ComfyUI/models --prompt-file prompts.txt --seeds 8 --steps 50 --out audit_wan21

For P prompts x S seeds it scores the full-compute rollout and the drafts of every arm: CachedSearch at each
tau, the static cache computing every 2nd and every 3rd step, half the steps (T/2), half the resolution (scored
upsampled), and ComfyUI's EasyCache at the threshold that skips as many calls as tau 0.10. Rollouts are kept in DIR/scores.jsonl, so a stopped audit resumes without
recomputing. Writes DIR/report.md (the report's Sec. 4.1 metrics, bootstrap intervals, tau*) and
DIR/capture_vs_speedup.svg.

Two searches are audited too (shapes mode for the pruned one): the pruned search at the tau nearest 0.10 (every seed
drafted to --prune x steps, the --keep best previews continued; capture, top-1, regret, how often the true best seed
survives) and the fixed-budget search (drafts while their computed transformer calls plus one recommit fit in
--budget-rollouts full rollouts) against full best-of-M at that cost. --search-arms collects only what these need
(full, the tau nearest 0.10, the pruned searches) and writes DIR/search_arms.md.

--calibration I (shapes mode) runs what CachedSearch Calibrate runs, on the world's prompt I (0-35): the full and
tau arms on --seeds seeds, and writes the node's table (cachedsearch_core.calibration_results) to
DIR/calibration.md and its rows to DIR/calibration.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import pathlib
import sys
import time

import numpy as np
import torch

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import ball_spot_world  # noqa: E402
from bench.train_tiny_wan import DEFAULT_OUT as TRAINED_MODEL, TRAINING_SHIFT  # noqa: E402
from cachedsearch_core.audit import (  # noqa: E402
    FULL_ARM, ScoreStore, evaluate_arms, markdown_report, recommend_tau, svg_plot, tau_arm,
)
from cachedsearch_core.calibration import CalibrationPlan  # noqa: E402
from cachedsearch_core.calibration_results import Calibration  # noqa: E402
from cachedsearch_core.pruning import PruningPlan  # noqa: E402
from cachedsearch_core.search_audit import budget_search_gain, pruned_search_fidelity  # noqa: E402
from scripts import comfy_runtime  # noqa: E402


def arm_specs(taus: list[float], steps: int) -> dict[str, dict]:
    """Drafting arms: the cache settings (None = no cache) and steps of each."""
    arms = {FULL_ARM: {"cache": None, "steps": steps}}
    for tau in taus:
        arms[tau_arm(tau)] = {"cache": {"mode": "adaptive", "tau": tau}, "steps": steps, "tau": tau}
    for interval in (2, 3):
        arms[f"static every {interval}"] = {"cache": {"mode": "static", "static_interval": interval}, "steps": steps}
    arms["T/2 steps"] = {"cache": None, "steps": steps // 2}
    arms["half resolution"] = {"cache": None, "steps": steps, "resolution": 0.5}
    return arms


def cache_window(steps: int) -> int:
    return max(1, round(steps / 10))  # K_w = K_c = 5 at 50 steps, scaled to shorter schedules


class ShapesBackend:
    """KSampler rollouts of the trained shapes model in an in-process ComfyUI, scored analytically."""

    def __init__(self, model_path: pathlib.Path, cfg: float, prompt_count: int):
        base = comfy_runtime.scratch_directory("cachedsearch_audit_")
        comfy_runtime.prepare_base_directory(base)
        (base / "models" / "diffusion_models" / model_path.name).symlink_to(model_path.resolve())
        nodes = comfy_runtime.load_in_process(base)
        self.extension = comfy_runtime.loaded_extension(base)
        self.mapping = nodes.NODE_CLASS_MAPPINGS
        model = self.one("UNETLoader", unet_name=model_path.name, weight_dtype="default")
        self.model = self.one("ModelSamplingSD3", model=model, shift=TRAINING_SHIFT)
        self.cfg = cfg
        self.latents = {scale: self.one("EmptyHunyuanLatentVideo", width=round(8 * ball_spot_world.SIZE * scale),
                                        height=round(8 * ball_spot_world.SIZE * scale),
                                        length=4 * ball_spot_world.FRAMES - 3,
                                        batch_size=1) for scale in (1.0, 0.5)}
        self.negative = [[ball_spot_world.conditioning(None), {}]]
        prompts = ball_spot_world.PROMPTS
        self.prompts = [prompts[(7 * index) % len(prompts)] for index in range(prompt_count)]
        self.models: dict[str, object] = {}

    def one(self, node_id, **inputs):
        (result,) = comfy_runtime.run_node(self.mapping[node_id], **inputs)
        return result

    def _model_for(self, arm: str, spec: dict):
        if arm not in self.models:
            model = self.model
            if spec.get("cache"):
                window = cache_window(spec["steps"])
                settings = {"mode": "adaptive", "tau": 0.1, "warmup_steps": window, "cooldown_steps": window,
                            "static_interval": 2, **spec["cache"]}
                model = self.one("CachedSearchApplyCache", model=model, **settings)
            elif "easycache" in spec:
                model = self.one("EasyCache", model=model, reuse_threshold=spec["easycache"], start_percent=0.1,
                                 end_percent=0.9, verbose=False)
            self.models[arm] = model
        return self.models[arm]

    def run(self, arm: str, spec: dict, prompt_index: int, seed: int) -> tuple[float, float, int, int]:
        """(score, seconds, transformer calls, calls skipped) of one rollout."""
        observed, runs = self._model_for(arm, spec).clone(), []
        observed.model_options["transformer_options"][
            self.extension.nodes.cache_patch.STATISTICS_CALLBACK_OPTION] = runs.append
        prompt = self.prompts[prompt_index]
        easycache_log = EasyCacheSkipLog()
        start = time.perf_counter()
        with easycache_log:
            out = self.one("KSampler", model=observed, seed=seed, steps=spec["steps"], cfg=self.cfg,
                           sampler_name="euler", scheduler="simple",
                           positive=[[ball_spot_world.conditioning(prompt), {}]],
                           negative=self.negative, latent_image=self.latents[spec.get("resolution", 1.0)],
                           denoise=1.0)
        seconds = time.perf_counter() - start
        calls = sum(r.calls for r in runs) or spec["steps"]
        skipped = sum(r.calls_skipped for r in runs) + easycache_log.skipped
        # KSampler returns latents in the VAE's scale (Wan's latent mean/std); the model was trained in its own.
        latent = self.model.model.latent_format.process_in(out["samples"])[0]
        size = ball_spot_world.SIZE
        if latent.shape[-1] != size:  # a half-resolution draft is scored upsampled, as a preview would be
            latent = torch.nn.functional.interpolate(latent.transpose(0, 1), size=(size, size),
                                                     mode="bilinear").transpose(0, 1)
        return ball_spot_world.adherence(latent, prompt), seconds, calls, skipped

    def describe(self) -> str:
        return (f"small Wan model trained on the ball-and-spot world, euler/simple, cfg {self.cfg}, shift "
                f"{TRAINING_SHIFT}, analytic prompt-adherence verifier")


class WorkflowBackend:
    """One-candidate runs of an example workflow (API format) on a real server, scored by its Verifier node."""

    def __init__(self, workflow_path: pathlib.Path, models: pathlib.Path, prompts: list[str]):
        self.workflow = json.loads(workflow_path.read_text())
        self.prompts = prompts
        kinds = {node["class_type"] for node in self.workflow.values()}
        for required in ("CachedSearchApplyCache", "CachedSearchVerifier", "PrimitiveStringMultiline"):
            if required not in kinds:
                sys.exit(f"--workflow: {workflow_path} has no {required} node; use one of workflows/api/")
        base = comfy_runtime.scratch_directory("cachedsearch_audit_")
        comfy_runtime.prepare_base_directory(base)
        paths = base / "extra_model_paths.yaml"
        paths.write_text(f"audit:\n    base_path: {models}\n    diffusion_models: diffusion_models\n"
                         "    text_encoders: text_encoders\n    vae: vae\n    image_reward: image_reward\n")
        self.server = comfy_runtime.ComfyServer(base, cpu=False, extra_args=["--extra-model-paths-config", str(paths)])
        self.server.start()

    def run(self, arm: str, spec: dict, prompt_index: int, seed: int) -> tuple[float, float, int, int]:
        return run_audit_graph(self.server, self.workflow, spec, self.prompts[prompt_index], seed)

    def describe(self) -> str:
        return f"workflow on real weights, {len(self.prompts)} prompts"


def audit_graph(workflow: dict, spec: dict, prompt: str, seed: int) -> dict:
    """One example workflow (API format) turned into one scored rollout of ``spec``: one candidate with
    ``seed``, the arm's cache and steps, no recommit or saving; the Verifier's scores feed a PreviewAny."""
    graph = copy.deepcopy(workflow)
    key = {node["class_type"]: key for key, node in graph.items()}
    search_key = key.get("CachedSearchSampler") or key["CachedSearchSamplerAdvanced"]
    graph[key["PrimitiveStringMultiline"]]["inputs"]["value"] = prompt
    search = graph[search_key]["inputs"]
    search.update(seed=seed, num_candidates=1)
    (graph[key["BasicScheduler"]]["inputs"] if "BasicScheduler" in key else search)["steps"] = spec["steps"]
    if "resolution" in spec:
        size = next(n["inputs"] for n in graph.values() if {"width", "height"} <= n["inputs"].keys())
        size.update(width=16 * round(size["width"] * spec["resolution"] / 16),
                    height=16 * round(size["height"] * spec["resolution"] / 16))
    cache = graph[key["CachedSearchApplyCache"]]
    if "easycache" in spec:
        cache.update(class_type="EasyCache", inputs={"model": cache["inputs"]["model"],
                                                     "reuse_threshold": spec["easycache"], "start_percent": 0.1,
                                                     "end_percent": 0.9, "verbose": False})
    else:
        window = cache_window(spec["steps"])
        cache["inputs"].update({"mode": "off", "warmup_steps": window, "cooldown_steps": window,
                                **(spec.get("cache") or {})})
    for unused in [k for k, n in graph.items() if n["class_type"] in ("CachedSearchRecommit", "CreateVideo", "SaveVideo")
                   or (n["class_type"].startswith("VAEDecode") and n["inputs"]["samples"][0] != search_key)]:
        del graph[unused]
    graph["audit_output"] = {"class_type": "PreviewAny", "inputs": {"source": [key["CachedSearchVerifier"], 1]}}
    return graph


def run_audit_graph(server, workflow: dict, spec: dict, prompt: str, seed: int) -> tuple[float, float, int, int]:
    """(score, seconds, transformer calls, calls skipped) of one rollout through ``server``."""
    graph = audit_graph(workflow, spec, prompt, seed)
    entry = server.run_prompt(graph, timeout=6 * 3600)
    verifier_key = next(k for k, n in graph.items() if n["class_type"] == "CachedSearchVerifier")
    (row,) = entry["outputs"][verifier_key]["cachedsearch_ranking"]
    return row["score"], row["seconds"], row["calls"] or spec["steps"], row["skipped"]


class EasyCacheSkipLog(logging.Handler):
    """Reads EasyCache's one summary line ("skipped K/N steps") while a rollout runs."""

    def __init__(self):
        super().__init__()
        self.skipped = 0

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("EasyCache - skipped "):
            self.skipped += int(message.split("skipped ")[1].split("/")[0])

    def __enter__(self):
        root = logging.getLogger()
        self.previous_level = root.level
        root.setLevel(logging.INFO)
        root.addHandler(self)
        return self

    def __exit__(self, *exc_info):
        root = logging.getLogger()
        root.removeHandler(self)
        root.setLevel(self.previous_level)


def match_easycache(backend, steps: int, target_skips: float) -> float:
    """EasyCache's reuse_threshold whose skips on one rollout come closest to ``target_skips`` (bisection)."""
    low, high, best = 0.0, 3.0, (0.0, float("inf"))
    for _ in range(8):
        threshold = (low + high) / 2
        _, _, _, skipped = backend.run(f"easycache {threshold}", {"easycache": threshold, "steps": steps}, 0, 0)
        if abs(skipped - target_skips) < best[1]:
            best = (threshold, abs(skipped - target_skips))
        low, high = (threshold, high) if skipped < target_skips else (low, threshold)
    return best[0]


def target_checks(results, reference_tau: float, target: float) -> str:
    """Whether the world separates the arms (issue targets): a best-of-N gain well above its bootstrap noise, T/2
    truncation capturing less than the cache at ``reference_tau`` with disjoint intervals, capture falling with tau
    so that tau* is an interior choice."""
    by_arm = {r.arm: r.fidelity for r in results}
    best_gain = results[0].fidelity.best_gain
    half_width = (best_gain.high - best_gain.low) / 2
    reference, truncated = by_arm[f"tau {reference_tau:g}"].capture_of_means, by_arm["T/2 steps"].capture_of_means
    sweep = sorted((r.tau, r.fidelity.capture_of_means.value) for r in results if r.tau is not None)
    falling = all(later <= earlier for (_, earlier), (_, later) in zip(sweep, sweep[1:])) and sweep[-1][1] < sweep[0][1]
    tau_star = recommend_tau(results, target)
    interior = tau_star is not None and tau_star < sweep[-1][0]

    def verdict(passed):
        return "met" if passed else "NOT met"

    return "\n".join([
        f"- best-of-N gain {best_gain} is {best_gain.value / half_width:.1f}x its bootstrap half-width "
        f"(target >= 3): {verdict(best_gain.value >= 3 * half_width)}",
        f"- T/2 capture {truncated} below tau {reference_tau:g} capture {reference} with disjoint intervals: "
        f"{verdict(truncated.high < reference.low)}",
        f"- capture over the tau sweep ({', '.join(f'{tau:g}: {value:.3f}' for tau, value in sweep)}) never rises "
        f"and ends lower: {verdict(falling)}; tau* {tau_star} is interior: {verdict(interior)}",
    ])


def pruned_arm_names(plan: PruningPlan, steps: int, tau: float) -> tuple[str, str]:
    """Store arms of a pruned search: every seed's preview score, and the survivors' final draft scores."""
    name = f"pruned tau {tau:g} at {plan.prune_step}/{steps} keep {plan.keep}"
    return f"{name} preview", name


def run_pruned_prompt(backend: ShapesBackend, spec: dict, plan: PruningPlan, prompt_index: int, seeds: list[int]
                      ) -> tuple[list[tuple], dict[int, tuple]]:
    """One pruned search over ``seeds`` for a prompt, scored by the world's verifier: (per seed (preview score,
    seconds, calls, skipped), the costs those of a dropped seed and 0 for a survivor; per surviving seed index
    (final draft score, seconds, calls, skipped) of its whole trajectory)."""
    search = backend.extension.nodes
    model = backend._model_for(f"tau {spec['tau']:g}", spec)
    prompt = backend.prompts[prompt_index]
    stage = search.stages.KSamplerStage(model, [[ball_spot_world.conditioning(prompt), {}]], backend.negative,
                                        spec["steps"], backend.cfg, "euler", "simple")
    recipe = search.stages.StagedRecipe.single(stage, backend.latents[1.0])
    # The x0 estimates are in the model's own latent space, the one the verifier reads.
    result = search.pruned_search.run_pruned_search(
        recipe, seeds, plan, lambda estimates: [ball_spot_world.adherence(x0[0], prompt) for x0 in estimates])
    pruned = {seeds.index(candidate.draft.seed): candidate.draft for candidate in result.pruned}
    finals = {}
    latent_format = backend.model.model.latent_format
    for position, (index, draft) in enumerate(zip(result.survivor_indices, result.candidates.drafts)):
        latent = latent_format.process_in(result.candidates.draft_latents[position:position + 1])[0]
        finals[index] = (ball_spot_world.adherence(latent, prompt), draft.seconds,
                         draft.calls_computed + draft.calls_skipped, draft.calls_skipped)
    # A survivor's cost is in its final record (its calls to the prune step and after), a dropped seed's here.
    previews = []
    for index, score in enumerate(result.preview_scores):
        draft = pruned.get(index)
        previews.append((score, draft.seconds, draft.calls_computed + draft.calls_skipped, draft.calls_skipped)
                        if draft is not None else (score, 0.0, 0, 0))
    return previews, finals


def collect_pruned(backend: ShapesBackend, store: ScoreStore, spec: dict, plan: PruningPlan, prompt_ids, seeds
                   ) -> None:
    """Pruned searches of every prompt not yet complete in ``store`` (a prompt is one search, stored whole)."""
    preview_arm, final_arm = pruned_arm_names(plan, spec["steps"], spec["tau"])
    for prompt_id in prompt_ids:
        if all(store.has(preview_arm, prompt_id, seed) for seed in seeds):
            continue
        previews, finals = run_pruned_prompt(backend, spec, plan, prompt_id, list(seeds))
        for index, seed in enumerate(seeds):
            if index in finals:
                store.add(final_arm, prompt_id, seed, *finals[index])
        for seed, record in zip(seeds, previews):
            store.add(preview_arm, prompt_id, seed, *record)
    print(f"[audit] {final_arm}: {len(prompt_ids)} pruned searches scored", flush=True)


def search_arms_report(store: ScoreStore, prompt_ids, seeds, steps: int, plan: PruningPlan | None, pruned_tau,
                       taus: list[float], budget_rollouts: int) -> str:
    """Markdown: the pruned search's capture, top-1, regret and true-best survival rate; the fixed-budget search's
    gain against full best-of-M at equal transformer-call cost, for each tau whose drafts the store holds."""
    full = store.table(FULL_ARM, prompt_ids, seeds)
    lines = []
    if plan is not None:
        preview_arm, final_arm = pruned_arm_names(plan, steps, pruned_tau)
        previews = store.table(preview_arm, prompt_ids, seeds)
        finals = np.array([[store.records[(final_arm, p, s)]["score"] if store.has(final_arm, p, s) else np.nan
                            for s in seeds] for p in prompt_ids])
        records = [r for r in store.records.values()
                   if r["arm"] in (preview_arm, final_arm) and r["prompt"] in prompt_ids]
        made = sum(r["calls"] for r in records)
        computed = made - sum(r["skipped"] for r in records)
        report = pruned_search_fidelity(full, previews, finals, plan.keep)
        cached = store.table(f"tau {pruned_tau:g}", prompt_ids, seeds, "calls").sum() \
            - store.table(f"tau {pruned_tau:g}", prompt_ids, seeds, "skipped").sum()
        full_calls = store.table(FULL_ARM, prompt_ids, seeds, "calls").sum()
        lines += [
            f"Pruned search (tau {pruned_tau:g}, every seed drafted to step {plan.prune_step} of {steps}, previews "
            f"scored on the sampler's x0 estimate there, the best {plan.keep} of {len(seeds)} continued, the best "
            f"final draft recommitted):", "",
            "| search | calls computed (vs full) | capture (ratio of means) | top-1 | regret | true best survives |",
            "|---|---|---|---|---|---|",
            f"| pruned, keep {plan.keep} | {computed} of {made} made ({full_calls / computed:.2f}x; "
            f"cached unpruned {full_calls / cached:.2f}x) | {report.capture_of_means} | {report.top1} "
            f"| {report.regret} | {report.survival} |", "",
        ]
    lines += [f"Fixed-budget search: the budget is {budget_rollouts} full rollouts in transformer calls "
              f"({budget_rollouts} x {steps}); drafts of seeds 0, 1, ... while their computed calls plus one full "
              f"recommit fit (no recommit while every draft skipped nothing: the commit is free; N capped at the "
              f"{len(seeds)} seeds drafted), against full best-of-{budget_rollouts} over seeds 0..M-1:", "",
              f"| drafts | N per prompt (mean, range) | capped at {len(seeds)} | spent of budget | budget search gain "
              f"| full best-of-{budget_rollouts} gain | gain ratio |", "|---|---|---|---|---|---|---|"]
    for tau in taus:
        arm = f"tau {tau:g}"
        if not all(store.has(arm, p, s) for p in prompt_ids for s in seeds):
            continue
        costs = store.table(arm, prompt_ids, seeds, "calls") - store.table(arm, prompt_ids, seeds, "skipped")
        report = budget_search_gain(full, store.table(arm, prompt_ids, seeds), costs, steps, budget_rollouts)
        lines.append(f"| {arm} | {np.mean(report.widths):.2f} ({min(report.widths)}-{max(report.widths)}) "
                     f"| {report.width_capped} | {100 * report.spent_share:.0f} % | {report.budget_gain} "
                     f"| {report.full_gain} | {report.gain_ratio} |")
    lines.append("")
    lines.append("Gains: delivered full-compute score minus the mean over all seeds (a single random seed); 95 % "
                 "prompt-bootstrap intervals.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=pathlib.Path, default=TRAINED_MODEL, help="shapes mode: the trained model")
    parser.add_argument("--workflow", type=pathlib.Path, help="real mode: an API workflow from workflows/api/")
    parser.add_argument("--models", type=pathlib.Path, help="real mode: the ComfyUI models folder")
    parser.add_argument("--prompt-file", type=pathlib.Path, help="real mode: one prompt per line")
    parser.add_argument("--prompts", type=int, default=12, help="shapes mode: how many prompts")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--cfg", type=float, default=4.0, help="shapes mode: guidance scale")
    parser.add_argument("--taus", type=float, nargs="+", default=[0.05, 0.10, 0.20, 0.30, 0.50])
    parser.add_argument("--target", type=float, default=0.85, help="capture target for tau*")
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "bench" / "results" / "audit")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--only", nargs="+", metavar="ARM",
                        help="only collect these arms' rollouts and stop (run several at once on one --out; "
                             "a final run without --only writes the report)")
    parser.add_argument("--prune", type=float, default=0.4,
                        help="shapes mode: pruned search's prune step as a fraction of --steps (the report: 20/50)")
    parser.add_argument("--keep", type=int, default=4, help="shapes mode: seeds the pruned search continues")
    parser.add_argument("--budget-rollouts", type=int, default=4,
                        help="fixed-budget search: spend what full best-of-M costs, M = this")
    parser.add_argument("--calibration", type=int, metavar="PROMPT",
                        help="shapes mode: only the full and tau arms on the world's prompt PROMPT (0-35), as "
                        "CachedSearch Calibrate measures them; write DIR/calibration.md and stop")
    parser.add_argument("--search-arms", action="store_true",
                        help="only the full rollouts, the tau nearest 0.10 and the pruned search; write "
                             "DIR/search_arms.md (pruned and fixed-budget search) and stop")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    if args.workflow:
        if not (args.models and args.prompt_file):
            sys.exit("--workflow needs --models (ComfyUI models folder) and --prompt-file (one prompt per line)")
        prompts = [line.strip() for line in args.prompt_file.read_text().splitlines() if line.strip()]
        backend = WorkflowBackend(args.workflow, args.models, prompts)
        prompt_count = len(prompts)
    else:
        if not args.model.exists():
            sys.exit(f"--model: {args.model} does not exist; train it with `python -m bench.train_tiny_wan`")
        backend = ShapesBackend(args.model, args.cfg, args.prompts)
        prompt_count = args.prompts

    if args.calibration is not None:
        if not isinstance(backend, ShapesBackend) or not 0 <= args.calibration < len(ball_spot_world.PROMPTS):
            sys.exit(f"--calibration: give a prompt of the world, 0 to {len(ball_spot_world.PROMPTS) - 1}, in shapes mode")
        backend.prompts, prompt_count = [ball_spot_world.PROMPTS[args.calibration]], 1
    store = ScoreStore(args.out / "scores.jsonl")
    prompt_ids, seeds = list(range(prompt_count)), list(range(args.seeds))
    arms = arm_specs(args.taus, args.steps)

    def collect(arm, spec):
        missing = [(p, s) for p in prompt_ids for s in seeds if not store.has(arm, p, s)]
        if missing:
            backend.run(arm, spec, 0, 10**6)  # untimed warm-up: model load and allocator
        for prompt_id, seed in missing:
            store.add(arm, prompt_id, seed, *backend.run(arm, spec, prompt_id, seed))
        print(f"[audit] {arm}: {len(prompt_ids) * len(seeds)} rollouts scored", flush=True)

    reference_tau = min(args.taus, key=lambda tau: abs(tau - 0.10))
    plan = PruningPlan(prune_step=round(args.prune * args.steps), keep=args.keep) \
        if isinstance(backend, ShapesBackend) else None

    def search_arms() -> str:
        if plan is not None:
            plan.check(len(seeds), args.steps, cache_window(args.steps), cache_window(args.steps))
            collect_pruned(backend, store, arms[f"tau {reference_tau:g}"], plan, prompt_ids, seeds)
        return search_arms_report(store, prompt_ids, seeds, args.steps, plan, reference_tau, args.taus,
                                  args.budget_rollouts)

    if args.calibration is not None:
        for arm in (FULL_ARM, *map(tau_arm, args.taus)):
            collect(arm, arms[arm])
        calibration = Calibration.from_store(store, CalibrationPlan(tuple(args.taus), args.seeds, 0, args.target))
        report = f"# Calibration\n\n{backend.describe()}; {ball_spot_world.prompt_text(backend.prompts[0])!r}, seeds 0-" \
                 f"{args.seeds - 1}, {args.steps} steps, warmup = cooldown = {cache_window(args.steps)}.\n\n" \
                 f"{calibration.report()}\n"
        (args.out / "calibration.md").write_text(report)
        (args.out / "calibration.json").write_text(json.dumps({"rows": calibration.rows(),
                                                               "recommended_tau": calibration.recommended_tau}))
        print(report)
        return
    if args.search_arms:
        for arm in (FULL_ARM, f"tau {reference_tau:g}"):
            collect(arm, arms[arm])
        report = f"# Pruned and fixed-budget search\n\n{backend.describe()}; {prompt_count} prompts x {len(seeds)} " \
                 f"seeds, {args.steps} steps.\n\n" + search_arms() + "\n"
        (args.out / "search_arms.md").write_text(report)
        print(report)
        return
    if args.only:
        unknown = sorted(set(args.only) - set(arms))
        if unknown:
            sys.exit(f"--only: no arm named {', '.join(unknown)}; the arms are {', '.join(arms)}")
        for arm in args.only:
            collect(arm, arms[arm])
        return
    for arm, spec in arms.items():
        collect(arm, spec)
    target_skips = store.table(f"tau {reference_tau:g}", prompt_ids, seeds, "skipped").mean()
    threshold = match_easycache(backend, args.steps, target_skips)
    arms["easycache"] = {"easycache": threshold, "steps": args.steps}
    collect("easycache", arms["easycache"])

    drafting = {arm: spec.get("tau") for arm, spec in arms.items() if arm != FULL_ARM}
    results = evaluate_arms(store, drafting, prompt_ids, seeds)
    header = (f"# Ranking-fidelity audit\n\n{backend.describe()}; {prompt_count} prompts x {len(seeds)} seeds, "
              f"{args.steps} steps; EasyCache reuse_threshold {threshold:.3f}, matched to tau {reference_tau:g}'s "
              f"skipped calls ({target_skips:.1f} per rollout).\n\n")
    report = (header + markdown_report(results, args.target) + "\n\nTargets:\n"
              + target_checks(results, reference_tau, args.target) + "\n\n" + search_arms() + "\n")
    (args.out / "report.md").write_text(report)
    (args.out / "capture_vs_speedup.svg").write_text(svg_plot(results))
    print(report)


if __name__ == "__main__":
    main()
