"""Search bookkeeping and the search report of the report's Sec. 3.2 (no ComfyUI); the cost model: test_cost.py."""

import math

import pytest

from cachedsearch_core import Draft, Ranking, SearchCost, StageCalls, candidate_seeds, parse_scores, search_report
from cachedsearch_core.cache_statistics import INACTIVE_PREFIX
from cachedsearch_core.cost_formulas import calls_per_stage
from cachedsearch_core.search_report import COMMIT_FREE_DELIVERY, COMMIT_FREE_LINE, DELIVERED_BY, WINNER_LINE_PREFIX
from cachedsearch_core.records import MAX_CANDIDATES, MAX_SEED
from report_text import line_of, numbers, refusal


def test_candidate_seeds_are_consecutive_from_the_seed():
    assert candidate_seeds(41, 4) == [41, 42, 43, 44]
    assert candidate_seeds(0xFFFF_FFFF_FFFF_FFFF - 2, 3)[-1] == 0xFFFF_FFFF_FFFF_FFFF


@pytest.mark.parametrize(
    "seed, n, message",
    [
        (0, 0, refusal("num_candidates", 0, 1, MAX_CANDIDATES)),
        (0, 65, refusal("num_candidates", 65, 1, MAX_CANDIDATES)),
        (MAX_SEED, 2, refusal("seed", MAX_SEED, 2)),  # with 2 candidates the last seed overflows
        (-1, 2, refusal("seed", -1)),
    ],
)
def test_candidate_seeds_reject_bad_input_naming_it(seed, n, message):
    with pytest.raises(ValueError, match=message):
        candidate_seeds(seed, n)


def test_ranking_winner_is_first_highest_score():
    assert Ranking((0.1, 0.7, 0.3)).winner == 1
    assert Ranking((0.5, 0.9, 0.9, 0.2)).winner == 1  # tie: the lower seed
    assert Ranking((-2.0,)).winner == 0
    assert Ranking((3, 3, 3)).winner == 0


@pytest.mark.parametrize("scores, message", [((), "got none"), ((0.1, math.nan), "candidate(s) 2 scored nan"),
                                             ((math.inf,), "candidate(s) 1 scored inf")])
def test_ranking_rejects_missing_or_non_finite_scores(scores, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Ranking(scores)


def test_ranking_length_must_match_candidates():
    Ranking((1.0, 2.0)).check_matches(2)
    with pytest.raises(ValueError, match=refusal("ranking", 2, 3)):  # 2 scores, 3 candidates
        Ranking((1.0, 2.0)).check_matches(3)


def test_parse_scores_accepts_common_separators():
    assert parse_scores("0.5, -1;2\n3e-1  4") == (0.5, -1.0, 2.0, 0.3, 4.0)
    with pytest.raises(ValueError, match="scores: got no numbers"):
        parse_scores(" \n ")
    with pytest.raises(ValueError, match="could not read"):
        parse_scores("0.1, high")


def report(drafts, ranking=None, cost=None, **options):
    """The report of ``drafts`` with ``cost`` (theirs before a commit by default)."""
    return search_report(drafts, "cache adaptive tau 0.1", cost or SearchCost.of_search(drafts), ranking, **options)


def test_report_lists_candidates_scores_winner_and_cost():
    drafts = [Draft(seed=7, seconds=1.0, calls_computed=24, calls_skipped=26),
              Draft(seed=8, seconds=1.0, calls_computed=25, calls_skipped=25)]
    text = report(drafts, Ranking((0.2, 0.4)), SearchCost.of_search(drafts).after_commit(50, 2.0))
    lines = text.splitlines()
    assert lines[0] == "CachedSearch: 2 candidate(s), cache adaptive tau 0.1"
    assert lines[2].split() == ["1", "7", "0.2000", "26/50", "(52%)", "1.00"]
    assert lines[3].split() == ["*", "2", "8", "0.4000", "25/50", "(50%)", "1.00"]
    assert winner_line(text) == ("candidate 2, seed 8", DELIVERED_BY["commit"])
    # The cost lines close the report: calls, then seconds.
    assert lines[-2:] == SearchCost.of_search(drafts).after_commit(50, 2.0).report_lines()
    assert lines[-2].startswith("transformer calls: ") and lines[-1].startswith("seconds ")


def test_report_before_ranking_has_no_scores_or_winner():
    text = report([Draft(3, 0.5, 10, 0)])
    assert "winner" not in text and "-" in text.splitlines()[2]


def test_report_of_a_staged_search_sums_each_stage_over_the_drafts():
    drafts = [Draft(5, 1.0, 14, 6, stage_calls=(StageCalls(6, 4), StageCalls(8, 2))),
              Draft(6, 1.0, 17, 3, stage_calls=(StageCalls(8, 2), StageCalls(9, 1)))]
    text = report(drafts, stage_names=("high noise", "low noise"))
    # each stage's line: its skipped calls of its calls over all drafts, and their share
    assert numbers(line_of(text, "high noise: ")) == [6, 20, 30] and numbers(line_of(text, "low noise: ")) == [3, 20, 15]
    assert calls_per_stage(drafts, ("high noise", "low noise")) == (("high noise", 6, 20), ("low noise", 3, 20))


def test_report_names_why_the_cache_was_inactive_once():
    reason = "its latent input is a NestedTensor"
    drafts = [Draft(3, 0.5, 10, 0, cache_inactive_reason=reason), Draft(4, 0.5, 10, 0, cache_inactive_reason=reason)]
    lines = report(drafts).splitlines()
    assert lines.count(f"{INACTIVE_PREFIX}{reason}") == 1
    assert not any("inactive" in line for line in report([Draft(3, 0.5, 10, 0)]).splitlines())


def winner_line(text):
    """The winner line's candidate and what delivered it."""
    (line,) = [line for line in text.splitlines() if line.startswith(WINNER_LINE_PREFIX)]
    return tuple(line.removeprefix(WINNER_LINE_PREFIX).split(", delivered by "))


def test_report_says_what_delivered_the_winner():
    drafts = [Draft(seed=7, seconds=2.0, calls_computed=50, calls_skipped=0),
              Draft(seed=8, seconds=1.0, calls_computed=25, calls_skipped=25),
              Draft(seed=9, seconds=2.2, calls_computed=50, calls_skipped=0)]
    ranking, sampled = Ranking((0.5, 0.2, 0.4)), SearchCost.of_search(drafts)
    free = report(drafts, ranking, sampled.after_commit(0, 0.0))
    assert COMMIT_FREE_LINE in free.splitlines()
    assert winner_line(free) == ("candidate 1, seed 7", COMMIT_FREE_DELIVERY)
    real_commit = report(drafts, ranking, sampled.after_commit(50, 2.0))
    assert COMMIT_FREE_LINE not in real_commit.splitlines()
    assert winner_line(real_commit) == ("candidate 1, seed 7", DELIVERED_BY["commit"])
    kept = report(drafts, ranking, sampled.after_keep())
    assert winner_line(kept) == ("candidate 1, seed 7", DELIVERED_BY["keep"]) and COMMIT_FREE_LINE not in kept
