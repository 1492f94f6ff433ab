"""A calibration's rollouts: its prompts, the model of each arm (our cache at a tau, ComfyUI's EasyCache or
LazyCache at a threshold, or full compute), and ``Rollouts``, which runs them one at a time through the search's own
trajectory runner, decodes and scores each with ``Judge`` and saves it at once (``SavedSetup``) so a re-queued
calibration computes only what is missing."""

from __future__ import annotations

import dataclasses
import functools
import time

import comfy.model_management

import nodes as comfy_nodes

from ..cachedsearch_core import CacheMode, StepCacheConfig
from ..cachedsearch_core.audit import FULL_ARM, ScoreStore
from ..cachedsearch_core.calibration import OUR_ENGINE, CalibrationPlan, RolloutCount, prompt_lines
from ..cachedsearch_core.calibration_experts import ExpertsPlan
from ..cachedsearch_core.combine import VerifierCombination
from ..cachedsearch_core.judge import FrameJudge
from ..cachedsearch_core.previews import PreviewCost, RolloutPreviews, preview_steps
from ..cachedsearch_core.pruning import CacheWindow, default_preview_frames
from ..cachedsearch_core.saved_keys import fingerprint, rollout_key
from ..cachedsearch_core.saved_rollouts import SavedRollout, SavedRollouts
from ..cachedsearch_core.video_score import AVERAGE
from .cache_patch import attach_step_cache
from .calibration_graph import EXPERT_INPUTS
from .calibration_inputs import COMFYUI_CACHE_WINDOW, calibrate_plans, experts_plan, thresholds_input
from .full_compute import full_compute_model
from .previews import PreviewScorer, RolloutCapture, ScoredPreviews, cache_windows, previews_of
from .pruning_nodes import latent_frames
from .prompt_graph import upstream
from .prompt_server import progress_text_sender
from .pruned_search import split_recipe
from .runner import CandidateState, FullComputeCheck, RunHooks, SearchProgress, run_stages
from .saved_drafts import saved_folder
from .stages import StagedRecipe



@dataclasses.dataclass(frozen=True)
class CalibrationPrompt:
    """A prompt the calibration rolls out: its text (what the verifier reads) and its conditioning."""

    text: str
    positive: list

    @functools.cached_property
    def fingerprint(self) -> str:
        """Its content's digest, taken once: a saved rollout's key holds it."""
        return fingerprint([self.text, self.positive])


def calibration_prompts(positive, clip, prompt: str) -> list[CalibrationPrompt]:
    """The prompts to calibrate on: the connected conditioning with the prompt text, or each line of the text
    encoded by ``clip`` (the stock CLIPTextEncode)."""
    if positive is not None and clip is not None:
        raise ValueError("positive and clip: both are connected; connect positive for one prompt, or clip (with the "
                         "prompts one per line in prompt) for several, not both")
    if clip is not None:
        encoder = comfy_nodes.CLIPTextEncode()
        return [CalibrationPrompt(line, encoder.encode(clip, line)[0]) for line in prompt_lines(prompt)]
    if positive is None:
        raise ValueError("positive: not connected; connect a prompt's conditioning, or a text encoder to clip with "
                         "the prompts one per line in prompt")
    return [CalibrationPrompt(prompt, positive)]


def comfyui_cached_model(model, engine: str, reuse_threshold: float):
    """A clone of ``model`` without any known cache, then with ComfyUI's ``engine`` node at ``reuse_threshold``."""
    node = comfy_nodes.NODE_CLASS_MAPPINGS.get(engine)
    if node is None:
        raise ValueError(f"{thresholds_input(engine)}: this ComfyUI has no {engine} node; update ComfyUI or leave "
                         "the list empty")
    return node.execute(model=full_compute_model(model), reuse_threshold=reuse_threshold, verbose=False,
                        **COMFYUI_CACHE_WINDOW).result[0]


def stage_arm_settings(tau: float | None, warmup_steps: int, cooldown_steps: int) -> dict:
    """What makes a rollout of one stage's arm, for its saved key: full compute, or our cache at ``tau`` with its
    window (which a full rollout does not depend on)."""
    if tau is None:
        return {"engine": "full compute"}
    return {"engine": OUR_ENGINE, "tau": tau, "warmup_steps": warmup_steps, "cooldown_steps": cooldown_steps}


def drafts_with_our_cache(arm_settings: dict) -> bool:
    """Whether a rollout of ``arm_settings`` (one stage's, or each expert's by name) runs our step cache in some
    stage: those are the rollouts a pruned search would draft, so they record previews."""
    stages = arm_settings.values() if all(isinstance(value, dict) for value in arm_settings.values()) \
        else [arm_settings]
    return any(stage.get("engine") == OUR_ENGINE for stage in stages)


def planned_preview_cost(inputs: dict, prompts: int) -> PreviewCost:
    """What recording previews adds to the calibration a Calibrate node's checked widget values describe (the
    canvas's cost line, ``calibration_cost``; a two-expert node's widgets hold taus_high): its cached rollouts of
    our cache, each scored at the preview steps its cache windows give."""
    shared = (inputs["seeds"], inputs["first_seed"], inputs["capture_target"], prompts)
    steps = inputs["steps"]
    if "taus_high" in inputs:
        count = experts_plan(inputs["taus_high"], inputs["taus_low"], *shared).rollout_count()
        split = inputs["split_step"]
        windows = [CacheWindow(0, split, inputs["warmup_steps_high"], inputs["cooldown_steps_high"]),
                   CacheWindow(split, steps - split, inputs["warmup_steps_low"], inputs["cooldown_steps_low"])]
        return PreviewCost(count.rollouts - count.full_rollouts, preview_steps(windows, steps), count.full_rollouts,
                           count.at_most)
    plans = calibrate_plans(inputs["taus"], *shared, inputs["easycache_thresholds"], inputs["lazycache_thresholds"])
    ours = sum(len(plan.taus) for plan in plans if plan.engine == OUR_ENGINE)
    window = CacheWindow(0, steps, inputs["warmup_steps"], inputs["cooldown_steps"])
    seeds = plans[0].prompts * plans[0].seeds
    return PreviewCost(ours * seeds, preview_steps([window], steps), seeds)


def with_preview_cost(cost: RolloutCount, previews: PreviewCost) -> dict:
    """The cost route's answer: the rollouts' cost and the previews', the canvas's line saying both."""
    return {**cost.as_dict(), **previews.as_dict(), "line": f"{cost.line()} {previews.sentence()}"}


def cached_model(model, warmup_steps: int, cooldown_steps: int, tau: float | None):
    """A clone of ``model`` with the step cache: adaptive at ``tau``, or mode off for None (bit-identical to no
    cache). Any other cache CachedSearch knows on ``model`` (an EasyCache) is detached first, so the full arm is
    full compute and each tau arm measures this cache alone."""
    mode = CacheMode.OFF if tau is None else CacheMode.ADAPTIVE
    config = StepCacheConfig(mode=mode, tau=tau or 0.0, warmup_steps=warmup_steps, cooldown_steps=cooldown_steps)
    return attach_step_cache(full_compute_model(model), config)


# The model input of each stage, for a single-stage and a two-expert calibration.
_MODEL_INPUTS = {1: ("model",), 2: tuple(EXPERT_INPUTS)}
_FULL_ARM_ADVICE = "Connect the model without that cache: Calibrate applies its own cache on a copy."


@dataclasses.dataclass(frozen=True)
class SavedSetup:
    """Where a calibration's rollouts are saved (the store a search's drafts share, in ComfyUI's user directory)
    and the fingerprint of what every rollout shares: the models, VAE and verifier as the prompt's graph builds
    them, the sampler settings, the negative conditioning, the input latent and how the verifier judges."""

    rollouts: SavedRollouts
    fingerprint: str

    @classmethod
    def of(cls, hidden, model_inputs: tuple[str, ...], settings: dict, negative, latent_image: dict,
           frames_per_candidate: int, rank_by: str, aspect_weights: str) -> SavedSetup | None:
        """None outside a server run, whose prompt alone says how the models were built."""
        prompt, node_id = hidden.prompt, str(hidden.unique_id)
        if not prompt or node_id not in prompt:
            return None
        inputs = prompt[node_id]["inputs"]
        graph = {name: upstream(prompt, inputs.get(name)) for name in (*model_inputs, "vae", "verifier")}
        setup = fingerprint([graph, settings, negative, latent_image, frames_per_candidate, rank_by, aspect_weights])
        return cls(SavedRollouts(saved_folder()), setup)

    def key(self, prompt: CalibrationPrompt, seed: int, arm_settings: dict) -> str:
        return rollout_key(self.fingerprint, prompt.fingerprint, seed, arm_settings)


class Rollouts:
    """Runs a calibration's rollouts one at a time on one progress bar (``run_stages``), scores each as it
    finishes, saves it at once (``saved``: a re-queued calibration reuses it) and keeps only its scores, seconds
    and call counts. An arm's scores of a prompt enter the store once all its seeds ran: a combined verifier
    normalises across them, as Combine Scores normalises across a search's drafts (an arm is a search of S
    drafts of each prompt). The cached rollouts' previews of a prompt are scored together once all its seeds ran
    and saved with them then: a cancel before loses only that prompt's previews, which the next run completes."""

    def __init__(self, node_id, plan: CalibrationPlan | ExpertsPlan, prompts: list[CalibrationPrompt], steps: int,
                 judge: Judge, cost: str, saved: SavedSetup | None, planned_arms: list[dict], rollouts: int):
        self.seeds, self.prompts, self.total = plan.seed_list, prompts, rollouts
        self.judge, self.saved = judge, saved
        self.announce = progress_text_sender(node_id) or (lambda text: None)
        self.steps = steps
        self.progress = SearchProgress(rollouts * steps)
        self.store = ScoreStore(None)
        self.done = self.reused = 0
        # The previews scored this run, each content once: what they cost, seconds and verifier calls.
        self.scored_previews = ScoredPreviews()
        # Each cached rollout's previews by (arm, prompt index, seed), for a policy chosen from this calibration.
        self.recorded_previews: dict[tuple[str, int, int], RolloutPreviews] = {}
        self.cost = cost
        self.start = time.perf_counter()
        found = sum(saved.rollouts.get(saved.key(prompt, seed, arm)) is not None
                    for arm in planned_arms for prompt in prompts for seed in self.seeds) if saved else 0
        self.announce(" ".join([f"calibrating: {cost}; {self.reuse_line(found)}",
                                *(saved.rollouts.problems if saved else ())]))

    def reuse_line(self, found: int) -> str:
        if self.saved is None:
            return "rollouts are not saved outside a server run"
        return f"{found} of these rollouts saved by an earlier run, reused ({self.total - found} to compute at most)"

    def run(self, arm: str, label: str, arm_settings: dict, recipe_of) -> None:
        """Every prompt's rollouts of ``arm`` on the plan's seeds, ``recipe_of(prompt)`` giving a prompt's
        trajectory."""
        for index, prompt in enumerate(self.prompts):
            recipe = recipe_of(prompt)
            where = f"prompt {index + 1} / {len(self.prompts)}, " if len(self.prompts) > 1 else ""
            rollouts = self._with_previews([self._rollout(arm, f"{label}, {where}", arm_settings, recipe, prompt,
                                                          seed) for seed in self.seeds], prompt)
            for seed, score, rollout in zip(self.seeds, self.judge.combine([r.scores for r in rollouts]), rollouts):
                self.store.add(arm, index, seed, score, rollout.seconds, calls=rollout.calls, skipped=rollout.skipped)
                if rollout.previews is not None:
                    self.recorded_previews[arm, index, seed] = rollout.previews

    def _rollout(self, arm: str, label: str, arm_settings: dict, recipe: StagedRecipe, prompt: CalibrationPrompt,
                 seed: int) -> tuple[SavedRollout, str | None, RolloutCapture | None]:
        """The rollout of ``seed`` (reused, or computed and saved at once), its saved key, and the capture of the
        previews it still needs (None: it has them, or records none)."""
        self.done += 1
        key = self.saved.key(prompt, seed, arm_settings) if self.saved is not None else None
        found = self.saved.rollouts.get(key) if key is not None else None
        # Previews are kept with the saved rollouts, where a calibration's later readers find them: none outside a
        # server run, which saves nothing.
        records_previews = key is not None and drafts_with_our_cache(arm_settings)
        steps = preview_steps(cache_windows(recipe), recipe.steps) if records_previews else ()
        if found is not None and (found.previews is not None or not steps):
            self.reused += 1
            self.progress.skip(recipe.steps)
            self.announce(f"rollout {self.done} / {self.total}: {label}seed {seed}: saved by an earlier run, reused "
                          f"({self.reused} so far)")
            return found, key, None
        if found is not None:  # saved before previews were recorded: completed, its own scores and costs kept
            self.reused += 1
            self.announce(f"rollout {self.done} / {self.total}: {label}seed {seed}: saved by an earlier run, its "
                          f"previews recorded now (to step {steps[-1]})")
            return found, key, self._captured_only(recipe, seed, steps)
        self.announce(f"rollout {self.done} / {self.total}: {label}seed {seed} ({self.reused} reused so far)")
        rollout, capture = self._computed(arm, recipe, prompt, seed, steps)
        if key is not None:
            # at once (a cancel before the prompt's previews are scored keeps its sampling), again with previews
            self.saved.rollouts.add(key, rollout)
        return rollout, key, capture

    def _with_previews(self, started: list[tuple[SavedRollout, str | None, RolloutCapture | None]],
                       prompt: CalibrationPrompt) -> list[SavedRollout]:
        """The rollouts of a prompt's seeds, those with a capture completed with its previews (the seeds' estimates
        decoded together: ``previews_of``) and saved."""
        captures = [capture for _, _, capture in started if capture is not None]
        if not captures:
            return [rollout for rollout, _, _ in started]
        previews = iter(previews_of(captures, self.judge.previews(prompt.text), self.scored_previews))
        rollouts = []
        for rollout, key, capture in started:
            if capture is not None:
                rollout = dataclasses.replace(rollout, previews=next(previews))
                self.saved.rollouts.add(key, rollout)
            rollouts.append(rollout)
        return rollouts

    def _computed(self, arm: str, recipe: StagedRecipe, prompt: CalibrationPrompt, seed: int,
                  steps: tuple[int, ...]) -> tuple[SavedRollout, RolloutCapture | None]:
        """The rollout run and scored, and the capture of its x0 estimates at ``steps`` (none: no capture)."""
        full_compute = FullComputeCheck(_MODEL_INPUTS[len(recipe.stages)], _FULL_ARM_ADVICE) \
            if arm == FULL_ARM else None
        capture = RolloutCapture(recipe, steps) if steps else None
        hooks = RunHooks(on_computed_call=capture.on_computed_call if capture else None, full_compute=full_compute)
        (state,) = run_stages(capture.recipe() if capture else recipe, [CandidateState.start(seed, recipe.latent)],
                              self.progress, hooks=hooks)
        draft = state.draft
        return SavedRollout(self.judge.score(state.latent, prompt.text), draft.seconds, draft.calls,
                            draft.calls_skipped), capture

    def _captured_only(self, recipe: StagedRecipe, seed: int, steps: tuple[int, ...]) -> RolloutCapture:
        """A saved rollout's x0 estimates at ``steps``: its trajectory sampled again only to the last of them (cut
        there as a pruned search cuts it, so every step before it is sampled as in the whole rollout)."""
        split = split_recipe(recipe, (steps[-1],))
        capture = RolloutCapture(split.recipe, steps)
        run_stages(capture.recipe(), [CandidateState.start(seed, recipe.latent)], self.progress,
                   range(split.resume_indices[0]), RunHooks(on_computed_call=capture.on_computed_call))
        self.progress.skip(recipe.steps - steps[-1])
        return capture

    def finish(self) -> None:
        """Fills the bar when fewer rollouts ran than it was sized for (the picks were not measured together)."""
        self.progress.finish()

    def header(self, settings: str, verifier, full_seconds: float) -> list[str]:
        prompts = (f"prompt {self.prompts[0].text!r}" if len(self.prompts) == 1 else
                   f"{len(self.prompts)} prompts ({self.prompts[0].text!r}, ...)")
        computed = self.done - self.reused
        saved = ([] if self.saved is None else
                 [f"saved rollouts: {self.reused} of {self.done} reused from an earlier run, {computed} computed now "
                  f"({self.saved.rollouts.folder})", *self.saved.rollouts.problems])
        return [f"CachedSearch calibration: {prompts}, seeds {self.seeds[0]}-{self.seeds[-1]}, {settings}; verifier "
                f"{self.judge.name(verifier)}",
                f"cost: {self.cost}; took {time.perf_counter() - self.start:.1f} s (a full rollout "
                f"{full_seconds:.2f} s)", *self.preview_line(), *saved, ""]

    def preview_line(self) -> list[str]:
        """What recording the cached rollouts' previews cost this run (nothing when none was scored)."""
        scored = self.scored_previews
        if not scored.verifier_calls:
            return []
        return [f"previews: {scored.previews} recorded with {scored.verifier_calls} verifier calls (a preview several "
                f"taus of a seed reach alike is scored once), {scored.seconds:.1f} s decoding and scoring"]


class Judge:
    """Scores a rollout's latent decoded by the stock VAEDecode as the search's nodes score a draft: each verifier
    through its ``FrameJudge`` (K frames; VideoScore ranked by the same rank_by and weights as the VideoScore
    Verifier), several combined as Combine Scores combines them. Tried first on the input latent, so a verifier that
    cannot read the VAE's frames fails before any rollout is spent."""

    def __init__(self, vae, verifier, prompt: str, frames_per_candidate: int, latent_image: dict,
                 rank_by: str, aspect_weights: str):
        self.vae = vae
        self.combination = verifier if isinstance(verifier, VerifierCombination) else None
        self.judges = [FrameJudge(part, prompt, frames_per_candidate, rank_by, aspect_weights)
                       for part in (self.combination.verifiers if self.combination is not None else (verifier,))]
        # Previews are scored on the frames a Pruning Plan previews at its default, whatever K the rollouts are
        # judged on: Budget "auto" then applies to a search whose Pruning Plan keeps its default.
        self.preview_frames = default_preview_frames(latent_frames(latent_image))
        self.decoder = comfy_nodes.VAEDecode()
        (frames,) = self.decoder.decode(vae, latent_image)
        for judge in self.judges:
            try:
                judge.score(frames)
            except comfy.model_management.InterruptProcessingException:
                raise
            except Exception as error:
                within = " (in the combined verifiers)" if self.combination is not None else ""
                raise ValueError(f"verifier: {judge.verifier.name}{within} could not score the frames this vae "
                                 f"decodes ({error}); connect a verifier and a VAE that belong together (a video "
                                 "model's VAE with ImageReward, a CLIP verifier or VideoScore)") from error

    def name(self, verifier) -> str:
        """The verifier's name, and how VideoScore ranks when not by its average."""
        ranked = next((judge for judge in self.judges if judge.watches_clips and judge.rank_by != AVERAGE), None)
        if ranked is None:
            return verifier.name
        weights = f" {', '.join(f'{w:g}' for w in ranked.weights.weights)}" if ranked.rank_by == "weighted" else ""
        return f"{verifier.name}, VideoScore ranked by {ranked.rank_by}{weights}"

    def previews(self, prompt: str) -> PreviewScorer:
        """Scores a rollout's previews as a pruned search at the Pruning Plan's default scores them: each verifier
        on ``preview_frames`` frames decoded from the x0 estimate."""
        judges = tuple(dataclasses.replace(judge, prompt=prompt, frames=self.preview_frames) for judge in self.judges)
        return PreviewScorer(self.vae, judges, self.preview_frames)

    def score(self, latent: dict, prompt: str) -> tuple[float, ...]:
        """Each verifier's score of the rollout against ``prompt``."""
        (frames,) = self.decoder.decode(self.vae, latent)
        return tuple(dataclasses.replace(judge, prompt=prompt).score(frames)[0] for judge in self.judges)

    def combine(self, scores: list[tuple[float, ...]]) -> list[float]:
        """One score per rollout of an arm, from each rollout's verifier scores."""
        if self.combination is None:
            return [score for (score,) in scores]
        return self.combination.combine(scores)
