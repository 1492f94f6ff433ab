"""Settings of the step cache and the schedule rules that need no cache state (report Sec. 3.1).

Warmup and cooldown windows and the static mode's schedule depend on the step alone; calibration reads the same
windows to know which steps a cache could skip."""

from __future__ import annotations

import dataclasses
import enum


class CacheMode(str, enum.Enum):
    ADAPTIVE = "adaptive"
    STATIC = "static"
    OFF = "off"


@dataclasses.dataclass(frozen=True)
class StepCacheConfig:
    """Settings of the step cache.

    mode: ``adaptive`` (the drift rule), ``static`` (compute every
        ``static_interval``-th step between warmup and cooldown, the
        uniform-schedule baseline) or ``off`` (every call computed).
    tau: skip threshold on the accumulated relative drift. 0.10 gives about
        2x on Wan 2.1 1.3B at 50 steps; larger skips more. Must be >= 0.
    warmup_steps: the first steps of a run that are always computed (K_w).
    cooldown_steps: the last steps of a run that are always computed (K_c).
    static_interval: k of the static mode; 1 computes every step.
    """

    mode: CacheMode = CacheMode.ADAPTIVE
    tau: float = 0.10
    warmup_steps: int = 5
    cooldown_steps: int = 5
    static_interval: int = 2

    def __post_init__(self):
        try:
            object.__setattr__(self, "mode", CacheMode(self.mode))
        except ValueError:
            choices = ", ".join(m.value for m in CacheMode)
            raise ValueError(f"mode: got {self.mode!r}; use one of {choices}") from None
        if not (isinstance(self.tau, (int, float)) and self.tau >= 0 and self.tau == self.tau):
            raise ValueError(f"tau: got {self.tau!r}; use a number >= 0 (0.10 is the default, 0 disables skipping)")
        for name in ("warmup_steps", "cooldown_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}: got {value!r}; use a whole number of steps >= 0 (default 5)")
        if not isinstance(self.static_interval, int) or self.static_interval < 1:
            raise ValueError(
                f"static_interval: got {self.static_interval!r}; use a whole number >= 1 (2 computes every other step)"
            )


def in_always_compute_window(step: int, total_steps: int, config: StepCacheConfig) -> bool:
    """Warmup and cooldown steps are always computed."""
    return step < config.warmup_steps or step >= total_steps - config.cooldown_steps


def static_schedule_skips(step: int, config: StepCacheConfig) -> bool:
    """Static mode computes the first step after warmup and every k-th after it."""
    return (step - config.warmup_steps) % config.static_interval != 0
