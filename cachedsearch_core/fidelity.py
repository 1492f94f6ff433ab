"""Ranking-fidelity metrics of the report's Sec. 4.1, on score tables.

``full[p, i]`` = V(G(c_p, s_i)) and ``cached[p, i]`` = V(G_tau(c_p, s_i)) for P
prompts and the same S seeds. Delivery is by commit: the seed the cached
scores pick, scored at full compute.

Intervals come from a bootstrap over prompts (an audit of many prompts) or, for a calibration on one prompt,
over seeds: each draw resamples the S seeds with replacement and recomputes every metric on them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions), 1-based."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=float)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman_rho(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman correlation with tie-averaged ranks; NaN when either side is constant or has one value."""
    if len(a) < 2:
        return math.nan
    ranks_a, ranks_b = _ranks(np.asarray(a, float)), _ranks(np.asarray(b, float))
    centred_a, centred_b = ranks_a - ranks_a.mean(), ranks_b - ranks_b.mean()
    denominator = math.sqrt(float((centred_a**2).sum() * (centred_b**2).sum()))
    return float((centred_a * centred_b).sum() / denominator) if denominator > 0 else math.nan


@dataclasses.dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


PROMPT_BOOTSTRAP = "prompts"
SEED_BOOTSTRAP = "seeds"


@dataclasses.dataclass(frozen=True)
class FidelityReport:
    prompts: int
    seeds: int
    resampled: str  # what the bootstrap resampled: PROMPT_BOOTSTRAP or SEED_BOOTSTRAP
    rho: Interval  # median over prompts of the per-prompt Spearman rho
    rho_median: float
    rho_p10: float
    rho_defined: int  # prompts whose rho is defined (neither side constant)
    top1: Interval
    regret: Interval
    gain: Interval
    best_gain: Interval
    capture_of_means: Interval
    capture_mean_of_ratios: Interval


def _per_prompt(full: np.ndarray, cached: np.ndarray):
    picked = cached.argmax(axis=1)  # first maximum: ties go to the lower seed
    delivered = full[np.arange(len(full)), picked]
    mean_single = full.mean(axis=1)
    top1 = (picked == full.argmax(axis=1)).astype(float)
    regret = full.max(axis=1) - delivered
    gain = delivered - mean_single
    best_gain = full.max(axis=1) - mean_single
    return top1, regret, gain, best_gain


def _summaries(top1, regret, gain, best_gain) -> dict[str, float]:
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(best_gain > 0, gain / np.where(best_gain > 0, best_gain, 1), np.nan)
    mean_best = best_gain.mean()
    return {
        "top1": top1.mean(), "regret": regret.mean(), "gain": gain.mean(), "best_gain": mean_best,
        "capture_of_means": gain.mean() / mean_best if mean_best > 0 else math.nan,
        "capture_mean_of_ratios": float(np.nanmean(ratios)) if np.isfinite(ratios).any() else math.nan,
    }


def _median_rho(full: np.ndarray, cached: np.ndarray) -> float:
    rhos = np.array([spearman_rho(f, c) for f, c in zip(full, cached)])
    defined = rhos[np.isfinite(rhos)]
    return float(np.median(defined)) if len(defined) else math.nan


def ranking_fidelity(full, cached, bootstrap: int = 2000, seed: int = 0, confidence: float = 0.95,
                     resample: str = PROMPT_BOOTSTRAP) -> FidelityReport:
    """the report's Sec. 4.1 metrics with bootstrap intervals over prompts, or over seeds (``resample``)."""
    full, cached = np.asarray(full, dtype=float), np.asarray(cached, dtype=float)
    if full.ndim != 2 or full.shape != cached.shape:
        raise ValueError(f"scores: full {full.shape} and cached {cached.shape} must both be [prompts, seeds]")
    if full.shape[0] == 0 or full.shape[1] == 0:
        raise ValueError("scores: need at least one prompt and one seed")
    if resample not in (PROMPT_BOOTSTRAP, SEED_BOOTSTRAP):
        raise ValueError(f"resample: got {resample!r}; use {PROMPT_BOOTSTRAP!r} or {SEED_BOOTSTRAP!r}")
    for name, table in (("full", full), ("cached", cached)):
        bad = np.argwhere(~np.isfinite(table))
        if len(bad):
            prompt, seed_index = bad[0]
            raise ValueError(f"{name} scores: prompt {prompt}, seed index {seed_index} is {table[prompt, seed_index]}; "
                             "every rollout needs a finite score (re-score or drop that prompt)")
    rhos = np.array([spearman_rho(f, c) for f, c in zip(full, cached)])
    defined = rhos[np.isfinite(rhos)]
    per_prompt = _per_prompt(full, cached)
    point = {**_summaries(*per_prompt), "rho": float(np.median(defined)) if len(defined) else math.nan}
    generator = np.random.default_rng(seed)
    samples = {key: [] for key in point}
    for _ in range(bootstrap):
        if resample == PROMPT_BOOTSTRAP:
            chosen = generator.integers(0, len(full), len(full))
            summaries = _summaries(*(part[chosen] for part in per_prompt))
            chosen_rhos = rhos[chosen][np.isfinite(rhos[chosen])]
            summaries["rho"] = float(np.median(chosen_rhos)) if len(chosen_rhos) else math.nan
        else:
            chosen = generator.integers(0, full.shape[1], full.shape[1])
            summaries = _summaries(*_per_prompt(full[:, chosen], cached[:, chosen]))
            summaries["rho"] = _median_rho(full[:, chosen], cached[:, chosen])
        for key, value in summaries.items():
            samples[key].append(value)
    tail = (1 - confidence) / 2 * 100

    def interval(key):
        values = np.asarray(samples[key], dtype=float)
        values = values[np.isfinite(values)]
        if not len(values):
            return Interval(point[key], math.nan, math.nan)
        return Interval(point[key], float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail)))

    return FidelityReport(
        prompts=full.shape[0], seeds=full.shape[1], resampled=resample, rho=interval("rho"),
        rho_median=point["rho"],
        rho_p10=float(np.percentile(defined, 10)) if len(defined) else math.nan,
        rho_defined=len(defined),
        top1=interval("top1"), regret=interval("regret"), gain=interval("gain"), best_gain=interval("best_gain"),
        capture_of_means=interval("capture_of_means"), capture_mean_of_ratios=interval("capture_mean_of_ratios"),
    )
