"""The staged search over ComfyUI's own sampling entry points, and the CANDIDATES it hands on.

A candidate's trajectory is an ordered list of stages; each stage is one call of the function a stock node runs
(``nodes.common_ksampler`` for KSampler and KSamplerAdvanced, SamplerCustomAdvanced's ``execute`` with RandomNoise),
fed the previous stage's output latent exactly as a stock graph wires it. Noise and latent preparation are therefore
ComfyUI's own, whatever the runtime does, and a draft with nothing skipped and the recommitted winner equal the
stock graph bit for bit. A KSampler is the one-stage case; Wan 2.2 A14B's two KSamplerAdvanced nodes (high-noise
expert, then low-noise expert) are two stages.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools
import time
from typing import Protocol

import comfy.model_management
import comfy.utils
import nodes as comfy_nodes
import torch
from comfy_extras.nodes_custom_sampler import Noise_EmptyNoise, Noise_RandomNoise, SamplerCustomAdvanced

from ..cachedsearch_core import Draft, Ranking, SearchCost, StageCalls, search_report
from ..cachedsearch_core.budget import BudgetOutcome, PrunedBudget
from ..cachedsearch_core.panels import candidate_number, candidate_rows
from ..cachedsearch_core.pruning import PrunedCandidate, PruningOutcome, PruningPlan, RoundRecord, survivors
from .cache_patch import STATISTICS_CALLBACK_OPTION, TRAJECTORY_POSITION_OPTION, step_cache_config
from .full_compute import CallMeter, cache_engines_on, check_full_compute, full_compute_model
from .prompt_server import prompt_server


# Recommit's inputs for the two experts of a Wan 2.2 A14B trajectory, in stage order.
EXPERT_MODEL_INPUTS = ("model_high", "model_low")


class Stage(Protocol):
    """One stock sampling call of a trajectory, minus the seed and the input latent."""

    @property
    def patcher(self): ...

    @property
    def step_count(self) -> int: ...

    def with_model(self, model) -> Stage: ...

    def run(self, latent: dict, seed: int) -> dict: ...


@dataclasses.dataclass(frozen=True)
class KSamplerStage:
    """The arguments of ``nodes.common_ksampler`` minus seed and latent: a stock KSampler with the defaults,
    a KSamplerAdvanced with disable_noise = add_noise "disable", start/last step, and force_full_denoise =
    return_with_leftover_noise "disable"."""

    model: object
    positive: list
    negative: list
    steps: int
    cfg: float
    sampler_name: str
    scheduler: str
    denoise: float = 1.0
    disable_noise: bool = False
    start_step: int | None = None
    last_step: int | None = None
    force_full_denoise: bool = False

    @property
    def patcher(self):
        return self.model

    @property
    def step_count(self) -> int:
        """The sampler steps this call runs (what its progress callback counts)."""
        last = self.steps if self.last_step is None else min(self.last_step, self.steps)
        return max(last - (self.start_step or 0), 0)

    def with_model(self, model) -> KSamplerStage:
        return dataclasses.replace(self, model=model)

    def run(self, latent: dict, seed: int) -> dict:
        (output,) = comfy_nodes.common_ksampler(
            self.model, seed, self.steps, self.cfg, self.sampler_name, self.scheduler, self.positive, self.negative,
            latent, denoise=self.denoise, disable_noise=self.disable_noise, start_step=self.start_step,
            last_step=self.last_step, force_full_denoise=self.force_full_denoise,
        )
        return output


@dataclasses.dataclass(frozen=True)
class CustomSamplerStage:
    """The inputs of a stock SamplerCustomAdvanced with RandomNoise (DisableNoise without ``add_noise``, as the
    second of two chained SamplerCustomAdvanced nodes), minus the seed and the latent."""

    guider: object
    sampler: object
    sigmas: torch.Tensor
    add_noise: bool = True

    @property
    def patcher(self):
        return self.guider.model_patcher

    @property
    def step_count(self) -> int:
        return self.sigmas.shape[-1] - 1

    def with_model(self, model) -> CustomSamplerStage:
        # A shallow copy: the guider node's own object keeps its model and options.
        guider = copy.copy(self.guider)
        guider.model_patcher = model
        guider.model_options = model.model_options
        return dataclasses.replace(self, guider=guider)

    def run(self, latent: dict, seed: int) -> dict:
        noise = Noise_RandomNoise(seed) if self.add_noise else Noise_EmptyNoise()
        output = SamplerCustomAdvanced.execute(noise, self.guider, self.sampler, self.sigmas, latent)
        return output.result[0]


@dataclasses.dataclass(frozen=True)
class StagedRecipe:
    """A candidate's whole trajectory for any seed: the input latent and the stages it runs through, in order.
    ``stage_names`` label the stages in reports (e.g. "high noise", "low noise")."""

    stages: tuple[Stage, ...]
    latent: dict
    stage_names: tuple[str, ...] = ()

    @classmethod
    def single(cls, stage: Stage, latent: dict) -> StagedRecipe:
        return cls((stage,), latent)

    @property
    def steps(self) -> int:
        return sum(stage.step_count for stage in self.stages)

    @property
    def names(self) -> tuple[str, ...]:
        return self.stage_names or tuple(f"stage {index + 1}" for index in range(len(self.stages)))

    @property
    def stage_starts(self) -> tuple[int, ...]:
        """The trajectory step where each stage starts; every other stage-step figure is derived from these."""
        starts, step = [], 0
        for stage in self.stages:
            starts.append(step)
            step += stage.step_count
        return tuple(starts)

    @property
    def stage_boundaries(self) -> tuple[int, ...]:
        """The steps where one stage hands over to the next (a two-expert trajectory: its split step)."""
        return self.stage_starts[1:]

    def stage_at(self, step: int) -> int:
        """The index of the stage that runs ``step`` (at a boundary, the stage that ends there)."""
        return next((index for index, start in enumerate(self.stage_starts)
                     if step <= start + self.stages[index].step_count), len(self.stages) - 1)

    @property
    def model_inputs(self) -> tuple[str, ...]:
        """Recommit's input that can replace each stage's model: ``model`` for a trajectory on one model, the
        experts' ``model_high`` and ``model_low`` for two."""
        if len({id(stage.patcher) for stage in self.stages}) == 1:
            return ("model",) * len(self.stages)
        return EXPERT_MODEL_INPUTS[: len(self.stages)] if len(self.stages) == len(EXPERT_MODEL_INPUTS) else \
            tuple(f"{name} model" for name in self.names)

    def commit_models(self, **connected) -> tuple:
        """Each stage's model for a commit: what is connected to its Recommit input (``model_inputs``), else None
        (the stage's own). Raises naming an input this trajectory cannot use."""
        inputs = self.model_inputs
        for name, model in connected.items():
            if model is not None and name not in inputs:
                usable = " and ".join(dict.fromkeys(inputs))
                raise ValueError(f"{name}: this search ran {len(self.stages)} stage(s) on "
                                 f"{'one model' if inputs[0] == 'model' else 'two experts'} "
                                 f"({', '.join(self.names)}); connect {usable} instead, or leave it unconnected")
        return tuple(connected.get(name) for name in inputs)

    def without_cache(self, models: tuple = ()) -> StagedRecipe:
        """Every stage on a clone of its model (or of ``models[i]`` where given, from ``commit_models``) without any
        step cache CachedSearch knows (``full_compute_model``)."""
        models = (*models, *(None,) * (len(self.stages) - len(models)))
        return dataclasses.replace(self, stages=tuple(
            stage.with_model(full_compute_model(model if model is not None else stage.patcher))
            for stage, model in zip(self.stages, models)
        ))


@dataclasses.dataclass(frozen=True)
class CandidateState:
    """A candidate at a stage boundary: the stock output latent of its last finished stage (the recipe's latent
    before the first), with the time and cache statistics so far."""

    seed: int
    latent: dict
    seconds: float = 0.0
    stage_calls: tuple[StageCalls, ...] = ()
    # Set once a stage's cache could not serve its model and computed every call.
    cache_inactive_reason: str | None = None

    def draft(self) -> Draft:
        return Draft(
            seed=self.seed, seconds=self.seconds,
            calls_computed=sum(calls.computed for calls in self.stage_calls),
            calls_skipped=sum(calls.skipped for calls in self.stage_calls),
            stage_calls=self.stage_calls, cache_inactive_reason=self.cache_inactive_reason,
        )


class SearchProgress:
    """One progress bar over every stage of every candidate, fed by the stock sampling calls' own bars.

    Each stock call makes its own ``comfy.utils.ProgressBar``, which takes the global progress hook when it is
    created. While a stage runs, the search installs a hook that moves the call's steps to their place on the
    search's bar and hands them, with the call's live previews, to the hook installed before (the server's, which
    sends progress and raises when the user presses Cancel).
    """

    def __init__(self, total_steps: int):
        self.total = total_steps
        self.done = 0

    @contextlib.contextmanager
    def stage(self, step_count: int):
        outer = comfy.utils.PROGRESS_BAR_HOOK
        offset = self.done

        def hook(value, total, preview, *args, **kwargs):
            if outer is not None:
                outer(offset + min(value, step_count), self.total, preview, *args, **kwargs)

        comfy.utils.set_progress_bar_global_hook(hook)
        try:
            yield
        finally:
            comfy.utils.set_progress_bar_global_hook(outer)
        self.done = offset + step_count

    def finish(self):
        """Fill the bar when the search ends before its widest width (a budget stopped it)."""
        hook = comfy.utils.PROGRESS_BAR_HOOK
        if hook is not None and self.done < self.total:
            hook(self.total, self.total, None)
        self.done = self.total


def _describe_stage_cache(model) -> str:
    config = step_cache_config(model)
    if config is None:
        engines = [engine.describe(model) for engine in cache_engines_on(model)]
        # A foreign cache's skips are counted by CachedSearch's own meter, as its own cache's are.
        return f"{' + '.join(engines)}, skipped calls counted by CachedSearch" if engines else "no cache"
    if config.mode.value == "off":
        return "cache off"
    setting = f"tau {config.tau:g}" if config.mode.value == "adaptive" else f"every {config.static_interval} steps"
    return (f"cache {config.mode.value} {setting} (warmup {config.warmup_steps}, "
            f"cooldown {config.cooldown_steps})")


def describe_cache(recipe: StagedRecipe) -> str:
    descriptions = [_describe_stage_cache(stage.patcher) for stage in recipe.stages]
    if len(descriptions) > 1:
        return "; ".join(f"{name}: {description}" for name, description in zip(recipe.names, descriptions))
    if descriptions[0] == "no cache":
        return "no cache on this model: drafts cost as much as full rollouts"
    if descriptions[0] == "cache off":
        return "cache off: drafts cost as much as full rollouts"
    return descriptions[0]


@dataclasses.dataclass(frozen=True)
class SearchCandidates:
    """What the sampler hands to the verifier and recommit nodes (type CACHEDSEARCH_CANDIDATES)."""

    recipe: StagedRecipe
    drafts: tuple[Draft, ...]
    draft_latents: torch.Tensor  # [N, ...] in seed order, exactly the sampler's LATENT output
    cache_description: str
    # The stock output latent's entries besides the samples (a noise mask, ...), as drafts and keep deliver them.
    latent_entries: dict = dataclasses.field(default_factory=dict)
    # Set by a pruned search: the drafts are its survivors, this records the prune step and the dropped candidates.
    pruning: PruningOutcome | None = None
    # Set by a fixed-budget search: the width it chose and the costs it predicted (a pruned one: from its schedule).
    budget: BudgetOutcome | PrunedBudget | None = None
    # Set by a pruned search: the temp images (/view references) of the frames its Pruning Plan decoded to score
    # each candidate's preview, for the panels (seed order, every candidate).
    pruning_previews: tuple[tuple[dict, ...], ...] = ()

    @property
    def seeds(self) -> list[int]:
        return [draft.seed for draft in self.drafts]

    def __len__(self) -> int:
        return len(self.drafts)

    @property
    def first_seed(self) -> int:
        return self.pruning.seeds[0] if self.pruning is not None else self.drafts[0].seed

    @property
    def candidate_numbers(self) -> list[int]:
        """Each draft's candidate number: its place in the search's seed order, which a pruned search's survivors
        keep (candidate k has seed first_seed + k - 1)."""
        return [candidate_number(draft.seed, self.first_seed) for draft in self.drafts]

    @property
    def stage_names(self) -> tuple[str, ...]:
        """The stages' names where a trajectory has several (the experts), else none."""
        return self.recipe.names if len(self.recipe.stages) > 1 else ()

    def cost(self) -> SearchCost:
        """The search's cost before any commit: the commit predicted a full rollout, or free when every draft
        already is its seed's full-compute result (whichever wins is delivered as it is)."""
        commit_free = all(self.draft_is_full_compute(index) for index in range(len(self.drafts)))
        return SearchCost.of_search(self.drafts, self.pruning, self.budget, commit_free)

    def report(self, ranking: Ranking | None = None, cost: SearchCost | None = None) -> str:
        """The search report with ``cost`` (this search's, after what delivered it; before a commit by default)."""
        cost = cost if cost is not None else self.cost()
        lines = search_report(self.drafts, self.cache_description, cost, ranking, self.stage_names,
                              numbers=self.candidate_numbers).splitlines()
        if self.pruning is not None:
            lines = [*lines[:1], *self.pruning.report_lines(), *lines[1:]]
        if self.budget is not None:
            lines += self.budget.lines(cost)
        return "\n".join(lines)

    def draft_is_full_compute(self, index: int, models: tuple = ()) -> bool:
        """Whether the draft of ``self.drafts[index]`` already is what committing its seed would sample, so a commit
        can deliver it without sampling again: its cache skipped no transformer call, this process drafted it, it
        ran the recipe's own stock calls (a pruned search that split a stage at a round's step ran two calls where the
        commit runs one, and multistep samplers do not resume a split exactly), and the commit uses the drafts' models
        (``models`` from ``StagedRecipe.commit_models``: each unconnected, or the very model its stage ran on)."""
        if not self.drafts[index].skipped_nothing:
            return False
        if any(model is not None and model is not stage.patcher for model, stage in zip(models, self.recipe.stages)):
            return False
        return self.pruning is None or all(step in self.recipe.stage_boundaries for step in self.pruning.round_steps)

    def latent(self, samples: torch.Tensor) -> dict:
        return {**self.latent_entries, "samples": samples}


@dataclasses.dataclass(frozen=True)
class PrunedSearch:
    """A pruned search: the survivors as ordinary CANDIDATES (ranked and recommitted as today), which carry the
    record of the prune step."""

    candidates: SearchCandidates

    @property
    def outcome(self) -> PruningOutcome:
        return self.candidates.pruning

    @property
    def prune_step(self) -> int:
        return self.outcome.prune_step

    @property
    def preview_scores(self) -> tuple[float, ...]:
        """Every candidate's, in seed order."""
        return self.outcome.preview_scores

    @property
    def survivor_indices(self) -> tuple[int, ...]:
        return self.outcome.survivor_indices

    @property
    def pruned(self) -> tuple[PrunedCandidate, ...]:
        return self.outcome.pruned


def draft_rows(candidates: SearchCandidates, ranking: Ranking | None = None) -> list[dict]:
    """Per-candidate data for the frontend panels (JSON-ready): every candidate in seed order, pruned ones
    included (``candidate_rows``)."""
    return candidate_rows(candidates.drafts, candidates.stage_names, candidates.pruning, ranking)


def pruned_rows(candidates: SearchCandidates) -> list[dict]:
    """The dropped candidates of a pruned search for the frontend panels (JSON-ready): what each cost up to the
    round that dropped it, that round's step and its preview score there. Empty for an unpruned search."""
    if candidates.pruning is None:
        return []
    rows = []
    pruning = candidates.pruning
    for pruned in pruning.pruned:
        draft = pruned.draft
        index = pruning.seeds.index(draft.seed)
        rows.append({"seed": draft.seed, "preview_score": pruned.preview_score, "seconds": round(draft.seconds, 3),
                     "skipped": draft.calls_skipped, "calls": draft.calls_computed + draft.calls_skipped,
                     "prune_step": pruning.dropped_at(index)})
    return rows


def progress_text_sender(node_id):
    """A function that shows a line of text on the node in the GUI, or None outside a server run."""
    server = prompt_server()
    if server is None or node_id is None:
        return None
    return lambda text: server.send_progress_text(text, node_id)


def _observed(stage: Stage, statistics: list, meter: CallMeter) -> Stage:
    """The stage on a clone of its model that reports each sampling run's cache statistics into ``statistics`` and
    whose transformer calls ``meter`` counts."""
    model = meter.attach(stage.patcher)
    model.model_options["transformer_options"][STATISTICS_CALLBACK_OPTION] = statistics.append
    return stage.with_model(model)


@dataclasses.dataclass(frozen=True)
class FullComputeCheck:
    """Stages that must compute every call the sampler asks for: the node input that feeds each stage's model and
    what to tell the artist when a cache skipped work anyway."""

    input_names: tuple[str, ...]
    advice: str


def _run_stage(recipe: StagedRecipe, stage_index: int, states: list[CandidateState], progress: SearchProgress,
               announce=None, on_computed_call=None, full_compute: FullComputeCheck | None = None
               ) -> list[CandidateState]:
    """Advance every candidate through one stage, one candidate at a time, each run with fresh cache state and its
    calls counted by a ``CallMeter`` whatever cache runs on the model; with ``full_compute``, a candidate that
    skipped work raises as soon as its stage ends."""
    statistics = []
    meter = CallMeter(on_computed_call)
    stage = _observed(recipe.stages[stage_index], statistics, meter)
    stage_label = f"{recipe.names[stage_index]} ({stage_index + 1} / {len(recipe.stages)}), " \
        if len(recipe.stages) > 1 else ""
    advanced = []
    for index, state in enumerate(states):
        comfy.model_management.throw_exception_if_processing_interrupted()
        if announce is not None:
            announce(f"{stage_label}draft {index + 1} / {len(states)} (seed {state.seed})")
        statistics.clear()
        start = time.perf_counter()
        meter.take()
        with progress.stage(stage.step_count), meter.counting(stage.patcher):
            latent = stage.run(state.latent, state.seed)
        run = meter.take()
        if full_compute is not None:
            input_name = full_compute.input_names[stage_index]
            check_full_compute(run, recipe.stages[stage_index].patcher, input_name,
                               full_compute.advice.format(input=input_name))
        inactive_reason = next((s.inactive_reason for s in statistics if s.inactive_reason), None)
        advanced.append(dataclasses.replace(
            state, latent=latent, seconds=state.seconds + time.perf_counter() - start,
            stage_calls=(*state.stage_calls, run.calls),
            cache_inactive_reason=state.cache_inactive_reason or inactive_reason,
        ))
    return advanced


def run_stages(recipe: StagedRecipe, states: list[CandidateState], progress: SearchProgress,
               stages: range | None = None, announce=None, on_computed_call=None,
               full_compute: FullComputeCheck | None = None) -> list[CandidateState]:
    """The one trajectory runner: every candidate through ``stages`` of ``recipe`` (all of them by default), stage
    by stage, so each expert of a staged trajectory is loaded once per stage as in the stock graph.

    Every search, commit, pick, Calibrate rollout, pruned continuation, budget draft and distributed worker runs its
    seeds here: each stage is the stock sampling call, fed the previous stage's output latent; the progress bar
    moves through ``progress``; Cancel stops it before the next candidate (and inside a call, through the progress
    hook); every candidate's calls are counted. ``announce(text)``, if given, hears "draft i / N" as each
    candidate's stage starts; ``on_computed_call()``, if given, runs before each computed call (a budget stops a
    draft there by raising). With ``full_compute``, a stage that skipped any work raises (``check_full_compute``)
    instead of handing on a cached result as full compute.
    """
    for stage_index in range(len(recipe.stages)) if stages is None else stages:
        states = _run_stage(recipe, stage_index, states, progress, announce, on_computed_call, full_compute)
    return states


def candidates_from_states(recipe: StagedRecipe, states: list[CandidateState], **record) -> SearchCandidates:
    """The CANDIDATES of finished ``states`` (seed order), with a pruned or budget search's ``record``."""
    entries = {key: value for key, value in states[0].latent.items() if key not in ("samples", "batch_index")}
    return SearchCandidates(recipe, tuple(state.draft() for state in states),
                            torch.cat([state.latent["samples"] for state in states]), describe_cache(recipe),
                            entries, **record)


def run_search(recipe: StagedRecipe, seeds: list[int], announce=None) -> SearchCandidates:
    """Generate one draft per seed through all stages (``run_stages``). ``announce(text)``, if given, receives
    "draft i / N" (prefixed by the stage on a staged search) as each candidate's stage starts."""
    progress = SearchProgress(len(seeds) * recipe.steps)
    states = run_stages(recipe, [CandidateState(seed, recipe.latent) for seed in seeds], progress, announce=announce)
    return candidates_from_states(recipe, states)


@dataclasses.dataclass(frozen=True)
class Commit:
    """A delivered full-compute rollout: the last stage's stock output latent, its seconds and the transformer calls
    it computed (0 and 0.0 for a free commit, which delivered a draft that already was the full-compute result)."""

    latent: dict
    seconds: float
    calls: int


FULL_COMPUTE_ADVICE = ("Connect the model without that cache (the model before the cache node) to Recommit's "
                       "{input} input, so the commit runs at full compute.")


def run_full_compute(recipe: StagedRecipe, seed: int, models: tuple = ()) -> Commit:
    """``seed`` through every stage of ``recipe`` at full compute: every known cache detached (on clones of each
    stage's model, or of ``models[i]`` where given), every layer's calls counted, and refused when any work was
    skipped (a cache CachedSearch does not know is still on the model), naming the Recommit input that fixes it."""
    inputs = recipe.model_inputs
    recipe = recipe.without_cache(models)
    start = time.perf_counter()
    (state,) = run_stages(recipe, [CandidateState(seed, recipe.latent)], SearchProgress(recipe.steps),
                          full_compute=FullComputeCheck(inputs, FULL_COMPUTE_ADVICE))
    return Commit(state.latent, time.perf_counter() - start, state.draft().calls_computed)


def commit(candidates: SearchCandidates, winner: int, models: tuple = ()) -> Commit:
    """Regenerate the winner's seed through every stage at full compute (``run_full_compute``). A draft that
    already is the full-compute result (``SearchCandidates.draft_is_full_compute``) is delivered as it is, nothing
    sampled: the commit is free."""
    if candidates.draft_is_full_compute(winner, models):
        return Commit(candidates.latent(candidates.draft_latents[winner : winner + 1].clone()), 0.0, 0)
    return run_full_compute(candidates.recipe, candidates.drafts[winner].seed, models)


def _keeping_x0(stage: Stage, estimates: list) -> Stage:
    """The stage on a clone of its model whose post-CFG hook appends each call's x0 estimate to ``estimates``
    and returns it unchanged (the sampling result is the stock one)."""
    model = stage.patcher.clone()

    def keep(args):
        estimates.append(args["denoised"])
        return args["denoised"]

    model.set_model_sampler_post_cfg_function(keep)
    return stage.with_model(model)


def _at_trajectory_position(stage: Stage, steps_before: int, trajectory_steps: int) -> Stage:
    """The stage on a clone of its model whose cache counts warmup and cooldown in the whole unsplit stage."""
    model = stage.patcher.clone()
    model.model_options["transformer_options"][TRAJECTORY_POSITION_OPTION] = (steps_before, trajectory_steps)
    return stage.with_model(model)


def _split_stage(stage: Stage, local_steps: list[int]) -> tuple[Stage, ...]:
    """Stock calls that together run ``stage``, cut after each of ``local_steps`` of its steps: the first returns
    the leftover noise, each later one resumes there without adding noise, as chained KSamplerAdvanced nodes do, or
    SamplerCustomAdvanced nodes on SplitSigmas' pieces (RandomNoise, then DisableNoise). Each piece's cache keeps
    the unsplit stage's warmup and cooldown (else a split would add a cooldown before and a warmup after it)."""
    cuts = [0, *local_steps, stage.step_count]
    first_step = None if isinstance(stage, CustomSamplerStage) else (stage.start_step or 0)
    pieces = []
    for start, end in itertools.pairwise(cuts):
        first, last = start == 0, end == stage.step_count
        if first_step is None:
            piece = dataclasses.replace(stage, sigmas=stage.sigmas[..., start : end + 1],
                                        add_noise=stage.add_noise and first)
        else:
            piece = dataclasses.replace(
                stage, disable_noise=stage.disable_noise or not first,
                start_step=stage.start_step if first else first_step + start,
                last_step=stage.last_step if last else first_step + end,
                force_full_denoise=stage.force_full_denoise and last)
        pieces.append(_at_trajectory_position(piece, start, stage.step_count))
    return tuple(pieces)


@dataclasses.dataclass(frozen=True)
class SplitRecipe:
    """A recipe with its stages cut at prune steps (``split_recipe``): the split recipe, for each prune step the
    index of the first split stage after it, and for each split stage the index of the recipe's stage it is part
    of."""

    recipe: StagedRecipe
    resume_indices: tuple[int, ...]
    origins: tuple[int, ...]

    def merged_calls(self, calls: tuple[StageCalls, ...]) -> tuple[StageCalls, ...]:
        """Per-stage statistics of the unsplit recipe: the pieces of a split stage added together."""
        merged: dict[int, StageCalls] = {}
        for origin, piece in zip(self.origins, calls):
            before = merged.get(origin, StageCalls(0, 0))
            merged[origin] = StageCalls(before.computed + piece.computed, before.skipped + piece.skipped)
        return tuple(merged[origin] for origin in sorted(merged))


def split_recipe(recipe: StagedRecipe, steps: tuple[int, ...]) -> SplitRecipe:
    """The recipe with the stage that contains each of ``steps`` (rising) split there into stock calls
    (``_split_stage``), as a stock graph chains samplers; a step at a stage boundary splits nothing."""
    for step in steps:
        if not 0 < step < recipe.steps:
            raise ValueError(f"prune_step: got {step}; use a step from 1 to {recipe.steps - 1}")
    stages, names, origins = [], [], []
    for index, (stage, name, start) in enumerate(zip(recipe.stages, recipe.names, recipe.stage_starts,
                                                     strict=True)):
        inside = [step - start for step in steps if start < step < start + stage.step_count]
        bounds = [start, *(start + local for local in inside), start + stage.step_count]
        stages += _split_stage(stage, inside) if inside else (stage,)
        names += [f"{name} steps {a}-{b}" for a, b in itertools.pairwise(bounds)] if inside else [name]
        origins += [index] * (len(inside) + 1)
    split = dataclasses.replace(recipe, stages=tuple(stages), stage_names=tuple(names))
    return SplitRecipe(split, tuple(split.stage_starts.index(step) for step in steps), tuple(origins))


def run_pruned_search(recipe: StagedRecipe, seeds: list[int], plan: PruningPlan, score_previews,
                      announce=None) -> PrunedSearch:
    """Run every seed to the first round's step, score them with ``score_previews(x0_estimates)`` (the sampler's
    x0 estimate of its last step before the round's step, one latent batch per candidate still running, in seed
    order; returns one score each; decoding only ``plan.preview_frames`` frames is the caller's) and continue only
    that round's ``keep`` best from there, without recomputing the steps before it; each later round likewise on
    the survivors. ``score_previews`` is called once per round, in order. The sampler steps run are
    ``plan.search_steps`` exactly.

    A candidate cancelled or failing while previews are scored leaves nothing behind: all state is local.
    """
    split = split_recipe(recipe, plan.round_steps)
    staged = split.recipe
    progress = SearchProgress(plan.search_steps(len(seeds), recipe.steps))
    running = list(range(len(seeds)))  # the candidates still running, by index in seed order
    states = [CandidateState(seed, staged.latent) for seed in seeds]
    records, dropped, preview_seconds, done = [], {}, 0.0, 0
    for prune_round, resume_index in zip(plan.rounds, split.resume_indices):
        states = run_stages(staged, states, progress, range(done, resume_index - 1), announce)
        # The last stage before the round's step runs on a clone that keeps the sampler's x0 estimate (the denoised
        # output of its last call), one candidate at a time so each candidate's estimate is its own.
        estimates = []
        head = _keeping_x0(staged.stages[resume_index - 1], estimates)
        head_recipe = dataclasses.replace(staged, stages=(*staged.stages[: resume_index - 1], head))
        previews = []
        for position, state in enumerate(states):
            if announce is not None:
                announce(f"draft {position + 1} / {len(states)} (seed {state.seed}) to step {prune_round.step}")
            estimates.clear()
            (states[position],) = run_stages(head_recipe, [state], progress, range(resume_index - 1, resume_index))
            previews.append(estimates[-1])
        if announce is not None:
            announce(f"scoring {len(states)} previews at step {prune_round.step}")
        start = time.perf_counter()
        preview_scores = tuple(float(score) for score in score_previews(previews))
        preview_seconds += time.perf_counter() - start
        if len(preview_scores) != len(states):
            raise ValueError(f"preview scores: got {len(preview_scores)} for {len(states)} candidates")
        kept = survivors(preview_scores, prune_round.keep)
        records.append(RoundRecord(prune_round.step, tuple(running), preview_scores,
                                   tuple(running[position] for position in kept)))
        for position, state in enumerate(states):
            if position not in kept:
                draft = dataclasses.replace(state, stage_calls=split.merged_calls(state.stage_calls)).draft()
                dropped[running[position]] = PrunedCandidate(draft, preview_scores[position])
        states, running, done = [states[p] for p in kept], [running[p] for p in kept], resume_index
    continuing = run_stages(staged, states, progress, range(done, len(staged.stages)), announce)
    continuing = [dataclasses.replace(state, stage_calls=split.merged_calls(state.stage_calls))
                  for state in continuing]
    first, *later = records
    outcome = PruningOutcome(plan.prune_step, recipe.steps, tuple(seeds), first.preview_scores, tuple(running),
                             tuple(dropped[index] for index in sorted(dropped)), preview_seconds,
                             plan.preview_frames, tuple(later))
    return PrunedSearch(candidates_from_states(recipe, continuing, pruning=outcome))
