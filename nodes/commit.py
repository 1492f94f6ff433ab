"""The delivered rollout: a seed through every stage at full compute, checked, or a draft that already is it."""

from __future__ import annotations

import dataclasses
import time


from .candidates import SearchCandidates
from .runner import CandidateState, FullComputeCheck, RunHooks, SearchProgress, run_stages
from .stages import StagedRecipe


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
    (state,) = run_stages(recipe, [CandidateState.start(seed, recipe.latent)], SearchProgress(recipe.steps),
                          hooks=RunHooks(full_compute=FullComputeCheck(inputs, FULL_COMPUTE_ADVICE)))
    return Commit(state.latent, time.perf_counter() - start, state.draft.calls_computed)


def commit(candidates: SearchCandidates, winner: int, models: tuple = ()) -> Commit:
    """Regenerate the winner's seed through every stage at full compute (``run_full_compute``). A draft that
    already is the full-compute result (``SearchCandidates.draft_is_full_compute``) is delivered as it is, nothing
    sampled: the commit is free."""
    if candidates.draft_is_full_compute(winner, models):
        return Commit(candidates.latent(candidates.draft_latent(winner)), 0.0, 0)
    return run_full_compute(candidates.recipe, candidates.drafts[winner].seed, models)
