"""The one trajectory runner: candidates through the stages of a recipe, one candidate at a time, every call
counted, with one progress bar over the whole search and Cancel checked between candidates."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable

import comfy.model_management
import comfy.utils

from ..cachedsearch_core import Draft
from .cache_patch import STATISTICS_CALLBACK_OPTION
from .full_compute import CallMeter, check_full_compute
from .stages import StagedRecipe


@dataclasses.dataclass(frozen=True)
class CandidateState:
    """A candidate at a stage boundary: the stock output latent of its last finished stage (the recipe's latent
    before the first), and its draft so far (the record: its seed, time and cache statistics, whether it was read
    back from an earlier run's saved drafts)."""

    latent: dict
    draft: Draft

    @classmethod
    def start(cls, seed: int, latent: dict) -> CandidateState:
        """A candidate about to sample its first stage."""
        return cls(latent, Draft.of_stages(seed, 0.0, ()))

    @property
    def seed(self) -> int:
        return self.draft.seed

    def continued(self) -> CandidateState:
        """The state to sample on from: a state read back becomes one whose calls and seconds so far were read back
        (the search pays only what it computes from here)."""
        if not self.draft.reused:
            return self
        return dataclasses.replace(self, draft=dataclasses.replace(
            self.draft, reused=False, reused_calls=self.draft.calls_computed, reused_seconds=self.draft.seconds))


class SearchProgress:
    """One progress bar over every stage of every candidate, fed by the stock sampling calls' own bars.

    Each stock call makes its own ``comfy.utils.ProgressBar``, which takes ComfyUI's global progress hook when it is
    created, so the search cannot hand a call its bar any other way. While a stage runs, the search installs a hook
    that moves the steps of this thread's calls to their place on the search's bar and hands them, with the calls'
    live previews, to the hook installed before (the server's, which sends progress and raises when the user presses
    Cancel); a bar made on any other thread meanwhile goes to that hook unchanged. The hook before is put back
    whatever ends the stage (its end, an exception, Cancel).
    """

    def __init__(self, total_steps: int):
        self.total = total_steps
        self.done = 0

    @contextlib.contextmanager
    def stage(self, step_count: int):
        outer = comfy.utils.PROGRESS_BAR_HOOK
        if outer is None:  # nothing listens (no server): nothing to move
            yield
            self.done += step_count
            return
        offset, search_thread = self.done, threading.get_ident()

        def hook(value, total, preview, *args, **kwargs):
            if threading.get_ident() != search_thread:
                return outer(value, total, preview, *args, **kwargs)
            return outer(offset + min(value, step_count), self.total, preview, *args, **kwargs)

        comfy.utils.set_progress_bar_global_hook(hook)
        try:
            yield
        finally:
            comfy.utils.set_progress_bar_global_hook(outer)
        self.done = offset + step_count

    def skip(self, step_count: int) -> None:
        """Steps read back instead of sampled: their place on the bar is passed, nothing is sent."""
        self.done += step_count

    def finish(self):
        """Fill the bar when the search ends before its widest width (a budget stopped it)."""
        hook = comfy.utils.PROGRESS_BAR_HOOK
        if hook is not None and self.done < self.total:
            hook(self.total, self.total, None)
        self.done = self.total


@dataclasses.dataclass(frozen=True)
class FullComputeCheck:
    """Stages that must compute every call the sampler asks for: the node input that feeds each stage's model and
    what to tell the artist when a cache skipped work anyway."""

    input_names: tuple[str, ...]
    advice: str


@dataclasses.dataclass(frozen=True)
class RunHooks:
    """Who hears a run of ``run_stages`` as it goes, each optional: ``announce(text)`` hears "draft i / N" as each
    candidate's stage starts; ``on_computed_call()`` runs before each computed call (a budget stops a draft there by
    raising; Calibrate counts the calls before a preview step); ``on_finished(state)`` hears each candidate as it
    finishes the last stage run (the search saves its draft there at once); ``full_compute`` hears each stage's
    counted calls as it ends and raises when a cache skipped any (``check_full_compute``), instead of handing on a
    cached result as full compute."""

    announce: Callable[[str], None] | None = None
    on_computed_call: Callable[[], None] | None = None
    on_finished: Callable[[CandidateState], None] | None = None
    full_compute: FullComputeCheck | None = None


def run_stages(recipe: StagedRecipe, states: list[CandidateState], progress: SearchProgress,
               stages: range | None = None, hooks: RunHooks = RunHooks()) -> list[CandidateState]:
    """The one trajectory runner: every candidate through ``stages`` of ``recipe`` (all of them by default), stage
    by stage, so each expert of a staged trajectory is loaded once per stage as in the stock graph.

    Every search, commit, pick, Calibrate rollout, pruned continuation, budget draft and distributed worker runs its
    seeds here: each stage is the stock sampling call (``Stage.run``), fed the previous stage's output latent, one
    candidate at a time with fresh cache state. The progress bar moves through ``progress``; Cancel stops it before
    the next candidate (and inside a call, through the progress hook). Every candidate's calls are counted by a
    ``CallMeter`` whatever cache runs on the model, and its cache's statistics are read for an inactive cache.
    ``hooks`` hear the run as it goes (and check full compute where asked).
    """
    stage_indices = range(len(recipe.stages)) if stages is None else stages
    for stage_index in stage_indices:
        last = stage_index == stage_indices[-1]
        states = _run_stage(recipe, stage_index, states, progress, hooks if last else
                            dataclasses.replace(hooks, on_finished=None))
    return states


def _run_stage(recipe: StagedRecipe, stage_index: int, states: list[CandidateState], progress: SearchProgress,
               hooks: RunHooks) -> list[CandidateState]:
    """Every candidate through stage ``stage_index`` of ``recipe``, one at a time, with its calls metered."""
    stage, statistics, meter = recipe.stages[stage_index], [], CallMeter(hooks.on_computed_call)
    # The stage on a clone of its model whose transformer calls the meter counts and whose cache reports each
    # sampling run's statistics.
    observed_model = meter.attach(stage.patcher)
    observed_model.model_options["transformer_options"][STATISTICS_CALLBACK_OPTION] = statistics.append
    observed = stage.with_model(observed_model)
    stage_label = f"{recipe.names[stage_index]} ({stage_index + 1} / {len(recipe.stages)}), " \
        if len(recipe.stages) > 1 else ""
    advanced = []
    for index, state in enumerate(states):
        comfy.model_management.throw_exception_if_processing_interrupted()
        if hooks.announce is not None:
            hooks.announce(f"{stage_label}draft {index + 1} / {len(states)} (seed {state.seed})")
        statistics.clear()
        start = time.perf_counter()
        meter.take()
        with progress.stage(observed.step_count), meter.counting(observed.patcher):
            latent = observed.run(state.latent, state.seed)
        run = meter.take()
        if hooks.full_compute is not None:
            input_name = hooks.full_compute.input_names[stage_index]
            check_full_compute(run, stage.patcher, input_name, hooks.full_compute.advice.format(input=input_name))
        inactive_reason = next((s.inactive_reason for s in statistics if s.inactive_reason), None)
        draft = state.draft.with_stages((*state.draft.stage_calls, run.calls),
                                        state.draft.seconds + time.perf_counter() - start, inactive_reason)
        advanced.append(CandidateState(latent, draft))
        if hooks.on_finished is not None:
            hooks.on_finished(advanced[-1])
    return advanced
