"""Fixed-budget search width from scripted costs (framework-free)."""

import pytest

from cachedsearch_core import Draft, search_cost
from cachedsearch_core.budget import BudgetLedger, BudgetPlan, BudgetSpent, budget_width, predicted_full_cost
from report_text import numbers, refusal


def test_width_is_the_largest_that_fits():
    # Full rollout 100 calls, budget best-of-4 = 400: 300 left after the recommit.
    assert budget_width([50] * 10, 100, 4) == 6
    assert budget_width([50, 50, 50, 50, 50, 51], 100, 4) == 5  # the sixth would spend 301
    assert budget_width([60, 60, 60, 60, 60, 60], 100, 4) == 5
    assert budget_width([100] * 5, 100, 1) == 0


def test_call_budget_is_deterministic_and_prediction_uses_computed_fraction():
    costs = [48, 52, 47, 55, 50, 49, 51]
    assert budget_width(costs, 100, 4) == budget_width(list(costs), 100, 4) == 5  # 252 spent; the sixth would make 301
    assert predicted_full_cost(51.0, 0.5) == 102.0
    with pytest.raises(ValueError, match="computed_fraction: got 0"):
        predicted_full_cost(1.0, 0)
    with pytest.raises(ValueError, match="budget_rollouts: got 0"):
        budget_width(costs, 100, 0)


def draft_with_calls(ledger, computed, total, seconds=0.0, start=0.0):
    """Runs one scripted draft through the ledger: ``computed`` calls, then the draft ends."""
    ledger.start_draft(start)
    for call in range(computed):
        ledger.before_computed_call(start + seconds * call / max(computed, 1))
    ledger.finish_draft(total - computed, start + seconds)


def run_scripted_search(plan, computed_per_draft, total):
    """What the search does with a ledger: drafts until one is stopped or max_candidates are made."""
    ledger = BudgetLedger(plan)
    for computed in computed_per_draft[: plan.max_candidates]:
        try:
            draft_with_calls(ledger, computed, total)
        except BudgetSpent:
            break
    return ledger.outcome()


@pytest.mark.parametrize("rollouts", [2, 3, 4, 5])
def test_call_ledger_drafts_exactly_the_largest_width_that_fits(rollouts):
    costs = [30, 52, 41, 47, 38, 55, 29, 44, 50, 36, 40, 33]
    outcome = run_scripted_search(BudgetPlan(rollouts, max_candidates=12), costs, total=100)
    assert outcome.width == budget_width(costs, 100, rollouts)
    assert outcome.full_cost == 100
    assert outcome.predicted_total <= rollouts * 100  # the stopped draft's calls included
    spent_on_drafts = sum(costs[: outcome.width])
    assert outcome.stopped_draft_cost == (rollouts - 1) * 100 - spent_on_drafts  # stopped at the last call that fit


def test_the_budget_line_adds_up_with_the_stopped_drafts_calls():
    # Full rollout 8 calls, best-of-2: 8 for drafts; 5 fit, the second draft stops after 3.
    outcome = run_scripted_search(BudgetPlan(2, max_candidates=8), [5, 5], total=8)
    line = outcome.lines()[1]
    # drafts 5 calls + stopped draft 3 calls + recommit 8 calls predicted = 16 calls of 16 calls: the terms add up
    assert numbers(line.split("; ")[1]) == [5, 3, 8, 16, 16]
    # Stopped before its first call: nothing to add, nothing shown.
    assert "stopped draft" not in run_scripted_search(BudgetPlan(2), [8, 8], total=8).lines()[1]


def test_the_stopped_draft_keeps_its_calls_and_seconds_in_either_unit():
    # Best-of-2 in calls, 8 per rollout: the second draft may compute 3 calls; its 4th, at 0.6 s into it, is refused.
    ledger = BudgetLedger(BudgetPlan(2, max_candidates=8))
    draft_with_calls(ledger, 5, 8, seconds=1.0, start=0.0)
    with pytest.raises(BudgetSpent):
        draft_with_calls(ledger, 5, 8, seconds=1.0, start=1.0)
    outcome = ledger.outcome()
    assert (outcome.stopped_draft_cost, outcome.stopped_draft_calls) == (3, 3)
    assert outcome.stopped_draft_seconds == pytest.approx(0.6)


def test_max_candidates_ends_a_search_with_budget_left():
    outcome = run_scripted_search(BudgetPlan(4, max_candidates=3), [10] * 10, total=100)
    assert (outcome.width, outcome.stopped_draft_cost) == (3, None)
    assert "max_candidates 3 reached" in "\n".join(outcome.lines())


def test_wall_time_ledger_predicts_the_full_rollout_from_the_computed_fraction():
    plan = BudgetPlan(3, unit="wall time", max_candidates=10)
    ledger = BudgetLedger(plan)
    clock = 0.0
    # Each draft computes 40 of 100 calls in 2 s: a full rollout is predicted at 2 / 0.4 = 5 s; 10 s for drafts.
    widths = []
    for _ in range(10):
        try:
            draft_with_calls(ledger, 40, 100, seconds=2.0, start=clock)
        except BudgetSpent:
            break
        clock += 2.0
        widths.append(ledger.full_cost())
    assert widths[0] == pytest.approx(5.0)
    outcome = ledger.outcome()
    assert outcome.width == budget_width([2.0] * 10, 5.0, 3) == 5
    assert "N depends on wall time" in outcome.lines()[0]
    assert "deterministic" in run_scripted_search(BudgetPlan(3), [40] * 5, 100).lines()[0]


def committed(outcome, computed, total, commit_calls):
    """The search's cost model after a commit that counted ``commit_calls``: ``outcome.width`` drafts that computed
    ``computed`` of ``total`` calls each."""
    drafts = [Draft(seed, 1.0, computed, total - computed) for seed in range(outcome.width)]
    return search_cost(drafts, budget=outcome).after_commit(commit_calls, commit_calls / 100)


def test_outcome_compares_predicted_and_measured_recommit():
    outcome = run_scripted_search(BudgetPlan(4, max_candidates=8), [50] * 8, total=100)
    assert (outcome.width, outcome.break_even_width) == (6, 2.0)
    assert len(outcome.lines()) == 2  # nothing measured before a commit
    check = outcome.lines(committed(outcome, 50, 100, commit_calls=100))[-1]
    # the recommit predicted and measured 100 calls; the search measured 400, 100.0 % of the budget
    measured = numbers(check)
    assert measured[:2] == [100, 100] and measured[3:] == [400, 100.0], check


@pytest.mark.parametrize("inputs, message", [
    (dict(rollouts=1), "budget_rollouts: got 1"),
    (dict(rollouts=65), "budget_rollouts: got 65"),
    (dict(max_candidates=0), "max_candidates: got 0"),
    (dict(unit="seconds"), refusal("budget_unit", "'seconds'")),
])
def test_bad_plans_name_the_input(inputs, message):
    with pytest.raises(ValueError, match=message):
        BudgetPlan(**inputs)


def test_drafts_that_skip_nothing_spend_every_rollout_because_the_commit_is_free():
    outcome = run_scripted_search(BudgetPlan(4, max_candidates=8), [100] * 8, total=100)
    assert outcome.commit_free and outcome.recommit_cost == 0
    assert outcome.width == budget_width([100] * 8, 100, 4, commit_free=True) == 4
    assert budget_width([100] * 8, 100, 4) == 3
    assert (outcome.predicted_total, outcome.stopped_draft_cost) == (400, 0)
    lines = outcome.lines(committed(outcome, 100, 100, commit_calls=0))
    # N = 4 chosen, draft 5 stopped after 0 calls; drafts 400 calls + a free recommit = 400 of 400 calls
    assert numbers(lines[1])[:5] == [4, 5, 0, 400, 400] and "recommit free" in lines[1]
    assert numbers(lines[2]) == [0, 0, 400, 400, 100.0]  # recommit predicted, measured; total predicted, measured


def test_a_draft_that_skips_after_free_ones_is_dropped_when_a_full_recommit_no_longer_fits():
    # Two full drafts (200 calls) leave 100 of best-of-3 with a free commit; the third skips 40 calls, so the recommit
    # would cost 100 again and 200 + 60 + 100 > 300: it is dropped, the two full drafts keep the free commit.
    outcome = run_scripted_search(BudgetPlan(3, max_candidates=8), [100, 100, 60, 100], total=100)
    assert (outcome.width, outcome.commit_free, outcome.stopped_draft_cost) == (2, True, 60)
    assert outcome.predicted_total == 260 <= outcome.budget
    assert "draft 3 dropped after 60 calls: it skipped calls" in outcome.lines()[1]
    # With best-of-4 the same draft fits with a full recommit: 200 + 60 + 100 <= 400, and the next draft stops at 40.
    outcome = run_scripted_search(BudgetPlan(4, max_candidates=8), [100, 100, 60, 100], total=100)
    assert (outcome.width, outcome.commit_free, outcome.stopped_draft_cost) == (3, False, 40)
    assert outcome.recommit_cost == 100 and outcome.predicted_total == 400


@pytest.mark.parametrize("replayed", [1, 3, 5])
def test_drafts_saved_by_an_earlier_run_replay_to_the_same_width_and_stop(replayed):
    """A re-queued budget search books the drafts it reads back as they were drafted: it chooses the width and stops
    the next draft exactly where the uninterrupted search did; the report says how many were replayed."""
    costs, plan = [30, 52, 41, 47, 38, 55, 29, 44], BudgetPlan(4, max_candidates=8)
    uninterrupted = run_scripted_search(plan, costs, total=100)
    ledger = BudgetLedger(plan)
    try:
        for computed in costs[:replayed]:
            ledger.replay_draft(computed, 100 - computed, seconds=1.0)
        for computed in costs[replayed:]:
            draft_with_calls(ledger, computed, 100)
    except BudgetSpent:
        pass
    resumed = ledger.outcome()
    assert (resumed.width, resumed.draft_costs, resumed.stopped_draft_cost) == \
        (uninterrupted.width, uninterrupted.draft_costs, uninterrupted.stopped_draft_cost)
    assert resumed.replayed_drafts == replayed and uninterrupted.replayed_drafts == 0
    assert f"({replayed} of them saved" in resumed.lines()[1]
    assert "saved by an earlier run" not in uninterrupted.lines()[1]


def test_a_replayed_draft_that_does_not_fit_a_smaller_budget_is_stopped_as_a_computed_one():
    ledger = BudgetLedger(BudgetPlan(2, max_candidates=8))
    ledger.replay_draft(60, 40, seconds=1.0)  # full rollout 100 calls: 100 for drafts, 60 spent
    with pytest.raises(BudgetSpent):
        ledger.replay_draft(60, 40, seconds=1.0)
    assert ledger.outcome().width == 1 and ledger.outcome().stopped_draft_cost == 40
