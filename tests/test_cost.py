"""One search's cost in transformer calls and seconds against full best-of-N, for every kind of search and delivery
(no ComfyUI)."""

import dataclasses
import json
import math

import pytest

from cachedsearch_core import Draft, Ranking, SearchCost, StageCalls, search_cost, search_report
from cachedsearch_core.budget import BudgetOutcome, BudgetPlan
from cachedsearch_core.cost_formulas import break_even_width
from cachedsearch_core.pruning import PrunedCandidate, PruningOutcome
from report_text import numbers, refusal

ROLLOUT_CALLS = 50


def cached_drafts(seconds=(1.0, 1.2, 0.8), computed=(24, 26, 22)):
    """Drafts of seeds 7, 8, ... that skipped calls: a full rollout computes 50."""
    return [Draft(seed=7 + index, seconds=s, calls_computed=c, calls_skipped=ROLLOUT_CALLS - c)
            for index, (s, c) in enumerate(zip(seconds, computed))]


def pruned_search():
    """4 seeds from 7 pruned at step 4 of 10 (20 calls): candidates 2 and 4 finished, 1 and 3 were dropped after
    10 computed calls and 0.4 s each; scoring the four previews took 0.3 s."""
    survivors = [Draft(8, 1.1, 24, 26), Draft(10, 0.9, 22, 28)]
    dropped = (PrunedCandidate(Draft(7, 0.4, 10, 10), 0.1), PrunedCandidate(Draft(9, 0.4, 10, 10), 0.2))
    outcome = PruningOutcome(4, 10, (7, 8, 9, 10), (0.1, 0.9, 0.2, 0.8), (1, 3), dropped, preview_seconds=0.3)
    return survivors, outcome


def test_the_report_section_4_example_in_calls_and_seconds():
    # gamma 0.51 at N = 8: (8 x 0.51 + 1) / 8 = 63.5 % of full best-of-8, break-even N* = 1 / 0.49.
    cost = SearchCost(width=8, finished_drafts=8, rollout_calls=100, search_calls=408, search_seconds=8 * 0.51,
                      mean_draft_seconds=0.51).after_commit(100, 1.0)
    assert (cost.full_calls, cost.total_calls) == (800, 508)
    assert cost.calls_ratio_with_commit == pytest.approx(0.635)
    assert cost.gamma == pytest.approx(0.51)
    assert cost.seconds_ratio_with_commit == pytest.approx(0.635)
    assert cost.break_even_width == pytest.approx(1 / 0.49)


def test_break_even_width_with_a_full_a_free_and_no_cheaper_draft():
    assert break_even_width(0.5, 1.0) == 2.0
    assert break_even_width(0.5, 0.0) == 0.0  # a free commit beats full best-of-N at any width
    assert break_even_width(1.0, 0.0) == math.inf  # drafts that cost full rollouts never win


def test_plain_drafts_before_a_commit_predict_one_full_rollout_and_no_seconds_ratio():
    cost = SearchCost.of_search(cached_drafts())
    assert (cost.width, cost.rollout_calls, cost.search_calls, cost.commit_calls) == (3, 50, 72, 50)
    assert cost.search_seconds == pytest.approx(3.0) and cost.mean_draft_seconds == pytest.approx(1.0)
    assert (cost.calls_ratio, cost.calls_ratio_with_commit) == (72 / 150, 122 / 150)
    # Every draft skipped calls: nothing has measured a full rollout's seconds yet.
    assert cost.full_rollout_seconds is None and cost.seconds_ratio is None and cost.break_even_width is None
    # The calls line says these numbers, in this order: drafts' calls of full best-of-N's, their share; the commit's
    # calls, the total and its share.
    assert numbers(cost.calls_line()) == [72, 150, 3, 48.0, 50, 122, 81.3]
    # the seconds line: the search's seconds and the mean draft, and no share (no full rollout measured yet)
    assert numbers(cost.seconds_line()) == [3.0, 1.0] and "%" not in cost.seconds_line()


def test_a_commit_measures_the_full_rollout_and_counts_its_calls():
    cost = SearchCost.of_search(cached_drafts()).after_commit(50, 2.0)
    assert (cost.commit_ran, cost.commit_free) == (True, False)
    assert cost.full_rollout_seconds == cost.commit_seconds == 2.0
    assert cost.seconds_ratio == pytest.approx(3.0 / 6.0) and cost.seconds_ratio_with_commit == pytest.approx(5 / 6)
    assert cost.gamma == pytest.approx(0.5) and cost.break_even_width == pytest.approx(2.0)
    assert cost.commit_was_full_rollout  # the line says the commit measured the full rollout
    # search seconds, full rollout, its share of best-of-3, with the commit, gamma, break-even width
    assert numbers(cost.seconds_line()) == [3.0, 2.0, 50.0, 3, 2.0, 83.3, 0.5, 2.0]


def test_a_search_read_back_from_disk_keeps_its_cost_with_the_picks_commit_beside_it():
    """A pick after ComfyUI dropped the drafts (or a restart) reads every draft back from disk: this run computed
    none of them, yet the search still cost what it did when drafted, and the commit is added to that."""
    drafts = cached_drafts()
    drafted = SearchCost.of_search(drafts).after_commit(50, 2.0)
    read_back = SearchCost.of_search([dataclasses.replace(draft, reused=True) for draft in drafts]).after_commit(50, 2.0)
    assert read_back.search_calls == 0 and read_back.calls_ratio == 0  # what this run computed
    assert read_back.drafted_calls == drafted.drafted_calls == drafted.search_calls == 72
    assert read_back.drafted_ratio == drafted.calls_ratio == pytest.approx(72 / 150)
    assert read_back.drafted_ratio_with_commit == drafted.calls_ratio_with_commit == pytest.approx(122 / 150)
    shown = read_back.as_dict()
    assert (shown["drafted_calls"], shown["drafted_ratio_with_commit"]) == (72, pytest.approx(122 / 150))
    # half of them resumed: the search's cost is the same whichever run computed its drafts
    resumed = SearchCost.of_search([dataclasses.replace(drafts[0], reused=True), *drafts[1:]])
    assert (resumed.search_calls, resumed.drafted_calls) == (48, 72)



def test_the_payload_carries_the_sums_and_verdicts_the_panels_show():
    """The panels format these fields and compute none (#52): the search's calls with the commit, the commit's share
    of full best-of-N, whether this run computed every call, and whether the search cost more than full best-of-N."""
    drafts = cached_drafts()  # 72 of the 150 calls of full best-of-3; a commit computes 50
    before = SearchCost.of_search(drafts).as_dict()
    assert (before["drafted_calls_with_commit"], before["commit_ratio"]) == (122, pytest.approx(50 / 150))
    assert (before["drafted_by_this_run"], before["over_full_best_of"]) == (True, False)
    read_back = SearchCost.of_search([dataclasses.replace(draft, reused=True) for draft in drafts])
    shown = read_back.after_commit(50, 2.0).as_dict()
    assert (shown["drafted_by_this_run"], shown["drafted_calls_with_commit"]) == (False, 122)
    assert shown["drafted_ratio_with_commit"] == pytest.approx(shown["drafted_ratio"] + shown["commit_ratio"])
    kept = read_back.after_keep().as_dict()
    assert (kept["drafted_calls_with_commit"], kept["commit_ratio"]) == (72, 0)
    # drafts that skipped nothing, with a commit that is not free: 150 + 50 calls of full best-of-3's 150
    skipped_nothing = SearchCost.of_search([Draft(7 + index, 1.0, ROLLOUT_CALLS, 0) for index in range(3)])
    assert (skipped_nothing.drafted_calls_with_commit, skipped_nothing.over_full_best_of) == (200, True)
    assert SearchCost.of_search([Draft(7, 1.0, ROLLOUT_CALLS, 0)], commit_free=True).over_full_best_of is False

def test_a_free_commit_costs_nothing_and_the_drafts_that_skipped_nothing_measure_the_full_rollout():
    drafts = [Draft(7, 2.0, 50, 0), Draft(8, 1.0, 25, 25), Draft(9, 2.2, 50, 0)]
    cost = SearchCost.of_search(drafts).after_commit(0, 0.0)
    assert (cost.commit_free, cost.commit_calls, cost.commit_seconds) == (True, 0, 0.0)
    assert cost.calls_ratio_with_commit == cost.calls_ratio == 125 / 150
    # C_f = the mean of the two full drafts (2.1 s); the drafts alone cost 5.2 s of best-of-3's 6.3 s.
    assert cost.full_rollout_seconds == pytest.approx(2.1) and not cost.commit_was_full_rollout
    assert cost.seconds_ratio_with_commit == pytest.approx(5.2 / 6.3)
    assert cost.break_even_width == 0.0
    # search seconds, the full rollout the full drafts measured, share of best-of-3, with the free commit
    assert numbers(cost.seconds_line())[:6] == [5.2, 2.1, 82.5, 3, 0.0, 82.5]
    # Every draft a full rollout and the commit free: the search costs what full best-of-N costs, and never wins.
    every_call = SearchCost.of_search([Draft(7, 2.0, 50, 0), Draft(8, 2.0, 50, 0)], commit_free=True)
    assert every_call.calls_ratio_with_commit == every_call.seconds_ratio_with_commit == 1.0
    assert every_call.break_even_width == math.inf and every_call.as_dict()["break_even_width"] is None


def test_keep_delivers_without_a_commit():
    cost = SearchCost.of_search(cached_drafts()).after_keep()
    assert (cost.kept, cost.commit_ran, cost.commit_calls, cost.commit_seconds) == (True, False, 0, 0.0)
    assert cost.calls_ratio_with_commit == cost.calls_ratio
    # the drafts' 72 of best-of-3's 150 calls (48.0 %), the search's 3 s and mean draft's 1 s: no commit's figures
    assert numbers(cost.calls_line()) == [72, 150, 3, 48.0]
    assert numbers(cost.seconds_line()) == [3.0, 1.0]


def test_a_pruned_search_counts_every_candidate_it_started_and_what_the_dropped_ones_and_previews_cost():
    survivors, outcome = pruned_search()
    cost = search_cost(survivors, pruning=outcome)
    assert (cost.width, cost.finished_drafts, cost.pruned) == (4, 2, True)
    assert cost.search_calls == 24 + 22 + 10 + 10
    assert cost.search_seconds == pytest.approx(1.1 + 0.9 + 0.4 + 0.4 + 0.3)
    assert cost.mean_draft_seconds == pytest.approx(1.0)  # the finished drafts' only
    assert cost.calls_ratio_with_commit == (66 + 50) / 200
    # The artist's pick of a dropped candidate is a full rollout like any other commit.
    picked = cost.after_commit(50, 2.5)
    assert picked.seconds_ratio_with_commit == pytest.approx((3.1 + 2.5) / (4 * 2.5))
    assert picked.gamma == pytest.approx(0.4)
    assert picked.break_even_width is None and "break-even" not in picked.seconds_line()


def test_a_budget_search_counts_the_draft_it_stopped():
    plan = BudgetPlan(3, max_candidates=8)
    outcome = BudgetOutcome(plan, (24.0, 26.0), 50.0, 30.0, stopped_draft_calls=30, stopped_draft_seconds=1.4)
    cost = search_cost(cached_drafts()[:2], budget=outcome)
    assert (cost.width, cost.search_calls) == (2, 24 + 26 + 30)
    assert cost.search_seconds == pytest.approx(1.0 + 1.2 + 1.4)


@pytest.mark.parametrize("unit", ["transformer calls", "wall time"])
def test_the_budgets_measured_total_is_the_cost_models_total_in_its_unit(unit):
    plan = BudgetPlan(3, unit=unit, max_candidates=8)
    outcome = BudgetOutcome(plan, (24.0, 26.0), 50.0, 30.0, stopped_draft_calls=30, stopped_draft_seconds=1.4)
    before = search_cost(cached_drafts()[:2], budget=outcome)
    assert outcome.measured(before) is None and len(outcome.lines(before)) == 2  # no commit ran yet
    assert outcome.measured(before.after_keep()) is None
    committed = before.after_commit(50, 2.5)
    if unit == "transformer calls":
        assert outcome.measured(committed) == (50, 24 + 26 + 30 + 50) == (committed.commit_calls, committed.total_calls)
        # the recommit predicted and measured 50 calls, the search 130 and 130, 86.7 % of the budget
        assert numbers(outcome.lines(committed)[-1]) == [50, 50, 130, 130, 86.7]
    else:
        assert outcome.measured(committed) == (2.5, pytest.approx(1.0 + 1.2 + 1.4 + 2.5))
        assert "measured 6.10 s" in outcome.lines(committed)[-1]


def test_one_searchs_sampler_and_recommit_tell_the_same_figure_for_every_delivery():
    """The Sampler shows the search's calls alone and with the commit it predicts; the Recommit's headline is its
    calls with what delivered the result: the same numbers once the commit counted what the Sampler predicted."""
    survivors, outcome = pruned_search()
    full_drafts = [Draft(7, 2.0, 50, 0), Draft(8, 2.1, 50, 0)]
    deliveries = {
        "commit": (SearchCost.of_search(cached_drafts()), lambda cost: cost.after_commit(50, 2.0),
                   "calls_ratio_with_commit"),
        "keep": (SearchCost.of_search(cached_drafts()), SearchCost.after_keep, "calls_ratio"),
        "free commit": (SearchCost.of_search(full_drafts, commit_free=True), lambda cost: cost.after_commit(0, 0.0),
                        "calls_ratio_with_commit"),
        "pick of a pruned candidate": (search_cost(survivors, pruning=outcome),
                                       lambda cost: cost.after_commit(50, 2.5), "calls_ratio_with_commit"),
    }
    for name, (sampler, deliver, sampler_key) in deliveries.items():
        shown = json.loads(json.dumps(sampler.as_dict()))  # as the panels receive them
        delivered = json.loads(json.dumps(deliver(sampler).as_dict()))
        assert delivered["calls_ratio_with_commit"] == shown[sampler_key], name
        assert delivered["search_calls"] == shown["search_calls"] and delivered["full_calls"] == shown["full_calls"]
    # The report's calls line says it in the same words on both nodes.
    sampler = SearchCost.of_search(cached_drafts())
    assert sampler.calls_line() == sampler.after_commit(50, 2.0).calls_line()
    drafts = cached_drafts()
    recommit_report = search_report(drafts, "cache", sampler.after_commit(50, 2.0), Ranking((0.1, 0.3, 0.2)))
    assert sampler.calls_line() in search_report(drafts, "cache", sampler).splitlines()
    assert sampler.calls_line() in recommit_report.splitlines()


def test_the_panel_summary_carries_the_finished_drafts_skipped_share_fewer_calls_and_mean_seconds():
    """The Sampler's panel summary shows these fields as they are: the finished drafts' skipped calls, their share,
    how many times fewer calls were computed, the mean seconds per draft and each expert's share."""
    survivors, outcome = pruned_search()  # the dropped drafts' calls are not the finished drafts'
    shown = json.loads(json.dumps(search_cost(survivors, pruning=outcome).as_dict()))
    assert (shown["draft_calls"], shown["skipped_calls"]) == (100, 54)
    assert shown["skipped_share"] == pytest.approx(0.54)
    assert shown["fewer_calls_factor"] == pytest.approx(100 / 46)
    assert shown["mean_draft_seconds"] == pytest.approx(1.0)
    assert shown["stage_skipped_shares"] == []  # one stage
    experts = [Draft(7, 1.0, 30, 20, (StageCalls(10, 15), StageCalls(20, 5))),
               Draft(8, 3.0, 40, 10, (StageCalls(20, 5), StageCalls(20, 5)))]
    staged = SearchCost.of_search(experts, stage_names=("high noise", "low noise")).as_dict()
    assert staged["stage_skipped_shares"] == [{"stage": "high noise", "share": pytest.approx(20 / 50)},
                                              {"stage": "low noise", "share": pytest.approx(10 / 50)}]
    assert (staged["skipped_share"], staged["mean_draft_seconds"]) == (pytest.approx(0.3), pytest.approx(2.0))


@pytest.mark.parametrize("drafts, share, factor", [
    ([Draft(7, 1.0, 50, 0)], 0.0, None),  # nothing skipped
    ([Draft(7, 1.0, 0, 50)], 1.0, None),  # everything skipped: no finite factor
    ([Draft(7, 1.0, 0, 0)], None, None),  # no calls at all
])
def test_the_skipped_share_and_fewer_calls_factor_are_none_where_they_mean_nothing(drafts, share, factor):
    shown = SearchCost(width=1, finished_drafts=1, rollout_calls=50, search_calls=drafts[0].calls_computed,
                       search_seconds=1.0, mean_draft_seconds=1.0, draft_calls=drafts[0].calls_computed +
                       drafts[0].calls_skipped, skipped_calls=drafts[0].calls_skipped).as_dict()
    assert (shown["skipped_share"], shown["fewer_calls_factor"]) == (share, factor)


@pytest.mark.parametrize("fields, field, facts", [
    (dict(rollout_calls=0), "rollout_calls", [0]),
    (dict(finished_drafts=4), "finished_drafts", [4, 3]),  # 4 finished of 3 candidates
    (dict(measured_commit_calls=50), "measured_commit_calls and measured_commit_seconds", [50, None]),
    (dict(kept=True, commit_free=True), "kept", []),
])
def test_an_inconsistent_cost_is_refused_naming_the_field(fields, field, facts):
    given = dict(width=3, finished_drafts=3, rollout_calls=50, search_calls=72, search_seconds=3.0,
                 mean_draft_seconds=1.0) | fields
    with pytest.raises(ValueError, match=refusal(field, *facts)):
        SearchCost(**given)
    with pytest.raises(ValueError, match="drafts: got none"):
        SearchCost.of_search([])
