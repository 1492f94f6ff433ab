"""Audit metrics of the two cheaper searches: the pruned search (every seed drafted to the prune step, the best
previews continued) and the fixed-budget search (as many drafts as fit in the cost of full best-of-M), both measured
against the full-compute references of the same prompts and seeds ("CachedSearch: Training-Free Cached Exploration
for Test-Time Search in Video Diffusion", Sec. 3.3 and Sec. "Composition with pruned search").

Tables are [prompts, seeds]. The delivered video of a search is the full rollout of the seed it picks (the
recommit), so its score is read from the full table.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .budget import budget_width
from .fidelity import Interval
from .pruning import survivors


def _bootstrap(per_prompt: dict[str, np.ndarray], summarise, bootstrap: int, seed: int,
               confidence: float = 0.95) -> dict[str, Interval]:
    """Point values of ``summarise(per_prompt)`` with prompt-bootstrap percentile intervals."""
    point = summarise(per_prompt)
    generator = np.random.default_rng(seed)
    prompts = len(next(iter(per_prompt.values())))
    samples = {key: [] for key in point}
    for _ in range(bootstrap):
        chosen = generator.integers(0, prompts, prompts)
        for key, value in summarise({name: values[chosen] for name, values in per_prompt.items()}).items():
            samples[key].append(value)
    tail = (1 - confidence) / 2 * 100
    intervals = {}
    for key, value in point.items():
        values = np.asarray(samples[key], dtype=float)
        values = values[np.isfinite(values)]
        intervals[key] = Interval(value, *(float(np.percentile(values, q)) for q in (tail, 100 - tail))) \
            if len(values) else Interval(value, math.nan, math.nan)
    return intervals


def _capture(gain: np.ndarray, best_gain: np.ndarray) -> float:
    return float(gain.mean() / best_gain.mean()) if best_gain.mean() > 0 else math.nan


@dataclasses.dataclass(frozen=True)
class PrunedSearchReport:
    prompts: int
    seeds: int
    keep: int
    capture_of_means: Interval
    top1: Interval  # the pruned search delivers the full-compute best seed
    regret: Interval
    survival: Interval  # the full-compute best seed is among the survivors
    survivors: tuple[tuple[int, ...], ...]  # per prompt, seed indices


def pruned_search_fidelity(full, previews, finals, keep: int, bootstrap: int = 2000, seed: int = 0
                           ) -> PrunedSearchReport:
    """``previews``: every seed's preview score at the prune step; ``finals``: the survivors' final draft scores
    (other entries are ignored; NaN is fine there). The survivors are the ``keep`` best previews (ties to the lower
    seed, as the search picks them); the winner is the survivor with the best final draft score."""
    full, previews, finals = (np.asarray(table, dtype=float) for table in (full, previews, finals))
    if not full.shape == previews.shape == finals.shape or full.ndim != 2:
        raise ValueError(f"scores: full {full.shape}, previews {previews.shape} and finals {finals.shape} must all "
                         "be [prompts, seeds]")
    if not 1 <= keep <= full.shape[1]:
        raise ValueError(f"keep: got {keep}; keep 1 to {full.shape[1]} of the {full.shape[1]} seeds")
    kept = [survivors(row, keep) for row in previews]
    for prompt, indices in enumerate(kept):
        missing = [index for index in indices if not math.isfinite(finals[prompt, index])]
        if missing:
            raise ValueError(f"finals: prompt {prompt}, survivor seed index {missing[0]} has no final score")
    winners = np.array([max(indices, key=lambda index: (finals[prompt, index], -index))
                        for prompt, indices in enumerate(kept)])
    rows = np.arange(len(full))
    best = full.argmax(axis=1)
    delivered = full[rows, winners]
    per_prompt = {
        "top1": (winners == best).astype(float),
        "regret": full.max(axis=1) - delivered,
        "gain": delivered - full.mean(axis=1),
        "best_gain": full.max(axis=1) - full.mean(axis=1),
        "survival": np.array([best[prompt] in indices for prompt, indices in enumerate(kept)], dtype=float),
    }

    def summarise(parts):
        return {"top1": parts["top1"].mean(), "regret": parts["regret"].mean(), "survival": parts["survival"].mean(),
                "capture_of_means": _capture(parts["gain"], parts["best_gain"])}

    intervals = _bootstrap(per_prompt, summarise, bootstrap, seed)
    return PrunedSearchReport(full.shape[0], full.shape[1], keep, intervals["capture_of_means"], intervals["top1"],
                              intervals["regret"], intervals["survival"], tuple(tuple(indices) for indices in kept))


@dataclasses.dataclass(frozen=True)
class BudgetSearchReport:
    budget_rollouts: int
    widths: tuple[int, ...]  # N chosen per prompt
    width_capped: int  # prompts whose N reached the seeds the audit drafted (a wider N might have fit)
    spent_share: float  # mean cost of drafts + recommit over the budget
    budget_gain: Interval  # delivered score minus a single random seed's mean, budget search
    full_gain: Interval  # the same for full best-of-M over the first M seeds
    gain_ratio: Interval  # budget gain / full best-of-M gain (ratio of means)


def budget_width_and_free_commit(costs, full_cost: float, budget_rollouts: int) -> tuple[int, bool]:
    """The width the budget search (``BudgetLedger``) chooses for drafts of these costs, and whether its recommit is
    free. While the drafts skip nothing (cost = a full rollout) the recommit will be free and they may spend all M
    rollouts; the first draft that skips calls brings the full recommit back, or is dropped when that no longer
    fits."""
    free_prefix = next((index for index, cost in enumerate(costs) if cost != full_cost), len(costs))
    paid_width = budget_width(costs, full_cost, budget_rollouts)
    if paid_width > free_prefix:
        return paid_width, False
    return min(free_prefix, budget_rollouts), free_prefix > 0


def budget_search_gain(full, drafts, draft_costs, full_cost: float, budget_rollouts: int = 4,
                       bootstrap: int = 2000, seed: int = 0) -> BudgetSearchReport:
    """The fixed-budget search against full best-of-M at equal cost, per prompt: drafts of seeds 1, 2, ... while
    their costs plus one full recommit fit in ``budget_rollouts`` full rollouts (no recommit while every draft
    skipped nothing: ``budget_width_and_free_commit``), the best draft is recommitted; full best-of-M delivers the
    best full rollout of the first M seeds. With costs in transformer calls the chosen widths are deterministic."""
    full, drafts, draft_costs = (np.asarray(table, dtype=float) for table in (full, drafts, draft_costs))
    if not full.shape == drafts.shape == draft_costs.shape or full.ndim != 2:
        raise ValueError(f"scores: full {full.shape}, drafts {drafts.shape} and draft_costs {draft_costs.shape} "
                         "must all be [prompts, seeds]")
    if budget_rollouts > full.shape[1]:
        raise ValueError(f"budget_rollouts: got {budget_rollouts}; full best-of-M needs M <= {full.shape[1]} seeds")
    chosen = [budget_width_and_free_commit(costs, full_cost, budget_rollouts) for costs in draft_costs]
    widths = [width for width, _ in chosen]
    if min(widths) < 1:
        raise ValueError(f"budget_rollouts: {budget_rollouts} full rollouts leave no room for a draft and the recommit")
    winners = np.array([int(np.argmax(row[:width])) for row, width in zip(drafts, widths)])
    rows = np.arange(len(full))
    mean_single = full.mean(axis=1)
    per_prompt = {"budget": full[rows, winners] - mean_single,
                  "full": full[:, :budget_rollouts].max(axis=1) - mean_single}

    def summarise(parts):
        full_gain = parts["full"].mean()
        return {"budget": parts["budget"].mean(), "full": full_gain,
                "ratio": parts["budget"].mean() / full_gain if full_gain > 0 else math.nan}

    intervals = _bootstrap(per_prompt, summarise, bootstrap, seed)
    spent = [(costs[:width].sum() + (0.0 if free else full_cost)) / (budget_rollouts * full_cost)
             for costs, (width, free) in zip(draft_costs, chosen)]
    return BudgetSearchReport(budget_rollouts, tuple(widths), sum(width == full.shape[1] for width in widths),
                              float(np.mean(spent)), intervals["budget"], intervals["full"], intervals["ratio"])
