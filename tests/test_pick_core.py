"""The artist's pick resolved without ComfyUI: candidate numbers in seed order, who chose, and the errors."""

import pytest

from cachedsearch_core.pick import PickChoices, resolve_pick, with_pick_line
from cachedsearch_core.search_report import COMMIT_FREE_DELIVERY, DELIVERED_BY, WINNER_LINE_PREFIX
from report_text import numbers, refusal

SEEDS = (40, 41, 42, 43)
PRUNED = PickChoices(SEEDS, (1, 3))  # a pruned search of 4 kept candidates 2 and 4
FULL = PickChoices(SEEDS[:3], (0, 1, 2))


def test_a_pick_names_the_candidate_in_seed_order_pruned_candidates_included():
    pick = resolve_pick(PRUNED, 4, "keep", verifier_winner=0)
    assert (pick.candidate, pick.seed, pick.draft_index, pick.picked_by) == (4, 43, 1, "you")
    assert pick.verifier_choice == (2, 41)  # the first survivor is candidate 2, not 1
    pruned = resolve_pick(PRUNED, 3, "commit", verifier_winner=0)
    assert (pruned.candidate, pruned.seed, pruned.draft_index) == (3, 42, None)


def test_pick_zero_is_the_verifiers_choice():
    pick = resolve_pick(PRUNED, 0, "commit", verifier_winner=1)
    assert (pick.candidate, pick.seed, pick.draft_index, pick.picked_by) == (4, 43, 1, "verifier")
    line = pick.report_line()  # the verifier's choice is the report's winner: candidate 4, seed 43, committed
    assert line.startswith(WINNER_LINE_PREFIX) and numbers(line) == [4, 43] and line.endswith(DELIVERED_BY["commit"])


def test_the_report_line_says_who_chose():
    mine = resolve_pick(FULL, 3, "commit", verifier_winner=1)
    line = mine.report_line()  # you chose candidate 3 (seed 42), the verifier candidate 2 (seed 41)
    assert "you" in line and numbers(line) == [3, 42, 2, 41] and line.endswith(DELIVERED_BY["commit"])
    alone = resolve_pick(FULL, 1, "keep")
    line = alone.report_line()  # you chose candidate 1 (seed 40); no verifier's choice to name
    assert "you" in line and numbers(line) == [1, 40] and line.endswith(DELIVERED_BY["keep"])
    assert alone.delivery_fields(3) == {"candidate": 1, "seed": 40, "mode": "keep", "picked_by": "you",
                                        "verifier_choice": None, "pick_among": 3}
    assert mine.delivery_fields(3)["verifier_choice"] == {"candidate": 2, "seed": 41}


def test_the_pick_line_replaces_the_reports_winner_line_or_closes_a_report_without_one():
    pick = resolve_pick(FULL, 3, "commit", verifier_winner=1)
    report = "CachedSearch: 3 candidate(s)\nwinner: candidate 2, seed 41, delivered by x\nmean draft 1.00 s"
    assert with_pick_line(report, pick).splitlines() == [
        "CachedSearch: 3 candidate(s)", pick.report_line(), "mean draft 1.00 s"]
    assert with_pick_line("CachedSearch: 3 candidate(s)\nmean draft 1.00 s", pick).splitlines()[-1] == \
        pick.report_line()


@pytest.mark.parametrize("arguments, message", [
    # the input named, then its facts: the value got, the candidates, the range to use, what to do instead
    (dict(pick=0), refusal("ranking", "pick", 0, 1, 4)),
    (dict(pick=5), refusal("pick", 5, 4, 1, 4, 0)),
    (dict(pick=1, mode="keep"), refusal("mode", "keep", 1, 40, "commit")),  # candidate 1 (seed 40) was pruned
    (dict(pick=2, pick_among=8), refusal("pick_among", 8, 4)),
    (dict(pick=2, mode="draft"), refusal("mode", "'draft'")),
])
def test_bad_picks_name_the_input(arguments, message):
    arguments = dict(mode="commit") | arguments
    with pytest.raises(ValueError, match=message):
        resolve_pick(PRUNED, arguments.pop("pick"), arguments.pop("mode"), **arguments)


def test_a_pick_among_the_same_width_passes_and_preselection_follows_the_verifier():
    assert resolve_pick(PRUNED, 2, "keep", pick_among=4).draft_index == 0
    assert PRUNED.preselected(1) == 4 and PRUNED.preselected(None) == 0


def test_choices_must_name_their_candidates():
    with pytest.raises(ValueError, match="finished"):
        PickChoices((1, 2), (2,))


def test_a_free_commit_says_so_on_the_pick_line_and_keep_never_does():
    mine = resolve_pick(FULL, 3, "commit", verifier_winner=1)
    assert mine.report_line(commit_free=True).endswith(COMMIT_FREE_DELIVERY)
    assert mine.report_line().endswith(DELIVERED_BY["commit"])
    report = "CachedSearch: 3 candidate(s)\nwinner: candidate 2, seed 41, delivered by x"
    assert with_pick_line(report, mine, commit_free=True).splitlines()[1] == mine.report_line(commit_free=True)
    kept = resolve_pick(FULL, 3, "keep", verifier_winner=1)
    assert kept.report_line(commit_free=True) == kept.report_line()
