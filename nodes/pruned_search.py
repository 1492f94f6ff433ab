"""The pruned search: every seed to a round's step, previews scored, only the best continued from there without
recomputing the steps before it; the stages split where the rounds fall, as chained stock samplers split them."""

from __future__ import annotations

import dataclasses
import itertools
import time

from ..cachedsearch_core import StageCalls
from ..cachedsearch_core.auto_ledger import AutoLedger
from ..cachedsearch_core.budget import BudgetSpent
from ..cachedsearch_core.pruning import (
    PrunedCandidate, PruneRound, PruningOutcome, PruningPlan, RoundRecord, survivors,
)
from .cache_patch import TRAJECTORY_POSITION_OPTION
from .candidates import SearchCandidates, candidates_from_states
from .previews import keeping_x0
from .runner import CandidateState, RunHooks, SearchProgress, run_stages
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


@dataclasses.dataclass
class _Round:
    """One prune round reached: its schedule entry, the index of the first split stage after its step, and the steps
    cut so far (the key of a candidate's state saved there)."""

    prune: PruneRound
    resume_index: int
    steps_cut: tuple[int, ...]


class _PrunedRun:
    """A pruned search in progress: the candidates still running (their states, and their indices in seed order),
    the split stages they have all run, the rounds recorded, the candidates dropped and the time scoring took."""

    def __init__(self, recipe: StagedRecipe, seeds: list[int], plan: PruningPlan, saved: SavedDrafts | None,
                 announce, ledger: AutoLedger | None = None):
        self.recipe, self.seeds, self.plan, self.saved, self.announce = recipe, seeds, plan, saved, announce
        self.ledger = ledger
        self.anchor = 0  # with a ledger: the position of the last round's best, which continues first
        self.split = split_recipe(recipe, plan.round_steps)
        self.progress = SearchProgress(plan.search_steps(len(seeds), recipe.steps))
        self.states = [CandidateState.start(seed, self.split.recipe.latent) for seed in seeds]
        self.running = list(range(len(seeds)))
        self.stages_run = 0
        self.records: list[RoundRecord] = []
        self.dropped: dict[int, PrunedCandidate] = {}
        self.preview_seconds = 0.0
        self.states_read_back = 0

    def say(self, text: str) -> None:
        if self.announce is not None:
            self.announce(text)

    def read_back_or_run(self, steps_cut: tuple[int, ...], end_stage: int, on_finished=None) -> list:
        """Every running state after ``steps_cut``: read back as an earlier pruned search saved it there, else run
        on to split stage ``end_stage`` from where it is (continued: it pays only what it computes). Returns, per
        state, what was read back ((state, x0 estimate)) or None where it ran."""
        read_back = [self.saved.reused_round_state(state.seed, steps_cut, self.split.recipe.latent)
                     if self.saved is not None else None for state in self.states]
        missing = [state.continued() for state, entry in zip(self.states, read_back) if entry is None]
        advanced = iter(run_stages(self.split.recipe, missing, self.progress, range(self.stages_run, end_stage),
                                   RunHooks(self.announce, on_finished=on_finished)))
        self.states = [entry[0] if entry is not None else next(advanced) for entry in read_back]
        self.states_read_back += sum(entry is not None for entry in read_back)
        return read_back

    def previews_at(self, reached: _Round) -> list:
        """Every running candidate's x0 estimate at the round's step: read back with its state, or captured while
        the last split stage before the step runs on the x0-keeping clone, one candidate at a time so each
        estimate is its own (and saved with the state)."""
        before = list(self.states)
        read_back = self.read_back_or_run(reached.steps_cut, reached.resume_index - 1)
        estimates = []
        head = keeping_x0(self.split.recipe.stages[reached.resume_index - 1],
                          lambda args: estimates.append(args["denoised"]))
        head_recipe = dataclasses.replace(self.split.recipe,
                                          stages=(*self.split.recipe.stages[: reached.resume_index - 1], head))
        previews = {}
        for position in self._order():
            state = self.states[position]
            try:
                if read_back[position] is not None:
                    self._charge(position, before[position], read_back[position][0])
                    previews[position] = read_back[position][1]
                    continue
                self.say(f"draft {position + 1} / {len(self.states)} (seed {state.seed}) to step "
                         f"{reached.prune.step}")
                estimates.clear()
                (self.states[position],) = run_stages(head_recipe, [state], self.progress,
                                                      range(reached.resume_index - 1, reached.resume_index),
                                                      RunHooks(on_computed_call=self._on_call(position)))
                self._charged(position)
            except BudgetSpent:
                if self._stopped(position):
                    break
                continue
            previews[position] = estimates[-1]
            if self.saved is not None:
                self.saved.save_round_state(reached.steps_cut, self.states[position], estimates[-1])
        self.stages_run = reached.resume_index
        self._keep_positions(sorted(previews))
        return [previews[position] for position in sorted(previews)]

    def _order(self) -> list[int]:
        """The running positions in the order they run: with a ledger after the first round, the anchor first."""
        positions = list(range(len(self.states)))
        if self.ledger is None or not self.records:
            return positions
        return [self.anchor, *(position for position in positions if position != self.anchor)]

    def _on_call(self, position: int):
        """The ledger's charge before each computed call of the candidate at ``position`` (None without one)."""
        if self.ledger is None:
            return None
        self.ledger.start_candidate()
        if not self.records:
            return self.ledger.draft_call
        to_round = len(self.records) < len(self.plan.rounds)
        return lambda: self.ledger.call(position == self.anchor, to_round)

    def _charged(self, position: int) -> None:
        """The candidate at ``position`` reached the next round's step (or the end): book it, and the preview it is
        scored by there, in the ledger."""
        if self.ledger is None:
            return
        if not self.records:
            self.ledger.draft_finished()
        else:
            rounds_reached = len(self.records)
            self.ledger.phase_finished(position == self.anchor,
                                       rounds_reached if rounds_reached < len(self.plan.rounds) else None)

    def _charge(self, position: int, before: CandidateState, read_back: CandidateState) -> None:
        """A state read back (from ``before``) is charged as when it was computed: its calls since its last round
        one at a time, so a re-queued search stops and cuts where an uninterrupted one did (``BudgetSpent``
        likewise)."""
        if self.ledger is None:
            return
        charge = self._on_call(position)
        for _ in range(read_back.draft.calls_computed - before.draft.calls_computed):
            charge()
        self._charged(position)

    def _drop_after_round(self, position: int) -> None:
        """The candidate at ``position``, kept by the last round and cut after it, counts as dropped there."""
        record, index = self.records[-1], self.running[position]
        self.records[-1] = dataclasses.replace(record, kept=tuple(kept for kept in record.kept if kept != index))
        score = record.preview_scores[record.scored.index(index)]
        self.dropped[index] = PrunedCandidate(self._unsplit(self.states[position]).draft, score)

    def _stopped(self, position: int) -> bool:
        """The ledger refused a call of the candidate at ``position``: while drafting, drafting stops (True:
        the candidates after it are not drafted); later the candidate is cut."""
        if not self.records:
            self.ledger.drafting_stopped(len(self.seeds))
            self.seeds = self.seeds[:position]
            return True
        self.ledger.cut(self.states[position].seed, self.records[-1].step)
        return False

    def _keep_positions(self, kept: list[int]) -> None:
        """Only the candidates at ``kept`` run on; one cut after a round counts as dropped there."""
        for position in range(len(self.states)):
            if position not in kept and self.records:
                self._drop_after_round(position)
        self.states = [self.states[position] for position in kept]
        self.running = [self.running[position] for position in kept]
        self.anchor = kept.index(self.anchor) if self.anchor in kept else 0

    def prune(self, reached: _Round, score_previews) -> None:
        """Scores the running candidates' previews and keeps the round's best."""
        previews = self.previews_at(reached)
        self.say(f"scoring {len(self.states)} previews at step {reached.prune.step}")
        start = time.perf_counter()
        scores = tuple(float(score) for score in score_previews(previews))
        self.preview_seconds += time.perf_counter() - start
        if len(scores) != len(self.states):
            raise ValueError(f"preview scores: got {len(scores)} for {len(self.states)} candidates")
        keep = reached.prune.keep if self.ledger is None else self.ledger.keep_at(len(self.records), len(scores))
        kept = survivors(scores, keep)
        self.anchor = kept.index(min(kept, key=lambda position: (-scores[position], position)))
        self.records.append(RoundRecord(reached.prune.step, tuple(self.running), scores,
                                        tuple(self.running[position] for position in kept)))
        for position, state in enumerate(self.states):
            if position not in kept:
                self.dropped[self.running[position]] = PrunedCandidate(self._unsplit(state).draft, scores[position])
        self.states = [self.states[position] for position in kept]
        self.running = [self.running[position] for position in kept]

    def _unsplit(self, state: CandidateState) -> CandidateState:
        """The state with its calls counted per stage of the unsplit recipe."""
        return dataclasses.replace(state, draft=state.draft.with_stages(
            self.split.merged_calls(state.draft.stage_calls)))

    def finish(self) -> list[CandidateState]:
        """The survivors run (or read back) to the end, saved as each finishes."""
        ends = self.end_steps
        on_finished = (lambda state: self.saved.save_round_state(ends, state)) if self.saved is not None else None
        if self.ledger is None:
            self.read_back_or_run(ends, len(self.split.recipe.stages), on_finished)
        else:
            self._finish_within_budget(ends, on_finished)
            self.progress.finish()  # narrowed, kept fewer or cut: the bar's planned steps were not all run
        return [self._unsplit(state) for state in self.states]

    def _finish_within_budget(self, ends: tuple[int, ...], on_finished) -> None:
        """The survivors to the end one at a time, the anchor first, each call charged to the ledger; a survivor
        the ledger refuses is cut."""
        finished = []
        for position in self._order():
            state = self.states[position]
            entry = self.saved.reused_round_state(state.seed, ends, self.split.recipe.latent) \
                if self.saved is not None else None
            try:
                if entry is not None:
                    self._charge(position, state, entry[0])
                    self.states[position] = entry[0]
                    self.states_read_back += 1
                else:
                    (self.states[position],) = run_stages(
                        self.split.recipe, [state.continued()], self.progress,
                        range(self.stages_run, len(self.split.recipe.stages)),
                        RunHooks(self.announce, on_computed_call=self._on_call(position), on_finished=on_finished))
                    self._charged(position)
            except BudgetSpent:
                self._stopped(position)
                continue
            finished.append(position)
        self._keep_positions(sorted(finished))

    @property
    def end_steps(self) -> tuple[int, ...]:
        return (*self.plan.round_steps, self.recipe.steps)

    def outcome(self) -> PruningOutcome:
        first, *later = self.records
        return PruningOutcome(
            prune_step=self.plan.prune_step, steps=self.recipe.steps, seeds=tuple(self.seeds),
            preview_scores=first.preview_scores, survivor_indices=tuple(self.running),
            pruned=tuple(self.dropped[index] for index in sorted(self.dropped)),
            preview_seconds=self.preview_seconds, preview_frames=self.plan.preview_frames,
            later_rounds=tuple(later))

    def all_saved(self) -> bool:
        """Whether every state a re-queued search reads back is on disk: each round's candidates at it, the
        survivors' ends."""
        cuts = [(self.plan.round_steps[: number + 1], record.scored) for number, record in enumerate(self.records)]
        return all(self.saved.store.get(self.saved.round_key(self.seeds[index], steps_cut)) is not None
                   for steps_cut, scored in [*cuts, (self.end_steps, tuple(self.running))] for index in scored)


def run_pruned_search(recipe: StagedRecipe, seeds: list[int], plan: PruningPlan, score_previews,
                      announce=None, saved: SavedDrafts | None = None, ledger: AutoLedger | None = None
                      ) -> PrunedSearch:
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

    With ``ledger`` (Budget "auto", one-stage recipes) every computed call is charged to it: drafting may stop
    before all ``seeds`` (the search is narrowed to those drafted), a round may keep fewer, and a survivor other
    than the round's best may be cut (``AutoLedger``), so the search never spends more than the ledger allows.
    """
    run = _PrunedRun(recipe, seeds, plan, saved, announce, ledger)
    for number, (prune, resume_index) in enumerate(zip(plan.rounds, run.split.resume_indices)):
        run.prune(_Round(prune, resume_index, plan.round_steps[: number + 1]), score_previews)
    finished = run.finish()
    if saved is None:
        return PrunedSearch(candidates_from_states(recipe, finished, pruning=run.outcome()))
    if run.states_read_back:
        run.say(f"{run.states_read_back} candidate states saved by an earlier pruned search, reused")
    return PrunedSearch(candidates_from_states(recipe, finished, pruning=run.outcome(), notes=saved.notes(),
                                               drafts_saved=run.all_saved(),
                                               drafts_not_kept=saved.not_kept_line()))
