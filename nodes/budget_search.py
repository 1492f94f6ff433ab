"""The fixed-budget search: draft seeds seed, seed + 1, ... until the next transformer call would overrun what full
best-of-M costs, one full recommit included ("CachedSearch: Training-Free Cached Exploration for Test-Time Search in
Video Diffusion", Sec. 3.3)."""

from __future__ import annotations

import time

from ..cachedsearch_core import candidate_seeds
from ..cachedsearch_core.budget import BudgetLedger, BudgetPlan, BudgetSpent, format_cost
from .candidates import SearchCandidates, candidates_from_states
from .runner import CandidateState, SearchProgress, run_stages
from .stages import StagedRecipe


def run_budget_search(recipe: StagedRecipe, seed: int, plan: BudgetPlan, announce=None,
                      clock=time.perf_counter) -> SearchCandidates:
    """Draft one seed after another through all its stages (the width is decided candidate by candidate, so a
    staged search runs each candidate's stages before the next candidate's) until ``plan`` stops a draft or
    ``plan.max_candidates`` drafts are made. A stopped draft is dropped: its calls were spent within the budget.
    While every draft skips nothing the recommit will deliver the winner's draft for free, and the drafts may spend
    all of the budget.

    ``clock`` gives the seconds a wall-time budget counts.
    """
    seeds = candidate_seeds(seed, plan.max_candidates)
    ledger = BudgetLedger(plan)
    progress = SearchProgress(plan.max_candidates * recipe.steps)
    finished = []
    for index, candidate_seed in enumerate(seeds):
        if announce is not None:
            left = ledger.left_for_drafts()
            budget_left = "" if left is None else f", {format_cost(left, plan.unit)} left for drafts"
            announce(f"budget draft {index + 1} (seed {candidate_seed}{budget_left})")
        ledger.start_draft(clock())
        try:
            (state,) = run_stages(recipe, [CandidateState(candidate_seed, recipe.latent)], progress,
                                  on_computed_call=lambda: ledger.before_computed_call(clock()))
            ledger.finish_draft(state.draft().calls_skipped, clock())
        except BudgetSpent:
            break
        finished.append(state)
    progress.finish()
    return candidates_from_states(recipe, finished, budget=ledger.outcome())
