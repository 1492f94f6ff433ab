"""Search policies replayed on recorded rollouts: what a width-N search, pruned in rounds on a preview score, would
have computed and delivered on prompts and seeds whose full and cached rollouts were recorded (issue 51; the bench
that found the policies: docs/pruning-and-budget.md, "Search policies").

A policy drafts N seeds with the step cache, prunes at its rounds' steps on a preview score (the first round may use
another preview kind, e.g. a lookahead that costs calls of its own), runs the survivors to the end, and recommits the
best final draft at full compute. It delivers the full-compute rollout of that seed. Its computed exploration
calls: a seed dropped at prune step p computed its cached draft's calls before p, a survivor its whole draft's. So a
pruned candidate is its unsplit cached draft cut at the round steps, and one recorded draft per seed replays every
policy. Seeds are exchangeable: a width-N policy is scored on every disjoint block of N seeds (``blocks``).

Tables are [prompt, seed(, step)]. A preview at prune step p (1 <= p < T) is the score of the sampler's x0 estimate
of its last call before p (index p - 1 of a preview table; NaN where none was scored).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Iterable, Mapping

import numpy as np

DRAFT_PREVIEW = "x0 (cached draft)"


def _finite(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}: got {value!r}; record a finite number")
    return float(value)


def _index(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}: got {value!r}; use a whole number from 0")
    return value


@dataclasses.dataclass(frozen=True)
class FullRollout:
    """One seed of one prompt at full compute: its verifier score (what a commit of that seed delivers) and its
    transformer calls (the commit's cost)."""

    prompt: int
    seed: int
    score: float
    calls: float

    def __post_init__(self):
        _index("prompt", self.prompt)
        _index("seed", self.seed)
        object.__setattr__(self, "score", _finite("score", self.score))
        if _finite("calls", self.calls) <= 0:
            raise ValueError(f"calls: got {self.calls!r}; a full rollout computes at least one transformer call")


@dataclasses.dataclass(frozen=True)
class CachedRollout:
    """One seed of one prompt drafted with the step cache at ``tau``: the final draft's score, the verifier's score
    of the x0 preview at some prune steps ({step: score}, 1 <= step < T) and the transformer calls it computed at
    each of its T steps (0 where the cache skipped the step)."""

    prompt: int
    seed: int
    tau: float
    score: float
    previews: Mapping[int, float]
    computed_calls: tuple[float, ...]

    def __post_init__(self):
        _index("prompt", self.prompt)
        _index("seed", self.seed)
        if _finite("tau", self.tau) <= 0:
            raise ValueError(f"tau: got {self.tau!r}; a cached rollout's threshold is above 0")
        object.__setattr__(self, "score", _finite("score", self.score))
        calls = tuple(_finite("computed_calls", value) for value in self.computed_calls)
        if len(calls) < 2 or min(calls) < 0:
            raise ValueError(f"computed_calls: got {self.computed_calls!r}; give each step's computed calls (>= 0), "
                             "at least two steps")
        object.__setattr__(self, "computed_calls", calls)
        previews = {}
        for step, value in dict(self.previews).items():
            if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step < len(calls):
                raise ValueError(f"previews: step {step!r}; a preview is scored at a prune step 1 to {len(calls) - 1}")
            previews[step] = _finite(f"previews[{step}]", value)
        object.__setattr__(self, "previews", previews)


@dataclasses.dataclass(frozen=True)
class Rollouts:
    """Recorded rollouts as tables: full scores, final draft scores, computed calls per step, preview tables by kind
    (``DRAFT_PREVIEW`` always), the calls a preview kind costs per scored candidate, and a full rollout's calls
    (the commit's cost). ``preview_cost``: what scoring one preview (decoding it and the verifier's call) costs in
    computed calls' time (``previews.preview_call_equivalents``); charged in a policy's cost, not in its calls."""

    full: np.ndarray
    draft: np.ndarray
    computed: np.ndarray
    previews: Mapping[str, np.ndarray]
    full_calls: float
    preview_calls: Mapping[str, float] = dataclasses.field(default_factory=dict)
    preview_cost: float = 0.0

    def __post_init__(self):
        if not math.isfinite(self.preview_cost) or self.preview_cost < 0:
            raise ValueError(f"preview_cost: got {self.preview_cost!r}; give a preview's cost in calls, 0 or more")
        if DRAFT_PREVIEW not in self.previews:
            raise ValueError(f"previews: no {DRAFT_PREVIEW!r} table; the later rounds prune on it")
        shape = self.full.shape
        if self.draft.shape != shape or self.computed.shape[:2] != shape or any(
                table.shape != self.computed.shape for table in self.previews.values()):
            raise ValueError("rollouts: the full, draft, computed and preview tables cover different prompts, seeds "
                             "or steps")

    @classmethod
    def from_records(cls, full: Iterable[FullRollout], cached: Iterable[CachedRollout]) -> dict[float, Rollouts]:
        """One table per calibrated tau; every (prompt, seed) of the full rollouts needs a cached rollout at each
        tau, with the same steps."""
        full_by = {(r.prompt, r.seed): r for r in full}
        cached_by = {(r.tau, r.prompt, r.seed): r for r in cached}
        prompts = sorted({p for p, _ in full_by})
        seeds = sorted({s for _, s in full_by})
        if not full_by or not cached_by:
            raise ValueError("rollouts: give full and cached rollouts of the same prompts and seeds")
        missing = [key for key in itertools.product(prompts, seeds) if key not in full_by]
        if missing:
            raise ValueError(f"rollouts: no full rollout of (prompt, seed) {missing[0]}; record every seed of every "
                             "prompt")
        full_table = np.array([[full_by[p, s].score for s in seeds] for p in prompts])
        full_calls = float(np.mean([r.calls for r in full_by.values()]))
        steps = len(next(iter(cached_by.values())).computed_calls)
        tables = {}
        for tau in sorted({tau for tau, _, _ in cached_by}):
            rows = []
            for p, s in itertools.product(prompts, seeds):
                record = cached_by.get((tau, p, s))
                if record is None or len(record.computed_calls) != steps:
                    raise ValueError(f"rollouts: tau {tau:g} has no cached rollout of {steps} steps for prompt {p} "
                                     f"seed {s}; record one for every full rollout")
                rows.append(record)
            shaped = (len(prompts), len(seeds))
            previews = np.full(shaped + (steps,), np.nan)
            for index, record in enumerate(rows):
                for step, value in record.previews.items():
                    previews[index // len(seeds), index % len(seeds), step - 1] = value
            tables[tau] = cls(full_table, np.array([r.score for r in rows]).reshape(shaped),
                              np.array([r.computed_calls for r in rows]).reshape(shaped + (steps,)),
                              {DRAFT_PREVIEW: previews}, full_calls)
        return tables

    @functools.cached_property
    def spent(self) -> np.ndarray:
        """[prompt, seed, p]: the calls a draft computed before step p (p = 0..T)."""
        return np.concatenate([np.zeros(self.computed.shape[:2] + (1,)), np.cumsum(self.computed, axis=-1)], axis=-1)

    @property
    def steps(self) -> int:
        return self.computed.shape[-1]

    @property
    def seeds(self) -> int:
        return self.full.shape[1]

    def _map(self, select) -> Rollouts:
        return dataclasses.replace(self, full=select(self.full), draft=select(self.draft),
                                   computed=select(self.computed),
                                   previews={kind: select(table) for kind, table in self.previews.items()})

    def subset(self, prompts) -> Rollouts:
        return self._map(lambda table: table[prompts])

    def block(self, seeds: np.ndarray) -> Rollouts:
        """``seeds`` as seeds 0, 1, ..."""
        return self._map(lambda table: table[:, seeds])

    def preview(self, kind: str, step: int) -> np.ndarray | None:
        """[prompt, seed] preview scores at prune ``step``, or None where ``kind`` scored none there."""
        if kind not in self.previews or not 1 <= step < self.steps:
            return None
        scores = self.previews[kind][..., step - 1]
        return None if np.isnan(scores).all() else scores

    def scored_steps(self, kind: str = DRAFT_PREVIEW) -> list[int]:
        """The prune steps where every rollout has a ``kind`` preview."""
        return [step for step in range(1, self.steps) if not np.isnan(self.previews[kind][..., step - 1]).any()]


@dataclasses.dataclass(frozen=True)
class Round:
    """A prune at ``step``: keep the ``keep`` best previews, and with ``margin`` (preview units) every candidate
    within it of the leader too, at most ``cap``."""

    step: int
    keep: int
    margin: float | None = None
    cap: int | None = None

    def kept_mask(self, scores: np.ndarray, alive: np.ndarray) -> np.ndarray:
        """[row, candidate]: which of the ``alive`` candidates this round keeps, per row (ties: the earlier one)."""
        masked = np.where(alive, scores, -np.inf)
        order = np.argsort(-masked, axis=-1, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(scores.shape[-1])[None], axis=-1)
        count = np.full(len(scores), self.keep)
        if self.margin is not None:
            near = (alive & (masked >= masked.max(-1, keepdims=True) - self.margin)).sum(-1)
            count = np.minimum(np.maximum(count, near), self.cap or alive.sum(-1))
        return alive & (rank < count[:, None])

    def kept(self, scores: np.ndarray) -> np.ndarray:
        """The kept candidates' indices, ascending, of one row of ``scores``."""
        return np.flatnonzero(self.kept_mask(scores[None], np.ones((1, len(scores)), dtype=bool))[0])


@dataclasses.dataclass(frozen=True)
class Policy:
    """N seeds, the rounds, the first round's preview kind (the later rounds prune on ``DRAFT_PREVIEW``)."""

    name: str
    width: int
    rounds: tuple[Round, ...]
    preview: str = DRAFT_PREVIEW

    @property
    def schedule(self) -> str:
        """The rounds as a Pruning Plan schedule ("3:8, 12:2"); "" for none."""
        return ", ".join(f"{prune.step}:{prune.keep}" for prune in self.rounds)


@dataclasses.dataclass(frozen=True)
class BlockOutcome:
    """Per prompt of one block of N seeds: the delivered seed, computed exploration calls, the previews scored,
    whether the best full seed survived every round, and how many candidates each round kept ([prompt, round])."""

    winner: np.ndarray
    calls: np.ndarray
    previews: np.ndarray
    survived: np.ndarray
    kept: np.ndarray


def replay_block(rollouts: Rollouts, policy: Policy) -> BlockOutcome:
    """``policy`` on seeds 0..N-1 of every prompt of ``rollouts``."""
    if policy.width > rollouts.seeds:
        raise ValueError(f"width {policy.width}: only {rollouts.seeds} seeds recorded")
    full, draft = rollouts.full[:, :policy.width], rollouts.draft[:, :policy.width]
    alive = np.ones(full.shape, dtype=bool)
    stop = np.full(full.shape, rollouts.steps)
    calls, previews, kept = np.zeros(len(full)), np.zeros(len(full)), []
    for index, prune in enumerate(policy.rounds):
        kind = policy.preview if index == 0 else DRAFT_PREVIEW
        scores = rollouts.preview(kind, prune.step)
        if scores is None or np.isnan(scores[:, :policy.width][alive]).any():
            raise ValueError(f"round at step {prune.step}: no {kind!r} preview recorded there")
        calls += rollouts.preview_calls.get(kind, 0.0) * alive.sum(-1)
        previews += alive.sum(-1)
        survivors = prune.kept_mask(scores[:, :policy.width], alive)
        stop[alive & ~survivors] = prune.step
        alive = survivors
        kept.append(alive.sum(-1))
    calls += np.take_along_axis(rollouts.spent[:, :policy.width], stop[..., None], axis=-1)[..., 0].sum(-1)
    winner = np.argmax(np.where(alive, draft, -np.inf), axis=-1)
    survived = np.take_along_axis(alive, np.argmax(full, axis=-1)[:, None], axis=-1)[:, 0]
    return BlockOutcome(winner, calls, previews, survived, np.array(kept, dtype=int).T.reshape(len(full), -1))


@dataclasses.dataclass(frozen=True)
class Replay:
    """Per prompt, over the seed blocks a width allows (``blocks``): mean delivered full score, mean and worst
    exploration calls, how often the true best survived, the mean previews scored, and the mean and worst cost
    (exploration calls with the previews' call equivalents, ``Rollouts.preview_cost``)."""

    delivered: np.ndarray
    calls: np.ndarray
    worst: np.ndarray
    survived: np.ndarray
    previews: np.ndarray
    cost: np.ndarray
    worst_cost: np.ndarray


def blocks(rollouts: Rollouts, width: int, orders: int = 3) -> list[Rollouts]:
    """Disjoint blocks of ``width`` seeds, in seed order and in ``orders - 1`` fixed shuffles of the seeds (seeds are
    exchangeable, so each block is a draw of N seeds; more draws, less seed noise for a wide N)."""
    count = rollouts.seeds // width
    if count == 0:
        raise ValueError(f"width {width}: only {rollouts.seeds} seeds recorded")
    generator = np.random.default_rng(0)
    shuffles = [np.arange(rollouts.seeds)] + [generator.permutation(rollouts.seeds) for _ in range(orders - 1)]
    return [rollouts.block(order[index * width:(index + 1) * width]) for order in shuffles for index in range(count)]


def _averaged(delivered: np.ndarray, calls: np.ndarray, survived: np.ndarray, previews: np.ndarray,
              preview_cost: float) -> Replay:
    """[block, prompt] outcomes averaged over the blocks."""
    cost = calls + preview_cost * previews
    return Replay(delivered.mean(0), calls.mean(0), calls.max(0), survived.astype(float).mean(0), previews.mean(0),
                  cost.mean(0), cost.max(0))


def _stacked(drawn: list[Rollouts]) -> Rollouts:
    """The blocks as one table: block b's prompts at rows b P .. b P + P - 1."""
    def join(name):
        return np.concatenate([getattr(block, name) for block in drawn])

    return dataclasses.replace(drawn[0], full=join("full"), draft=join("draft"), computed=join("computed"),
                               previews={kind: np.concatenate([block.previews[kind] for block in drawn])
                                         for kind in drawn[0].previews})


def replay_all(rollouts: Rollouts, policies: Iterable[Policy]) -> list[Replay]:
    """Each policy on every block of its width (the blocks of a width stacked once)."""
    stacked, outcomes = {}, []
    prompts = len(rollouts.full)
    for policy in policies:
        if policy.width not in stacked:
            stacked[policy.width] = _stacked(blocks(rollouts, policy.width))
        table = stacked[policy.width]
        outcome = replay_block(table, policy)
        count = len(table.full) // prompts
        delivered = table.full[np.arange(len(table.full)), outcome.winner].reshape(count, prompts)
        outcomes.append(_averaged(delivered, outcome.calls.reshape(count, prompts),
                                  outcome.survived.reshape(count, prompts), outcome.previews.reshape(count, prompts),
                                  rollouts.preview_cost))
    return outcomes


def replay(rollouts: Rollouts, policy: Policy) -> Replay:
    return replay_all(rollouts, [policy])[0]


def full_best_of(rollouts: Rollouts, width: int) -> Replay:
    """Full best-of-``width`` on every block: it delivers its best rollout, for ``width`` full rollouts' calls."""
    best = np.array([block.full.max(axis=1) for block in blocks(rollouts, width)])
    return _averaged(best, np.full(best.shape, width * rollouts.full_calls), np.ones(best.shape),
                     np.zeros(best.shape), rollouts.preview_cost)


def widest_width(rollouts: Rollouts, rounds: tuple[Round, ...], budget: float, kind: str = DRAFT_PREVIEW) -> int:
    """The widest N whose expected exploration cost, at the recorded mean computed calls per step, fits ``budget``:
    N drafts to the first round's step (plus the preview's calls and cost each), each round's keep on to the next
    step (and scored there), the last keep to the end. Fixed keeps only; with every step computed and previews free
    it is ``PrunedBudget``'s rule."""
    computed = rollouts.computed
    if not rounds:
        return int(budget // float(computed.sum(-1).mean()))
    first = rounds[0]
    per_candidate = float(computed[..., :first.step].sum(-1).mean()) + rollouts.preview_calls.get(kind, 0.0) + \
        rollouts.preview_cost
    fixed, reaching = 0.0, first.keep
    for prune, later in itertools.zip_longest(rounds, rounds[1:]):
        end = later.step if later is not None else rollouts.steps
        fixed += reaching * float(computed[..., prune.step:end].sum(-1).mean())
        if later is not None:
            fixed += reaching * (rollouts.preview_calls.get(DRAFT_PREVIEW, 0.0) + rollouts.preview_cost)
        reaching = later.keep if later is not None else reaching
    return int((budget - fixed) // per_candidate)
