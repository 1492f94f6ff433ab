"""Search policies replayed on recorded rollouts (``bench.policy_rollouts``): the preview curves, and what each
policy delivers and computes, per prompt.

A policy drafts seeds 0..N-1 with the cache, prunes at its rounds' steps on a preview score, runs the survivors to
the end, and recommits the best final draft at full compute (the commit is 16 calls, counted apart). What it delivers
is the full-compute rollout of that seed (the ground truth). Its computed calls: a seed dropped at step p computed the
cached draft's calls before p, a survivor its whole draft's; a lookahead preview adds its calls for every candidate
it scores. A split run's later pieces may cache differently from the unsplit draft, so ``bench.search_policies``
checks the count and the winner against the extension's runner (``run_pruned_search``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bench.policy_rollouts import LOOKAHEAD_CALLS, LOOKAHEAD_STEPS, RolloutStore

PREVIEW_KINDS = ("x0 (cached draft)", "x0 (full compute)", "lookahead 2 steps")


@dataclasses.dataclass(frozen=True)
class Rollouts:
    """Arrays over [prompt, seed(, step)]: full finals and previews, cached finals, previews, computed steps and
    lookahead previews (columns: LOOKAHEAD_STEPS)."""

    full: np.ndarray
    full_previews: np.ndarray
    draft: np.ndarray
    draft_previews: np.ndarray
    computed: np.ndarray
    lookahead: np.ndarray

    @classmethod
    def load(cls, store: RolloutStore, prompts: int) -> Rollouts:
        """Every seed collected for all prompts, from 0 up."""
        seeds = 0
        while all(store.has(kind, p, seeds) for p in range(prompts) for kind in ("full", "cached")):
            seeds += 1

        def table(kind, make):
            return np.array([[make(store.get(kind, p, s)) for s in range(seeds)] for p in range(prompts)])

        steps = len(store.get("full", 0, 0)["previews"])
        return cls(table("full", lambda r: r["final"]), table("full", lambda r: r["previews"]),
                   table("cached", lambda r: r["final"]), table("cached", lambda r: r["previews"]),
                   table("cached", lambda r: np.isin(np.arange(steps), r["computed_steps"])),
                   table("cached", lambda r: [r["lookahead"][str(step)] for step in LOOKAHEAD_STEPS]))

    @property
    def steps(self) -> int:
        return self.full_previews.shape[-1]

    @property
    def seeds(self) -> int:
        return self.full.shape[1]

    def subset(self, prompts) -> Rollouts:
        return Rollouts(*(getattr(self, field.name)[prompts] for field in dataclasses.fields(self)))

    def block(self, seeds: np.ndarray) -> Rollouts:
        """``seeds`` as seeds 0, 1, ..."""
        return Rollouts(*(getattr(self, field.name)[:, seeds] for field in dataclasses.fields(self)))

    def preview(self, kind: str, step: int) -> np.ndarray | None:
        """[prompt, seed] preview scores at prune ``step`` (the estimate of the last call before it), or None
        where ``kind`` has none there."""
        if kind == PREVIEW_KINDS[0]:
            return self.draft_previews[..., step - 1]
        if kind == PREVIEW_KINDS[1]:
            return self.full_previews[..., step - 1]
        return self.lookahead[..., LOOKAHEAD_STEPS.index(step)] if step in LOOKAHEAD_STEPS else None


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


@dataclasses.dataclass(frozen=True)
class Round:
    """A prune at ``step``: keep the ``keep`` best previews, and with ``margin`` (preview units) every candidate
    within it of the leader too, at most ``cap``."""

    step: int
    keep: int
    margin: float | None = None
    cap: int | None = None

    def kept(self, scores: np.ndarray) -> np.ndarray:
        order = np.argsort(-scores, kind="stable")
        count = self.keep
        if self.margin is not None:
            count = max(count, int((scores >= scores.max() - self.margin).sum()))
            count = min(count, self.cap or len(scores))
        return np.sort(order[:count])


@dataclasses.dataclass(frozen=True)
class Policy:
    """N seeds, the rounds, the preview kind (lookahead only at the first round's step)."""

    name: str
    width: int
    rounds: tuple[Round, ...]
    preview: str = PREVIEW_KINDS[0]


def replay_prompt(rollouts: Rollouts, prompt: int, policy: Policy) -> tuple[int, float, bool]:
    """(delivered seed, computed exploration calls, whether the best full seed survived every round)."""
    running = np.arange(policy.width)
    computed = rollouts.computed[prompt]
    calls = 0.0
    for index, prune in enumerate(policy.rounds):
        kind = policy.preview if index == 0 else PREVIEW_KINDS[0]
        scores = rollouts.preview(kind, prune.step)[prompt, running]
        if kind == PREVIEW_KINDS[2]:
            calls += LOOKAHEAD_CALLS * len(running)
        kept = running[prune.kept(scores)]
        calls += float(computed[np.setdiff1d(running, kept), :prune.step].sum())
        running = kept
    calls += float(computed[running].sum())
    winner = int(running[np.argmax(rollouts.draft[prompt, running])])
    best = int(np.argmax(rollouts.full[prompt, :policy.width]))
    return winner, calls, best in running


@dataclasses.dataclass(frozen=True)
class Replay:
    """Per prompt, over the seed blocks a width allows (``blocks``): mean delivered full score, mean and worst
    exploration calls, how often the true best survived."""

    delivered: np.ndarray
    calls: np.ndarray
    worst: np.ndarray
    survived: np.ndarray


def blocks(rollouts: Rollouts, width: int, orders: int = 3) -> list[Rollouts]:
    """Disjoint blocks of ``width`` seeds, in seed order and in ``orders - 1`` fixed shuffles of the seeds (seeds are
    exchangeable, so each block is a draw of N seeds; more draws, less seed noise for a wide N)."""
    count = rollouts.seeds // width
    if count == 0:
        raise ValueError(f"width {width}: only {rollouts.seeds} seeds collected")
    generator = np.random.default_rng(0)
    shuffles = [np.arange(rollouts.seeds)] + [generator.permutation(rollouts.seeds) for _ in range(orders - 1)]
    return [rollouts.block(order[index * width:(index + 1) * width]) for order in shuffles for index in range(count)]


def _averaged(rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Replay:
    delivered, calls, survived = (np.array(values, dtype=float) for values in zip(*rows))
    return Replay(delivered.mean(0), calls.mean(0), calls.max(0), survived.mean(0))


def replay(rollouts: Rollouts, policy: Policy) -> Replay:
    rows = []
    for block in blocks(rollouts, policy.width):
        outcomes = [replay_prompt(block, p, policy) for p in range(len(block.full))]
        rows.append(([block.full[p, w] for p, (w, _, _) in enumerate(outcomes)], [c for _, c, _ in outcomes],
                     [s for _, _, s in outcomes]))
    return _averaged(rows)


def full_best_of(rollouts: Rollouts, width: int) -> Replay:
    prompts = len(rollouts.full)
    return _averaged([(block.full.max(axis=1), np.full(prompts, float(width * rollouts.steps)), np.ones(prompts))
                      for block in blocks(rollouts, width)])
