"""the report's Sec. 4.1 metrics on hand-computable score tables (no model)."""

import math

import numpy as np
import pytest

from cachedsearch_core.fidelity import ranking_fidelity, spearman_rho


def test_spearman_matches_hand_values_with_and_without_ties():
    assert spearman_rho(np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])) == pytest.approx(1.0)
    assert spearman_rho(np.array([1, 2, 3, 4]), np.array([4, 3, 2, 1])) == pytest.approx(-1.0)
    # centred ranks a = -1.5,-0.5,0.5,1.5; b = [2, 1, 3.5, 3.5] -> -0.5,-1.5,1,1: 3.5 / sqrt(5 * 4.5)
    assert spearman_rho(np.array([1, 2, 3, 4]), np.array([5, 1, 9, 9])) == pytest.approx(3.5 / math.sqrt(5 * 4.5))


@pytest.mark.parametrize("a, b", [([1, 1, 1], [1, 2, 3]), ([1, 2, 3], [5, 5, 5]), ([1], [2])])
def test_spearman_is_undefined_for_constant_or_single_scores(a, b):
    assert math.isnan(spearman_rho(np.array(a, float), np.array(b, float)))


def test_metrics_on_a_two_prompt_table():
    full = [[1.0, 3.0, 2.0, 0.0],    # best seed 1; cached picks seed 2 -> regret 1
            [0.0, 1.0, 2.0, 5.0]]    # best seed 3; cached picks seed 3 -> regret 0
    cached = [[0.5, 1.0, 2.5, 0.0],
              [0.1, 0.9, 2.0, 4.0]]
    report = ranking_fidelity(full, cached, bootstrap=200)
    assert (report.prompts, report.seeds) == (2, 4)
    assert report.top1.value == 0.5
    assert report.regret.value == 0.5
    # gains over the mean single sample (1.5 and 2.0): delivered 2 - 1.5 = 0.5 and 5 - 2 = 3
    assert report.gain.value == pytest.approx(1.75)
    assert report.best_gain.value == pytest.approx((1.5 + 3.0) / 2)
    assert report.capture_of_means.value == pytest.approx(1.75 / 2.25)
    assert report.capture_mean_of_ratios.value == pytest.approx((0.5 / 1.5 + 1.0) / 2)
    # prompt 1: ranks full 2,4,3,1 vs cached 2,3,4,1 -> rho 0.8; prompt 2: identical order -> 1.0
    assert report.rho_median == pytest.approx(0.9)
    assert report.rho_defined == 2
    assert report.top1.low <= report.top1.value <= report.top1.high


def test_identical_tables_capture_everything():
    full = np.random.default_rng(0).normal(size=(20, 8))
    report = ranking_fidelity(full, full.copy(), bootstrap=100)
    assert report.top1.value == 1.0 and report.regret.value == 0.0
    assert report.capture_of_means.value == pytest.approx(1.0)
    assert report.capture_of_means.low == pytest.approx(1.0) and report.rho_p10 == pytest.approx(1.0)


def test_ties_in_cached_scores_pick_the_lower_seed():
    report = ranking_fidelity([[1.0, 2.0, 0.0]], [[3.0, 3.0, 0.0]], bootstrap=10)
    assert report.top1.value == 0.0 and report.regret.value == 1.0


def test_constant_full_scores_leave_rho_and_ratio_capture_undefined():
    report = ranking_fidelity([[1.0, 1.0, 1.0]], [[0.2, 0.5, 0.1]], bootstrap=10)
    assert math.isnan(report.rho_median) and report.rho_defined == 0
    assert report.regret.value == 0.0 and report.gain.value == 0.0
    assert math.isnan(report.capture_of_means.value) and math.isnan(report.capture_mean_of_ratios.value)


def test_single_seed_means_no_search():
    report = ranking_fidelity([[0.3], [0.7]], [[0.1], [0.9]], bootstrap=10)
    assert report.top1.value == 1.0 and report.regret.value == 0.0 and report.gain.value == 0.0
    assert math.isnan(report.rho_median) and math.isnan(report.capture_of_means.value)


def test_non_finite_or_mismatched_tables_are_rejected():
    with pytest.raises(ValueError, match="cached scores: prompt 1, seed index 0 is nan"):
        ranking_fidelity([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [math.nan, 4.0]])
    with pytest.raises(ValueError, match=r"full \(1, 2\) and cached \(1, 3\)"):
        ranking_fidelity([[1.0, 2.0]], [[1.0, 2.0, 3.0]])


def test_bootstrap_is_reproducible_for_a_seed():
    rng = np.random.default_rng(1)
    full = rng.normal(size=(30, 4))
    cached = full + rng.normal(scale=0.5, size=(30, 4))
    first, second = ranking_fidelity(full, cached, seed=3), ranking_fidelity(full, cached, seed=3)
    assert first == second
    assert first.capture_of_means.low < first.capture_of_means.value < first.capture_of_means.high
