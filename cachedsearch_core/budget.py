"""Fixed-budget search: draft while the drafts so far plus one full recommit cost no more than full best-of-M
("CachedSearch: Training-Free Cached Exploration for Test-Time Search in Video Diffusion", Sec. 3.3)."""

from __future__ import annotations

from collections.abc import Sequence


def predicted_full_cost(draft_cost: float, computed_fraction: float) -> float:
    """A full rollout's cost predicted from one draft before any commit has run: the draft computed only
    ``computed_fraction`` of its transformer calls, which dominate a rollout's cost."""
    if not 0 < computed_fraction <= 1:
        raise ValueError(f"computed_fraction: got {computed_fraction}; a draft computes a fraction in (0, 1]")
    return draft_cost / computed_fraction


def budget_width(draft_costs: Sequence[float], full_cost: float, budget_rollouts: int) -> int:
    """The largest N with cost(drafts 1..N) + one full recommit <= ``budget_rollouts`` full rollouts.

    Costs in transformer calls make N deterministic; in seconds N depends on wall time.
    """
    if budget_rollouts < 1:
        raise ValueError(f"budget_rollouts: got {budget_rollouts}; spend at least what one full rollout costs")
    if full_cost <= 0:
        raise ValueError(f"full_cost: got {full_cost}; a full rollout costs more than nothing")
    allowance = budget_rollouts * full_cost - full_cost
    spent = 0.0
    width = 0
    for cost in draft_costs:
        if spent + cost > allowance:
            break
        spent += cost
        width += 1
    return width
