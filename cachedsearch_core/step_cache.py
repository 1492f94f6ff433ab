"""Adaptive transformation-vector step cache (report Sec. 3.1).

Every transformer call ``v = F(x)`` is wrapped. Per guidance branch the cache
keeps ``x_ref`` (input of the last computed call), ``delta = F(x_ref) - x_ref``
and an accumulator ``a``. Outside warmup and cooldown, ``a`` grows by the
relative drift ``||x - x_ref|| / ||x_ref||``; while ``a <= tau`` the call is
skipped and ``x + delta`` returned, otherwise ``F(x)`` is computed and the
branch re-anchored.

A transformer that denoises several latents at once (LTX-2: video and
audio) takes and returns a list of parts. Each part of each branch keeps its
own ``x_ref``, ``delta`` and accumulator; the call still runs or is skipped as
a whole, so it skips only when every part of every branch may skip.

This module is framework-free: it wraps any callable and knows nothing of
ComfyUI. The adapter in ``nodes/`` maps ComfyUI's model calls onto
:meth:`TransformationVectorCache.__call__`. The settings and the step-only
rules live in ``step_cache_config``, a run's counts in ``cache_statistics``.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Callable, Hashable, Sequence

import torch

from .cache_statistics import CacheStatistics
from .step_cache_config import CacheMode, StepCacheConfig, in_always_compute_window, static_schedule_skips

BranchKey = tuple[str, Hashable]
"""(label, identity) of one guidance branch, e.g. ("uncond", (<uuid>, <device>)).

The identity must tell apart everything whose state may not mix: branches of
one conditioning computed on different devices get different identities."""

Latent = torch.Tensor | Sequence[torch.Tensor]
"""A transformer's latent input or output: one tensor, or a list of parts (LTX-2's [video, audio])."""


def step_of_sigma(ascending_sigmas: Sequence[float], sigma: float) -> int:
    """Step of a sampling run over a schedule (its sigmas sorted rising) whose interval [sigma_{i+1}, sigma_i]
    holds ``sigma``.

    Samplers that evaluate the model between two schedule sigmas (heun,
    dpmpp_2s) get the index of the step they are in, so warmup, cooldown
    and the statistics count steps, not calls (and Calibrate's previews, ``nodes/previews.py``).
    """
    sigmas_at_or_above = len(ascending_sigmas) - bisect.bisect_left(ascending_sigmas, sigma)
    return min(max(sigmas_at_or_above - 1, 0), len(ascending_sigmas) - 2)


def latent_parts(x: Latent) -> tuple[torch.Tensor, ...]:
    return (x,) if isinstance(x, torch.Tensor) else tuple(x)


def part_key(branch_key: BranchKey, part: int, parts: int) -> BranchKey:
    """The state key of one part of one branch: the branch's own key when the latent is one tensor."""
    label, identity = branch_key
    return branch_key if parts == 1 else (label, (identity, f"part {part}"))


@dataclasses.dataclass
class BranchState:
    """Cache state of one guidance branch: two latent-sized tensors and a scalar."""

    x_ref: torch.Tensor | None = None
    x_ref_norm: torch.Tensor | None = None
    delta: torch.Tensor | None = None
    accumulated: float = 0.0

    def reset(self) -> None:
        self.x_ref = self.x_ref_norm = self.delta = None
        self.accumulated = 0.0

    def anchor(self, x: torch.Tensor, output: torch.Tensor) -> None:
        # Keep a private copy: the caller may reuse or modify its input buffer.
        self.x_ref = x.detach().clone()
        self.x_ref_norm = torch.linalg.vector_norm(self.x_ref.float()).clamp_min(torch.finfo(torch.float32).tiny)
        self.delta = output.detach() - x
        self.accumulated = 0.0

    def relative_drift(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vector_norm((x - self.x_ref).float()) / self.x_ref_norm

    def __repr__(self) -> str:
        shape = None if self.x_ref is None else tuple(self.x_ref.shape)
        return f"BranchState(anchored={shape is not None}, shape={shape}, accumulated={self.accumulated:.4f})"


@dataclasses.dataclass
class _CallPlan:
    """What the cache decided for one call before the transformer runs (or instead of it).

    ``states``, ``chunks`` and ``skipping_accumulators`` run over the parts of the latent and, within each part,
    over the branches (for a one-tensor latent: one entry per branch)."""

    step: int
    labels: list[str]
    states: list[BranchState] | None = None  # None: nothing to anchor (mode off, inactive cache)
    chunks: tuple[torch.Tensor, ...] | None = None
    cached_output: Latent | None = None
    # Per part of each branch, the accumulator it would take if it skipped alone (None: it must compute).
    skipping_accumulators: list[float | None] = dataclasses.field(default_factory=list)

    @property
    def skips_forgone(self) -> int:
        """Branches every part of which may skip, computed with one that may not."""
        branches = len(self.labels)
        return sum(all(value is not None for value in self.skipping_accumulators[branch::branches])
                   for branch in range(branches)) if self.skipping_accumulators else 0


class TransformationVectorCache:
    """The cache for one sampling run over a fixed sigma schedule.

    Create one per run (the ComfyUI adapter does so in its outer-sample
    wrapper) and call it in place of each transformer call. Calls may come
    from several threads (one per device): branch states are keyed by the
    caller and the shared bookkeeping is locked.

    A run that is one part of a longer trajectory (a search paused at a prune
    step) passes ``steps_before`` (steps run before it) and
    ``trajectory_steps``: warmup, cooldown and the static schedule then count
    in the whole trajectory, as if it had not been paused.
    """

    def __init__(self, config: StepCacheConfig, sample_sigmas: Sequence[float], steps_before: int = 0,
                 trajectory_steps: int | None = None):
        if len(sample_sigmas) < 2:
            raise ValueError(f"sample_sigmas: got {len(sample_sigmas)} values; a run needs at least 2 (one step)")
        self.config = config
        self.total_steps = len(sample_sigmas) - 1
        self.steps_before = steps_before
        self.trajectory_steps = self.total_steps if trajectory_steps is None else trajectory_steps
        # Ascending copy for bisect; the schedule itself descends.
        self._ascending_sigmas = sorted(float(s) for s in sample_sigmas)
        self.branches: dict[BranchKey, BranchState] = {}
        self.statistics = CacheStatistics(total_steps=self.total_steps)
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            for state in self.branches.values():
                state.reset()
            self.branches.clear()
            self.statistics = CacheStatistics(total_steps=self.total_steps)

    def deactivate(self, reason: str) -> bool:
        """Compute every further call of this run; True for the first reason given (the one reported)."""
        with self._lock:
            if self.statistics.inactive_reason is not None:
                return False
            self.statistics.inactive_reason = reason
            return True

    @property
    def active(self) -> bool:
        return self.statistics.inactive_reason is None

    @torch.compiler.disable(recursive=False)
    def compute_uncached(self, compute: Callable[[], torch.Tensor], sigma: float | torch.Tensor,
                         labels: Sequence[str]) -> torch.Tensor:
        """Run ``compute()`` and count it as a computed call (mode off, or an inactive cache)."""
        self._count_uncached(sigma, labels)
        return compute()

    @torch.compiler.disable
    def _count_uncached(self, sigma: float | torch.Tensor, labels: Sequence[str]) -> None:
        self._record(self.step_index(float(sigma)), labels, computed=True)

    def _record(self, step: int, labels: Sequence[str], computed: bool, skips_forgone: int = 0) -> None:
        with self._lock:
            self.statistics.record(step, labels, computed)
            if skips_forgone:
                self.statistics.calls_disagreeing += 1
                self.statistics.branch_skips_forgone += skips_forgone

    def _states(self, branch_keys: Sequence[BranchKey]) -> list[BranchState]:
        with self._lock:
            return [self.branches.setdefault(key, BranchState()) for key in branch_keys]

    def step_index(self, sigma: float) -> int:
        return step_of_sigma(self._ascending_sigmas, sigma)

    # Under torch.compile the decisions below run eagerly (dynamo would bake Python state such as the
    # accumulators into guarded graphs and recompile for each value); ``compute`` is still compiled.
    @torch.compiler.disable(recursive=False)
    def __call__(
        self,
        compute: Callable[[], Latent],
        x: Latent,
        sigma: float | torch.Tensor,
        branch_keys: Sequence[BranchKey],
    ) -> Latent:
        """Return ``compute()`` or its cached approximation for input ``x``.

        ``x`` (a tensor, or a list of parts: one per latent the transformer
        denoises together) holds one equal-sized chunk per entry of
        ``branch_keys`` on the batch axis of each part, in that order, and has
        the shape of ``compute()``'s output, part for part. ``sigma`` may be a
        one-element tensor on the model's device: it is read in the same host
        sync as the drifts.
        """
        plan = self._plan(x, sigma, branch_keys)
        if plan.cached_output is not None:
            return plan.cached_output
        output = compute()
        self._after_compute(plan, x, output)
        return output

    @torch.compiler.disable
    def _plan(self, x: torch.Tensor, sigma: float | torch.Tensor, branch_keys: Sequence[BranchKey]) -> _CallPlan:
        labels = [key[0] for key in branch_keys]
        if self.config.mode is CacheMode.OFF or not self.active:
            return _CallPlan(self.step_index(float(sigma)), labels)
        parts = latent_parts(x)
        states = self._states([part_key(key, part, len(parts)) for part in range(len(parts)) for key in branch_keys])
        chunks = tuple(chunk for latent in parts for chunk in latent.chunk(len(branch_keys)))
        anchored = [s.delta is not None and s.delta.shape == c.shape for s, c in zip(states, chunks)]
        drifts: list[float | None] = [None] * len(states)
        if any(anchored) and self.config.mode is CacheMode.ADAPTIVE:
            # One host sync per call: the sigma (for the step index) and every anchored branch's drift together.
            drift_tensor = torch.stack([state.relative_drift(chunk)
                                        for state, chunk, ready in zip(states, chunks, anchored) if ready])
            if isinstance(sigma, torch.Tensor):
                # float64 holds the sigma exactly, so it matches the schedule read with tolist()
                packed = torch.cat([sigma.reshape(1).to(drift_tensor.device, torch.float64), drift_tensor.double()])
                sigma, *values = packed.tolist()
            else:
                values = drift_tensor.tolist()
            anchored_drifts = iter(values)
            drifts = [next(anchored_drifts) if ready else None for ready in anchored]
        step = self.step_index(float(sigma))
        accumulators = [self._skipping_accumulator(step, state, drift) if ready else None
                        for state, drift, ready in zip(states, drifts, anchored)]
        # Branches batched in one call, and the parts of a latent, are computed together: skip only if every one may.
        if all(value is not None for value in accumulators):
            for state, value in zip(states, accumulators):
                state.accumulated = value
            self._record(step, labels, computed=False)
            branches = len(branch_keys)
            cached = [torch.cat([chunk + state.delta for chunk, state in
                                 zip(chunks[start:start + branches], states[start:start + branches])])
                      for start in range(0, len(chunks), branches)]
            return _CallPlan(step, labels, cached_output=cached[0] if isinstance(x, torch.Tensor) else cached)
        return _CallPlan(step, labels, states, chunks, skipping_accumulators=accumulators)

    @torch.compiler.disable
    def _after_compute(self, plan: _CallPlan, x: Latent, output: Latent) -> None:
        self._record(plan.step, plan.labels, computed=True, skips_forgone=plan.skips_forgone)
        if plan.states is None:
            return
        if _shapes(output) != _shapes(x):
            self.deactivate(f"the transformer's output {_shapes(output)} does not have the shape of its latent input "
                            f"{_shapes(x)}")
            return
        out_chunks = [chunk for latent in latent_parts(output) for chunk in latent.chunk(len(plan.labels))]
        for chunk, out_chunk, state in zip(plan.chunks, out_chunks, plan.states):
            state.anchor(chunk, out_chunk)

    def _skipping_accumulator(self, step: int, state: BranchState, drift: float | None) -> float | None:
        """The skip rule of the report's Sec. 3.1 for one anchored branch: the accumulator it takes if it may skip
        this call, None if it must compute."""
        config = self.config
        position = self.steps_before + step
        if in_always_compute_window(position, self.trajectory_steps, config):
            return None
        if config.mode is CacheMode.STATIC:
            return state.accumulated if static_schedule_skips(position, config) else None
        accumulated = state.accumulated + drift
        return accumulated if accumulated <= config.tau else None

    def __repr__(self) -> str:
        return (
            f"TransformationVectorCache(mode={self.config.mode.value}, tau={self.config.tau}, "
            f"steps={self.total_steps}, branches={len(self.branches)})"
        )


def _shapes(latent) -> tuple | str:
    """A latent's shape, or its parts' shapes; the type's name for anything else."""
    if isinstance(latent, torch.Tensor):
        return tuple(latent.shape)
    if isinstance(latent, (list, tuple)) and all(isinstance(part, torch.Tensor) for part in latent):
        return tuple(tuple(part.shape) for part in latent)
    return type(latent).__name__
