"""The pruned search: every seed to a round's step, previews scored, only the best continued from there without
recomputing the steps before it; the stages split where the rounds fall, as chained stock samplers split them."""

from __future__ import annotations

import dataclasses
import itertools
import time

from ..cachedsearch_core import StageCalls
from ..cachedsearch_core.pruning import PrunedCandidate, PruningOutcome, PruningPlan, RoundRecord, survivors
from .cache_patch import TRAJECTORY_POSITION_OPTION
from .candidates import SearchCandidates, candidates_from_states
from .runner import CandidateState, SearchProgress, run_stages
from .saved_drafts import SavedDrafts
from .stages import CustomSamplerStage, Stage, StagedRecipe


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


def _read_back_or_run(saved: SavedDrafts | None, cuts, staged: StagedRecipe, states: list[CandidateState], progress,
                      stages: range, announce, on_finished=None) -> tuple[list[CandidateState], list]:
    """``states`` after ``cuts``: each read back as an earlier pruned search saved it there, else run on through
    ``stages`` from where it is (continued: it pays only what it computes). Also returns, per state, what was read
    back ((state, x0 estimate)) or None where it ran."""
    found = [saved.reused_round_state(state.seed, cuts, staged.latent) if saved is not None else None
             for state in states]
    missing = [state.continued() for state, entry in zip(states, found) if entry is None]
    advanced = iter(run_stages(staged, missing, progress, stages, announce, on_finished=on_finished))
    return [entry[0] if entry is not None else next(advanced) for entry in found], found


def run_pruned_search(recipe: StagedRecipe, seeds: list[int], plan: PruningPlan, score_previews,
                      announce=None, saved: SavedDrafts | None = None) -> PrunedSearch:
    """Run every seed to the first round's step, score them with ``score_previews(x0_estimates)`` (the sampler's
    x0 estimate of its last step before the round's step, one latent batch per candidate still running, in seed
    order; returns one score each; decoding only ``plan.preview_frames`` frames is the caller's) and continue only
    that round's ``keep`` best from there, without recomputing the steps before it; each later round likewise on
    the survivors. ``score_previews`` is called once per round, in order. The sampler steps run are
    ``plan.search_steps`` exactly.

    A candidate cancelled or failing while previews are scored leaves nothing behind: all state is local. With
    ``saved``, each candidate's state at each round's step (with its x0 estimate) and each survivor's end are saved
    as they are reached, and a re-queued search reads back what it finds instead of sampling it (its previews
    re-scored from the saved estimates), so it computes only what it lacks and ends as an uninterrupted one.
    """
    split = split_recipe(recipe, plan.round_steps)
    staged = split.recipe
    progress = SearchProgress(plan.search_steps(len(seeds), recipe.steps))
    running = list(range(len(seeds)))  # the candidates still running, by index in seed order
    states = [CandidateState.start(seed, staged.latent) for seed in seeds]
    records, dropped, preview_seconds, done = [], {}, 0.0, 0
    reused_states = 0
    for number, (prune_round, resume_index) in enumerate(zip(plan.rounds, split.resume_indices)):
        cuts = plan.round_steps[: number + 1]
        states, found = _read_back_or_run(saved, cuts, staged, states, progress, range(done, resume_index - 1),
                                          announce)
        reused_states += sum(entry is not None for entry in found)
        # The last stage before the round's step runs on a clone that keeps the sampler's x0 estimate (the denoised
        # output of its last call), one candidate at a time so each candidate's estimate is its own.
        estimates = []
        head = _keeping_x0(staged.stages[resume_index - 1], estimates)
        head_recipe = dataclasses.replace(staged, stages=(*staged.stages[: resume_index - 1], head))
        previews = []
        for position, state in enumerate(states):
            if found[position] is not None:  # read back at the round's step, with its estimate there
                previews.append(found[position][1])
                continue
            if announce is not None:
                announce(f"draft {position + 1} / {len(states)} (seed {state.seed}) to step {prune_round.step}")
            estimates.clear()
            (states[position],) = run_stages(head_recipe, [state], progress, range(resume_index - 1, resume_index))
            previews.append(estimates[-1])
            if saved is not None:
                saved.save_round_state(cuts, states[position], estimates[-1])
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
                draft = state.draft.with_stages(split.merged_calls(state.draft.stage_calls))
                dropped[running[position]] = PrunedCandidate(draft, preview_scores[position])
        states, running, done = [states[p] for p in kept], [running[p] for p in kept], resume_index
    ends = (*plan.round_steps, recipe.steps)
    continuing, found = _read_back_or_run(
        saved, ends, staged, states, progress, range(done, len(staged.stages)), announce,
        on_finished=(lambda state: saved.save_round_state(ends, state)) if saved is not None else None)
    reused_states += sum(entry is not None for entry in found)
    continuing = [dataclasses.replace(state, draft=state.draft.with_stages(split.merged_calls(state.draft.stage_calls)))
                  for state in continuing]
    first, *later = records
    outcome = PruningOutcome(plan.prune_step, recipe.steps, tuple(seeds), first.preview_scores, tuple(running),
                             tuple(dropped[index] for index in sorted(dropped)), preview_seconds,
                             plan.preview_frames, tuple(later))
    if saved is None:
        return PrunedSearch(candidates_from_states(recipe, continuing, pruning=outcome))
    if announce is not None and reused_states:
        announce(f"{reused_states} candidate states saved by an earlier pruned search, reused")
    # Every state a re-executed search reads back is on disk: each round's candidates at it, the survivors' ends.
    cuts_of = [(plan.round_steps[: number + 1], record.scored) for number, record in enumerate(records)]
    on_disk = all(saved.store.get(saved.round_key(seeds[index], cuts)) is not None
                  for cuts, scored in [*cuts_of, (ends, tuple(running))] for index in scored)
    return PrunedSearch(candidates_from_states(recipe, continuing, pruning=outcome,
                                               notes=saved.notes(), drafts_saved=on_disk,
                                               drafts_not_kept=saved.not_kept_line()))
