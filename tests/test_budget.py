"""Fixed-budget search width from scripted costs (framework-free)."""

import pytest

from cachedsearch_core.budget import budget_width, predicted_full_cost


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
