"""A calibration's plan and its cost said before it runs: which taus (or ComfyUI cache thresholds), how many seeds and
prompts, the capture target; parsed from the node's inputs and checked here.

Calibrating tau on one's own model, prompts and verifier is the ranking-fidelity protocol of the report's Sec. 4
(tau must be recalibrated per model family, Sec. 4.3: LTX-Video has no tau with 85 % capture): for each of P prompts,
S full rollouts and S cached rollouts per tau on the same seeds are scored by the verifier. The measured tables are
``calibration_results`` (the two-expert ones ``calibration_experts``), their chart ``calibration_chart``, and what
is remembered per setup ``calibration_memory``.
"""

from __future__ import annotations

import dataclasses
import re

from .audit import tau_arm
from .cost_formulas import MEASURED_CACHED_SHARE, rollouts_time, speedup_of
from .records import candidate_seeds
from .step_cache_config import StepCacheConfig, in_always_compute_window

TAU_MAX = 2.0  # the largest tau Apply Cache accepts
OUR_ENGINE = "CachedSearch cache"
# ComfyUI's step caches a calibration also measures, by their reuse_threshold (comfy_extras/nodes_easycache.py),
# and the largest threshold their nodes accept.
EASYCACHE, LAZYCACHE = "EasyCache", "LazyCache"
COMFYUI_ENGINES = (EASYCACHE, LAZYCACHE)
REUSE_THRESHOLD_MAX = 3.0
DEFAULT_TAUS = (0.05, 0.10, 0.15, 0.20, 0.30)
DEFAULT_SEEDS = 4
DEFAULT_CAPTURE_TARGET = 0.90
MIN_SEEDS_FOR_INTERVALS = 3  # two seeds resample to little more than themselves
MIN_PROMPTS_FOR_INTERVALS = 3  # likewise two prompts


def parse_taus(text: str, input_name: str = "taus") -> tuple[float, ...]:
    """Numbers separated by commas or spaces, e.g. "0.05 0.10 0.15" (``input_name``: the input named in errors)."""
    parts = [part for part in re.split(r"[,\s]+", str(text).strip()) if part]
    try:
        return tuple(float(part) for part in parts)
    except ValueError:
        raise ValueError(f"{input_name}: got {text!r}; write numbers separated by spaces or commas, e.g. "
                         f"\"{' '.join(f'{tau:.2f}' for tau in DEFAULT_TAUS)}\"") from None


def prompt_lines(text: str) -> list[str]:
    """The prompts of a calibration on several prompts: one per non-empty line, each once."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        raise ValueError("prompt: empty; with a text encoder on clip, write the prompts to calibrate on, one per line")
    seen = set()  # linear: the canvas asks for the cost of every edit, on the server's event loop
    for line in lines:
        if line in seen:
            raise ValueError(f"prompt: {line!r} is written twice; list each prompt once (a repeated prompt would "
                             "count twice in the pooled table)")
        seen.add(line)
    return lines


def skippable_steps(steps: int, warmup_steps: int, cooldown_steps: int) -> int:
    """How many of a ``steps``-step run's steps the cache may skip: those outside warmup and cooldown
    (``step_cache_config.in_always_compute_window``), less the first step when there is no warmup (nothing is
    computed yet to reuse)."""
    window = StepCacheConfig(warmup_steps=warmup_steps, cooldown_steps=cooldown_steps)
    free = [step for step in range(steps) if not in_always_compute_window(step, steps, window)]
    return len(free) - (1 if free[:1] == [0] else 0)


def cache_window_problem(steps: int, warmup_steps: int, cooldown_steps: int, suffix: str = "",
                         whose: str = "") -> str | None:
    """What is wrong when warmup and cooldown leave no step of a ``steps``-step run (``whose``: which run, e.g.
    " of the high-noise expert") for the cache to skip, naming the inputs (``suffix``: "_high"); None when some
    step is left."""
    if skippable_steps(steps, warmup_steps, cooldown_steps) > 0:
        return None
    edge = max(1, steps // 10)
    fix = (f"lower them, e.g. to {edge} and {edge}" if skippable_steps(steps, edge, edge) else
           "use more steps" if steps < 2 else "lower them, e.g. to 1 and 0")
    return (f"warmup_steps{suffix}, cooldown_steps{suffix}: got {warmup_steps} and {cooldown_steps}, which leave no "
            f"step of the {steps} steps{whose} for the cache to skip (it computes every call, so no tau saves "
            f"anything); {fix}")


@dataclasses.dataclass(frozen=True)
class CalibrationPlan:
    """What a calibration runs.

    taus: the cache thresholds to measure, increasing, each within Apply Cache's range [0, 2].
    seeds: S, the number of seeds (>= 2); seeds first_seed ... first_seed + S - 1 are used.
    capture_target: the share of best-of-S's gain a tau must keep to be recommended, in (0, 1].
    taus_input: the node input the taus come from, named in errors ("taus_high" for a two-expert calibration).
    prompts: P, the number of prompts, each rolled out on every seed and tau (prompt i is the store's prompt i).
    engine: the cache measured: ``OUR_ENGINE`` (its taus), or one of ``COMFYUI_ENGINES`` (``taus`` are then its
    reuse_threshold values, within its node's range [0, 3]).
    """

    taus: tuple[float, ...] = DEFAULT_TAUS
    seeds: int = DEFAULT_SEEDS
    first_seed: int = 0
    capture_target: float = DEFAULT_CAPTURE_TARGET
    taus_input: str = "taus"
    prompts: int = 1
    engine: str = OUR_ENGINE

    def __post_init__(self):
        taus = tuple(self.taus)
        object.__setattr__(self, "taus", taus)
        written = " ".join(f"{tau:g}" for tau in taus)
        if self.engine not in (OUR_ENGINE, *COMFYUI_ENGINES):
            raise ValueError(f"engine: got {self.engine!r}; use {OUR_ENGINE!r} or one of {', '.join(COMFYUI_ENGINES)}")
        name, highest, node = ((self.threshold_name, TAU_MAX, "Apply Cache") if self.engine == OUR_ENGINE else
                               (self.threshold_name, REUSE_THRESHOLD_MAX, self.engine))
        if not taus:
            raise ValueError(f"{self.taus_input}: the list is empty; give at least one {name}, e.g. "
                             "\"0.05 0.10 0.15 0.20 0.30\"")
        outside = [tau for tau in taus if not (isinstance(tau, (int, float)) and 0.0 <= tau <= highest)]
        if outside:
            raise ValueError(f"{self.taus_input}: {outside[0]!r} in \"{written}\" is outside {node}'s range 0 "
                             f"to {highest:g}; use values in that range")
        if any(later <= earlier for earlier, later in zip(taus, taus[1:])):
            raise ValueError(f"{self.taus_input}: got \"{written}\", which is not strictly increasing; list each "
                             f"{name} once, smallest first (\"{' '.join(f'{tau:g}' for tau in sorted(set(taus)))}\")")
        if not isinstance(self.seeds, int) or self.seeds < 2:
            raise ValueError(f"seeds: got {self.seeds!r}; a ranking needs at least 2 seeds (4 is the default, 8 "
                             "gives narrower intervals)")
        candidate_seeds(self.first_seed, self.seeds)
        if not isinstance(self.prompts, int) or self.prompts < 1:
            raise ValueError(f"prompt: got {self.prompts!r} prompts; write at least one")
        if not (isinstance(self.capture_target, (int, float)) and 0.0 < self.capture_target <= 1.0):
            raise ValueError(f"capture_target: got {self.capture_target!r}; use a share above 0 and at most 1 "
                             "(0.90 keeps 90 % of the search's gain)")

    @property
    def seed_list(self) -> list[int]:
        return candidate_seeds(self.first_seed, self.seeds)

    @property
    def prompt_list(self) -> list[int]:
        return list(range(self.prompts))

    @property
    def threshold_name(self) -> str:
        """What the engine's thresholds are called on its node."""
        return "tau" if self.engine == OUR_ENGINE else "reuse_threshold"

    def arm(self, threshold: float) -> str:
        """The store's name of this engine's arm at ``threshold``."""
        return tau_arm(threshold) if self.engine == OUR_ENGINE else f"{self.engine} reuse_threshold {threshold:g}"

    def for_engine(self, engine: str, thresholds, thresholds_input: str) -> CalibrationPlan:
        """The same prompts, seeds and target for another engine's thresholds (its list from ``thresholds_input``)."""
        return dataclasses.replace(self, taus=tuple(thresholds), taus_input=thresholds_input, engine=engine)

    @property
    def rollouts(self) -> int:
        return self.prompts * self.seeds * (1 + len(self.taus))

    @property
    def has_intervals(self) -> bool:
        """Whether the table's bootstrap (over prompts, or over seeds with one prompt) means anything."""
        return (self.seeds >= MIN_SEEDS_FOR_INTERVALS if self.prompts == 1 else
                self.prompts >= MIN_PROMPTS_FOR_INTERVALS)

    @property
    def thresholds_label(self) -> str:
        """How many thresholds of which engine, e.g. "5 taus", "1 tau" or "3 EasyCache reuse_thresholds"."""
        engine = "" if self.engine == OUR_ENGINE else f"{self.engine} "
        return counted(len(self.taus), f"{engine}{self.threshold_name}")

    def cost(self, steps: int) -> str:
        """What the calibration costs, said before it runs."""
        return sweep_cost([self], steps)


def counted(count: int, noun: str) -> str:
    """ "1 tau", "5 taus": ``count`` of ``noun``, plural unless one."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def sweep_cost(plans: list[CalibrationPlan], steps: int) -> str:
    """What a calibration of several engines' thresholds on the same full rollouts costs (``plans`` share their
    prompts and seeds), said before it runs."""
    return sweep_rollouts(plans).text(steps)


def sweep_rollouts(plans: list[CalibrationPlan]) -> RolloutCount:
    """The rollouts of a calibration of several engines' thresholds on the same full rollouts (``plans`` share
    their prompts and seeds)."""
    first = plans[0]
    labels = [plan.thresholds_label for plan in plans]
    per_prompt = (f"{first.seeds} full rollouts + {first.seeds} cached rollouts x "
                  f"{labels[0] if len(labels) == 1 else '(' + ' + '.join(labels) + ')'}")
    full_rollouts = first.prompts * first.seeds
    return RolloutCount(per_prompts(per_prompt, first.prompts),
                        full_rollouts * (1 + sum(len(plan.taus) for plan in plans)), full_rollouts)


@dataclasses.dataclass(frozen=True)
class RolloutCount:
    """A calibration's cost before it runs, the one formula behind its report and the node's line on the canvas.

    breakdown: how the rollouts add up, e.g. "4 full rollouts + 4 cached rollouts x 5 taus".
    rollouts: every rollout (at most, when ``at_most``: the two-expert picks together run only when both pick a tau).
    full_rollouts: those at full compute; each costs one full-rollout time, a cached one less.
    cached_share: a cached rollout's time over a full one's (the cost model's measured figure unless given).
    """

    breakdown: str
    rollouts: int
    full_rollouts: int
    at_most: bool = False
    cached_share: float = MEASURED_CACHED_SHARE

    @property
    def full_rollout_times(self) -> float:
        """About how many full rollouts' time it takes (``cost_formulas.rollouts_time``)."""
        return rollouts_time(self.full_rollouts, self.rollouts - self.full_rollouts, self.cached_share)

    @property
    def speedup(self) -> str:
        return f"{speedup_of(self.cached_share):g}x cache speed-up"

    def text(self, steps: int) -> str:
        """The report's cost line."""
        return (f"{self.breakdown} = {self.rollouts} rollouts{' at most' if self.at_most else ''} "
                f"({self.rollouts * steps} sampler steps; at most {self.rollouts} full-rollout times, about "
                f"{self.full_rollout_times:g} at a {self.speedup}), each decoded and scored by the verifier")

    def line(self) -> str:
        """The node's line on the canvas, before it runs."""
        return (f"Cost: {self.rollouts} rollouts{' at most' if self.at_most else ''} = {self.breakdown}; about "
                f"{self.full_rollout_times:g} full-rollout times at a {self.speedup} (at most {self.rollouts}), "
                "each decoded and scored.")

    def as_dict(self) -> dict:
        return {"breakdown": self.breakdown, "rollouts": self.rollouts, "full_rollouts": self.full_rollouts,
                "full_rollout_times": self.full_rollout_times, "at_most": self.at_most, "line": self.line()}


def per_prompts(per_prompt: str, prompts: int) -> str:
    """A cost breakdown of one prompt, said for ``prompts`` prompts."""
    return per_prompt if prompts == 1 else f"{prompts} prompts x ({per_prompt})"
