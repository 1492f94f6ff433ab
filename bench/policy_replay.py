"""The bench's recorded rollouts (``bench.policy_rollouts``) as the core's replay tables
(``cachedsearch_core.search_policy``, which replays every policy), and the statistics of the preview curves.

Besides the core's preview (the cached draft's x0), the bench records the full rollout's x0 at every step and a
two-step lookahead at ``LOOKAHEAD_STEPS`` (``LOOKAHEAD_CALLS`` computed calls per scored candidate): two more
preview kinds of the same tables. A split run's later pieces may cache differently from the unsplit draft, so
``bench.search_policies`` checks the replay's counts and winners against the extension's runner.
"""

from __future__ import annotations

import numpy as np

from bench.policy_rollouts import LOOKAHEAD_CALLS, LOOKAHEAD_STEPS, RolloutStore
from cachedsearch_core.search_policy import DRAFT_PREVIEW, Rollouts

PREVIEW_KINDS = (DRAFT_PREVIEW, "x0 (full compute)", "lookahead 2 steps")


def load_rollouts(store: RolloutStore, prompts: int) -> Rollouts:
    """Every seed collected for all prompts, from 0 up."""
    seeds = 0
    while all(store.has(kind, p, seeds) for p in range(prompts) for kind in ("full", "cached")):
        seeds += 1

    def table(kind, make):
        return np.array([[make(store.get(kind, p, s)) for s in range(seeds)] for p in range(prompts)])

    steps = len(store.get("full", 0, 0)["previews"])
    # Index s of a recorded preview list is call s's estimate, the preview at prune step s + 1.
    lookahead = np.full((prompts, seeds, steps), np.nan)
    lookahead[..., [step - 1 for step in LOOKAHEAD_STEPS]] = table(
        "cached", lambda r: [r["lookahead"][str(step)] for step in LOOKAHEAD_STEPS])
    return Rollouts(table("full", lambda r: r["final"]), table("cached", lambda r: r["final"]),
                    table("cached", lambda r: np.isin(np.arange(steps), r["computed_steps"])),
                    {PREVIEW_KINDS[0]: table("cached", lambda r: r["previews"]),
                     PREVIEW_KINDS[1]: table("full", lambda r: r["previews"]), PREVIEW_KINDS[2]: lookahead},
                    full_calls=float(steps), preview_calls={PREVIEW_KINDS[2]: float(LOOKAHEAD_CALLS)})


def ranks(values: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(values, axis=-1), axis=-1).astype(float)


def spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row rank correlation (ties broken by order)."""
    ra, rb = ranks(a), ranks(b)
    ra -= ra.mean(axis=-1, keepdims=True)
    rb -= rb.mean(axis=-1, keepdims=True)
    return (ra * rb).sum(-1) / np.sqrt((ra ** 2).sum(-1) * (rb ** 2).sum(-1))


def best_in_top(preview: np.ndarray, final: np.ndarray, k: int) -> np.ndarray:
    """Per prompt: whether the best final seed is among the ``k`` best previews."""
    top = np.argsort(-preview, axis=-1, kind="stable")[:, :k]
    return (top == final.argmax(axis=-1)[:, None]).any(axis=-1)


def preview_noise(rollouts: Rollouts, kind: str, step: int, width: int) -> float:
    """The preview's noise as a predictor of the final full score, in preview units: the residual spread of the
    per-prompt-centred final on the centred preview (least squares), over the slope."""
    preview, final = rollouts.preview(kind, step)[:, :width], rollouts.full[:, :width]
    x = (preview - preview.mean(1, keepdims=True)).ravel()
    y = (final - final.mean(1, keepdims=True)).ravel()
    slope = (x @ y) / (x @ x)
    return float(np.std(y - slope * x) / slope) if slope > 0 else float("inf")
