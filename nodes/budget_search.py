"""The fixed-budget search: draft seeds seed, seed + 1, ... until the next transformer call would overrun what full
best-of-M costs, one full recommit included ("CachedSearch: Training-Free Cached Exploration for Test-Time Search in
Video Diffusion", Sec. 3.3)."""

from __future__ import annotations

import time

from ..cachedsearch_core import candidate_seeds
from ..cachedsearch_core.budget import BudgetLedger, BudgetPlan, BudgetSpent, format_cost
from .candidates import SearchCandidates, candidates_from_states
from .runner import CandidateState, RunHooks, SearchProgress, run_stages
from .saved_drafts import SavedDrafts
from .stages import StagedRecipe


def run_budget_search(recipe: StagedRecipe, seed: int, plan: BudgetPlan, announce=None,
                      clock=time.perf_counter, saved: SavedDrafts | None = None) -> SearchCandidates:
    """Draft one seed after another through all its stages (the width is decided candidate by candidate, so a
    staged search runs each candidate's stages before the next candidate's) until ``plan`` stops a draft or
    ``plan.max_candidates`` drafts are made. A stopped draft is dropped: its calls were spent within the budget.
    While every draft skips nothing the recommit will deliver the winner's draft for free, and the drafts may spend
    all of the budget.

    ``clock`` gives the seconds a wall-time budget counts. With ``saved``, a seed whose draft an earlier run saved
    (a plain search's of the same setup too) is read back and charged to the budget as it was when drafted, so the
    search stops where an uninterrupted one stops while computing only the drafts it lacks; each computed draft is
    saved as it finishes.
    """
    seeds = candidate_seeds(seed, plan.max_candidates)
    ledger = BudgetLedger(plan)
    progress = SearchProgress(plan.max_candidates * recipe.steps)
    finished = []
    for index, candidate_seed in enumerate(seeds):
        reused = saved.reused_state(candidate_seed, recipe.latent) if saved is not None else None
        if announce is not None:
            left = ledger.left_for_drafts()
            budget_left = "" if left is None else f", {format_cost(left, plan.unit)} left for drafts"
            again = ", saved by an earlier run, reused" if reused is not None else ""
            announce(f"budget draft {index + 1} (seed {candidate_seed}{budget_left}{again})")
        try:
            if reused is not None:
                draft = reused.draft
                ledger.replay_draft(draft.calls_computed, draft.calls_skipped, draft.seconds)
                progress.skip(recipe.steps)
                state = reused
            else:
                ledger.start_draft(clock())
                (state,) = run_stages(recipe, [CandidateState.start(candidate_seed, recipe.latent)], progress,
                                      hooks=RunHooks(on_computed_call=lambda: ledger.before_computed_call(clock()),
                                                     on_finished=saved.save if saved is not None else None))
                ledger.finish_draft(state.draft.calls_skipped, clock())
        except BudgetSpent:
            break
        finished.append(state)
    progress.finish()
    if saved is None:
        return candidates_from_states(recipe, finished, budget=ledger.outcome())
    return candidates_from_states(recipe, finished, budget=ledger.outcome(), notes=saved.notes(),
                                  drafts_saved=saved.holds(state.seed for state in finished),
                                  drafts_not_kept=saved.not_kept_line())
