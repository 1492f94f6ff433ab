"""Combined rankings over several verifiers, on scripted scores."""

import math

import pytest

from cachedsearch_core import Ranking
from cachedsearch_core.combine import RANK_AVERAGE, Z_SCORE, combine_rankings, scaled_ranks, z_scores
from report_text import refusal


def test_ranks_are_scaled_to_unit_interval_and_ties_share_the_mean_rank():
    assert scaled_ranks([0.3, 0.1, 0.2]) == [1.0, 0.0, 0.5]
    assert scaled_ranks([2.0, 5.0, 2.0, 1.0, 5.0]) == [0.375, 0.875, 0.375, 0.0, 0.875]
    assert scaled_ranks([7.0]) == [0.0]


def test_z_scores_and_a_constant_verifier():
    assert z_scores([1.0, 2.0, 3.0]) == pytest.approx([-math.sqrt(1.5), 0.0, math.sqrt(1.5)])
    assert z_scores([2.5, 2.5, 2.5]) == [0.0, 0.0, 0.0]
    # equal scores whose mean does not round back to them (0.1 * 3 / 3 is 0.10000000000000002)
    assert z_scores([0.1, 0.1, 0.1]) == [0.0, 0.0, 0.0] and z_scores([0.7] * 7) == [0.0] * 7


def test_an_outlier_from_one_verifier_wins_under_z_scores_but_not_under_rank_average():
    # the second verifier hands candidate 3 an extreme score (gamed); the first prefers candidate 1
    first = Ranking((0.9, 0.8, 0.1, 0.2), verifier="ImageReward")
    gamed = Ranking((1.95, 2.1, 9.0, 2.0), verifier="VideoScore")
    by_rank = combine_rankings([first, gamed], [1.0, 1.0], RANK_AVERAGE)
    by_z = combine_rankings([first, gamed], [1.0, 1.0], Z_SCORE)
    assert by_rank.winner == 1  # ranks (1, 2/3, 0, 1/3) and (0, 2/3, 1, 1/3): candidate 2 is good under both
    assert by_z.winner == 2
    assert by_rank.scores == pytest.approx([0.0, 1 / 6, 0.0, -1 / 6])
    assert by_rank.columns == (("ImageReward", first.scores), ("VideoScore", gamed.scores))
    assert by_rank.verifier == "combined (rank average)"


def test_weights_decide_and_zero_weight_leaves_a_verifier_out():
    a = Ranking((1.0, 0.0, 0.5), verifier="A")
    b = Ranking((0.0, 1.0, 0.5), verifier="B")
    assert combine_rankings([a, b], [2.0, 1.0]).winner == 0
    assert combine_rankings([a, b], [1.0, 2.0]).winner == 1
    assert combine_rankings([a, b], [0.0, 1.0]).scores == pytest.approx(
        combine_rankings([b], [1.0]).scores)


def test_ties_and_a_constant_verifier():
    constant = Ranking((3.0, 3.0, 3.0), verifier="flat")
    informative = Ranking((0.1, 0.7, 0.4), verifier="A")
    for normalisation in (RANK_AVERAGE, Z_SCORE):
        alone = combine_rankings([informative], [1.0], normalisation)
        with_constant = combine_rankings([informative, constant], [1.0, 1.0], normalisation)
        assert with_constant.winner == alone.winner == 1
        assert with_constant.scores == pytest.approx([score / 2 for score in alone.scores])
        assert combine_rankings([constant], [1.0], normalisation).scores == (0.0, 0.0, 0.0)
    tied = combine_rankings([Ranking((1.0, 0.0)), Ranking((0.0, 1.0))], [1.0, 1.0])
    assert tied.scores == (0.0, 0.0) and tied.winner == 0  # a full tie goes to the lowest seed
    assert [name for name, _ in tied.columns] == ["scores", "scores #2"]


def test_nan_and_mismatched_inputs_are_rejected_with_the_culprit_named():
    with pytest.raises(ValueError, match=refusal("scores", 2, "nan")):
        combine_rankings([Ranking((0.1, math.nan), verifier="A")], [1.0])
    a, b = Ranking((0.1, 0.2), verifier="A"), Ranking((0.1, 0.2, 0.3), verifier="B")
    with pytest.raises(ValueError, match="'A' scored 2 candidates but 'B' scored 3"):
        combine_rankings([a, b], [1.0, 1.0])
    with pytest.raises(ValueError, match="weight for 'A': got nan"):
        combine_rankings([a], [math.nan])
    with pytest.raises(ValueError, match=r"weights: all are 0"):
        combine_rankings([a, a], [0.0, 0.0])
    with pytest.raises(ValueError, match=refusal("normalisation", "'mean'")):
        combine_rankings([a], [1.0], "mean")
    with pytest.raises(ValueError, match="columns: 'x' has 1 values for 2 candidates"):
        Ranking((0.1, 0.2), columns=(("x", (1.0,)),))
