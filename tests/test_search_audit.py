"""Audit metrics of the pruned and the fixed-budget search on hand-computed score tables (no model)."""

import math

import numpy as np
import pytest

from cachedsearch_core.budget import BudgetLedger, BudgetPlan, BudgetSpent
from cachedsearch_core.search_audit import budget_search_gain, budget_width_and_free_commit, pruned_search_fidelity
from report_text import refusal

FULL = [[0.1, 0.5, 0.3, 0.9], [0.4, 0.2, 0.8, 0.6]]
PREVIEWS = [[0.2, 0.9, 0.1, 0.8], [0.5, 0.3, 0.1, 0.9]]  # keep 2: seeds 1, 3 and seeds 0, 3 survive
FINALS = [[np.nan, 0.7, np.nan, 0.6], [0.3, np.nan, np.nan, 0.4]]  # winners: seed 1 and seed 3


def test_pruned_search_metrics_match_the_hand_computed_values():
    report = pruned_search_fidelity(FULL, PREVIEWS, FINALS, keep=2, bootstrap=100)
    assert report.survivors == ((1, 3), (0, 3))
    # Prompt 0: the true best (seed 3) survives but the final drafts pick seed 1; prompt 1: the true best (seed 2)
    # is pruned.
    assert report.survival.value == pytest.approx(0.5)
    assert report.top1.value == pytest.approx(0.0)
    assert report.regret.value == pytest.approx((0.4 + 0.2) / 2)
    # gains: 0.5 - 0.45 and 0.6 - 0.5; best gains 0.45 and 0.3
    assert report.capture_of_means.value == pytest.approx(0.15 / 0.75)
    assert 0 <= report.survival.low <= report.survival.value <= report.survival.high <= 1


def test_pruned_search_with_every_seed_kept_is_the_unpruned_search():
    finals = np.array(FULL) + 0.01  # final drafts rank as the full rollouts
    report = pruned_search_fidelity(FULL, PREVIEWS, finals, keep=4, bootstrap=10)
    assert report.survival.value == 1 and report.top1.value == 1 and report.capture_of_means.value == pytest.approx(1)


def test_pruned_search_needs_every_survivors_final_score():
    finals = [[np.nan, 0.7, np.nan, np.nan], [0.3, np.nan, np.nan, 0.4]]
    with pytest.raises(ValueError, match=refusal("finals", 0, 3)):  # prompt 0's survivor at seed index 3
        pruned_search_fidelity(FULL, PREVIEWS, finals, keep=2)
    with pytest.raises(ValueError, match="keep: got 5"):
        pruned_search_fidelity(FULL, PREVIEWS, FINALS, keep=5)


def test_budget_search_takes_the_widest_fitting_drafts_and_scores_the_recommitted_seed():
    drafts = [[0.3, 0.1, 0.9, 0.2], [0.1, 0.7, 0.2, 0.9]]
    costs = [[4, 4, 4, 4], [3, 3, 3, 3]]  # calls computed per draft; a full rollout makes 10
    report = budget_search_gain(FULL, drafts, costs, full_cost=10, budget_rollouts=2, bootstrap=100)
    # Budget 20 calls, 10 of them for the recommit: 2 drafts of 4 calls, 3 drafts of 3 calls.
    assert report.widths == (2, 3) and report.width_capped == 0
    assert report.spent_share == pytest.approx(((8 + 10) / 20 + (9 + 10) / 20) / 2)
    # Prompt 0 picks seed 0 (draft 0.3; seed 2's 0.9 did not fit): full 0.1; prompt 1 picks seed 1: full 0.2.
    assert report.budget_gain.value == pytest.approx(((0.1 - 0.45) + (0.2 - 0.5)) / 2)
    # Full best-of-2 over seeds 0, 1: 0.5 and 0.4.
    assert report.full_gain.value == pytest.approx(((0.5 - 0.45) + (0.4 - 0.5)) / 2)
    assert math.isnan(report.gain_ratio.value)  # no gain to compare with


def test_budget_search_widths_are_capped_by_the_seeds_drafted():
    full = [[0.9, 0.1, 0.3, 0.5], [0.4, 0.8, 0.2, 0.6]]  # full best-of-2 already finds each prompt's best
    report = budget_search_gain(full, full, [[1, 1, 1, 1]] * 2, full_cost=10, budget_rollouts=2, bootstrap=10)
    assert report.widths == (4, 4) and report.width_capped == 2
    assert report.budget_gain.value == pytest.approx(report.full_gain.value) == pytest.approx((0.45 + 0.3) / 2)
    assert report.gain_ratio.value == pytest.approx(1.0)
    with pytest.raises(ValueError, match="budget_rollouts: got 5"):
        budget_search_gain(FULL, FULL, [[1] * 4] * 2, full_cost=10, budget_rollouts=5)
    with pytest.raises(ValueError, match="leave no room"):
        budget_search_gain(FULL, FULL, [[20] * 4] * 2, full_cost=10, budget_rollouts=2)


def ledger_width_and_free_commit(costs, full_cost, rollouts):
    """What the budget search's own ledger chooses for drafts of these computed-call costs."""
    ledger = BudgetLedger(BudgetPlan(rollouts, max_candidates=len(costs)))
    for cost in costs:
        ledger.start_draft(0.0)
        try:
            for _ in range(cost):
                ledger.before_computed_call(0.0)
            ledger.finish_draft(full_cost - cost, 0.0)
        except BudgetSpent:
            break
    outcome = ledger.outcome()
    return outcome.width, outcome.commit_free


@pytest.mark.parametrize("costs", [[10] * 8, [10, 10, 6, 10, 10, 3, 3, 3], [10, 10, 10, 6, 1, 1, 1, 1],
                                   [6, 10, 10, 10, 10, 10, 10, 10], [4, 4, 4, 4, 4, 4, 4, 4]])
@pytest.mark.parametrize("rollouts", [2, 3, 4])
def test_the_audits_budget_width_is_the_ledgers_with_free_commits(costs, rollouts):
    assert budget_width_and_free_commit(costs, 10, rollouts) == ledger_width_and_free_commit(costs, 10, rollouts)


def test_budget_search_on_drafts_that_skip_nothing_is_full_best_of_m():
    report = budget_search_gain(FULL, FULL, [[10] * 4] * 2, full_cost=10, budget_rollouts=3, bootstrap=10)
    assert report.widths == (3, 3) and report.spent_share == pytest.approx(1.0)
    assert report.budget_gain.value == pytest.approx(report.full_gain.value)
