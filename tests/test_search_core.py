"""Search bookkeeping and the cost model of the report's Sec. 3.2-3.3 (no ComfyUI)."""

import math

import pytest

from cachedsearch_core import Draft, Ranking, SearchCost, StageCalls, candidate_seeds, parse_scores, search_report


def test_candidate_seeds_are_consecutive_from_the_seed():
    assert candidate_seeds(41, 4) == [41, 42, 43, 44]
    assert candidate_seeds(0xFFFF_FFFF_FFFF_FFFF - 2, 3)[-1] == 0xFFFF_FFFF_FFFF_FFFF


@pytest.mark.parametrize(
    "seed, n, message",
    [
        (0, 0, "num_candidates: got 0; use 1 to 64"),
        (0, 65, "num_candidates: got 65; use 1 to 64"),
        (0xFFFF_FFFF_FFFF_FFFF, 2, "seed: got 18446744073709551615; with 2 candidates"),
        (-1, 2, "seed: got -1"),
    ],
)
def test_candidate_seeds_reject_bad_input_naming_it(seed, n, message):
    with pytest.raises(ValueError) as error:
        candidate_seeds(seed, n)
    assert message in str(error.value)


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
    with pytest.raises(ValueError, match="ranking: has 2 scores but the search made 3 candidates"):
        Ranking((1.0, 2.0)).check_matches(3)


def test_parse_scores_accepts_common_separators():
    assert parse_scores("0.5, -1;2\n3e-1  4") == (0.5, -1.0, 2.0, 0.3, 4.0)
    with pytest.raises(ValueError, match="scores: got no numbers"):
        parse_scores(" \n ")
    with pytest.raises(ValueError, match="could not read"):
        parse_scores("0.1, high")


def test_cost_model_matches_spec_section_4():
    # gamma 0.51 at N = 8: (8 * 0.51 + 1) / 8 = 63.5 %, break-even N* = 1 / 0.49
    cost = SearchCost(num_candidates=8, draft_seconds=0.51, full_seconds=1.0)
    assert cost.gamma == pytest.approx(0.51)
    assert cost.relative_cost == pytest.approx(0.635)
    assert cost.break_even_width == pytest.approx(1 / 0.49)
    assert SearchCost(4, 2.0, 2.0).break_even_width == math.inf


def test_report_lists_candidates_scores_winner_and_cost():
    drafts = [Draft(seed=7, seconds=1.0, calls_computed=24, calls_skipped=26),
              Draft(seed=8, seconds=1.0, calls_computed=25, calls_skipped=25)]
    text = search_report(drafts, "cache adaptive tau 0.1", Ranking((0.2, 0.4)), "commit", commit_seconds=2.0)
    lines = text.splitlines()
    assert lines[0] == "CachedSearch: 2 candidate(s), cache adaptive tau 0.1"
    assert lines[2].split() == ["1", "7", "0.2000", "26/50", "(52%)", "1.00"]
    assert lines[3].split() == ["*", "2", "8", "0.4000", "25/50", "(50%)", "1.00"]
    assert "winner: candidate 2, seed 8, delivered by recommit at full compute" in text
    assert ("gamma (mean draft / commit) 0.50; cost vs full best-of-2 in seconds measured on this machine 100.0 %; "
            "break-even width N* = 2.00") in text


def test_report_of_pruned_survivors_leaves_the_full_best_of_n_comparison_to_the_pruning_lines():
    drafts = [Draft(seed=7, seconds=1.0, calls_computed=24, calls_skipped=26)]
    text = search_report(drafts, "cache adaptive tau 0.1", Ranking((0.2,)), "commit", commit_seconds=2.0,
                         survivors_of=4)
    assert text.endswith("commit 2.00 s; gamma (mean draft / commit) 0.50 over the 1 surviving drafts of 4")
    assert "cost vs full" not in text and "break-even" not in text


def test_report_before_ranking_has_no_scores_or_winner():
    text = search_report([Draft(3, 0.5, 10, 0)], "no cache on this model")
    assert "winner" not in text and "-" in text.splitlines()[2]
    assert text.endswith("mean draft 0.50 s")


def test_report_of_a_staged_search_sums_each_stage_over_the_drafts():
    drafts = [Draft(5, 1.0, 14, 6, stage_calls=(StageCalls(6, 4), StageCalls(8, 2))),
              Draft(6, 1.0, 17, 3, stage_calls=(StageCalls(8, 2), StageCalls(9, 1)))]
    text = search_report(drafts, "high noise: cache ...; low noise: no cache", stage_names=("high noise", "low noise"))
    assert "high noise: 6/20 calls skipped (30%) over all drafts" in text
    assert "low noise: 3/20 calls skipped (15%) over all drafts" in text
    assert drafts[1].stage_calls[0].skipped_fraction == pytest.approx(0.2)


def test_report_names_why_the_cache_was_inactive_once():
    reason = "its latent input is a NestedTensor"
    drafts = [Draft(3, 0.5, 10, 0, cache_inactive_reason=reason), Draft(4, 0.5, 10, 0, cache_inactive_reason=reason)]
    lines = search_report(drafts, "cache adaptive tau 0.1").splitlines()
    assert lines.count(f"cache inactive on this model: {reason}") == 1
    assert not any("inactive" in line for line in search_report([Draft(3, 0.5, 10, 0)], "cache").splitlines())


def test_a_free_commit_costs_nothing_in_the_cost_model():
    # The winning draft skipped nothing: cost(commit) = N C_c, commit beats best-of-N at any width once drafts are
    # cheaper, and ties it when every draft is a full rollout.
    cost = SearchCost(num_candidates=8, draft_seconds=0.51, full_seconds=1.0, commit_seconds=0.0)
    assert cost.relative_cost == pytest.approx(0.51)
    assert cost.break_even_width == 0.0
    assert SearchCost(4, 2.0, 2.0, commit_seconds=0.0).relative_cost == pytest.approx(1.0)
    assert SearchCost(4, 2.0, 2.0, commit_seconds=0.0).break_even_width == math.inf


def test_report_of_a_free_commit_says_so_and_measures_the_full_rollout_by_the_drafts():
    drafts = [Draft(seed=7, seconds=2.0, calls_computed=50, calls_skipped=0),
              Draft(seed=8, seconds=1.0, calls_computed=25, calls_skipped=25),
              Draft(seed=9, seconds=2.2, calls_computed=50, calls_skipped=0)]
    text = search_report(drafts, "cache adaptive tau 0.1", Ranking((0.5, 0.2, 0.4)), "commit", commit_seconds=0.0)
    assert "commit free: the winning draft skipped nothing" in text
    assert "winner: candidate 1, seed 7, delivered by its draft, which computed every call (commit free)" in text
    # C_f = mean of the two full drafts (2.1 s); the drafts alone cost 5.2 s of best-of-3's 6.3 s.
    assert "full rollout 2.10 s (the drafts that skipped nothing)" in text
    assert "cost vs full best-of-3 in seconds measured on this machine 82.5 % (the drafts alone)" in text
    real_commit = search_report(drafts, "cache", Ranking((0.5, 0.2, 0.4)), "commit", commit_seconds=2.0)
    assert "commit free" not in real_commit and "delivered by recommit at full compute" in real_commit
