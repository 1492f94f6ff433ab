"""Calibrating tau on one's own model, prompts and verifier: the ranking-fidelity protocol of the report's Sec. 4
(tau must be recalibrated per model family, Sec. 4.3: LTX-Video has no tau with 85 % capture).

For each of P prompts, S full rollouts and S cached rollouts per tau on the same seeds are scored by the verifier;
per tau the audit's metrics pooled over the prompts (``audit.evaluate_arms``: one code path for the GUI's table and
bench/audit.py's numbers) with intervals from a bootstrap over the prompts (over the S seeds with one prompt), and
the recommendation of the audit's tau* rule (the largest tau whose capture
meets the target; 0, the cache off, when none does). Results are remembered per setup (model file, steps, sampler,
scheduler) in a small JSON file.

A two-expert model (Wan 2.2 A14B) is calibrated one expert at a time on the same full rollouts: each expert's taus
with the other expert at full compute, each expert recommended by the same rule, then both picks together once, so
the table also shows what the search will actually run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import re

import numpy as np

from .audit import FULL_ARM, ArmResult, ScoreStore, evaluate_arms, recommend_tau, tau_arm
from .safe_files import set_aside, write_atomically
from .search import candidate_seeds

TAU_MAX = 2.0  # the largest tau Apply Cache accepts
OUR_ENGINE = "CachedSearch cache"
# ComfyUI's step caches a calibration also measures, by their reuse_threshold (comfy_extras/nodes_easycache.py),
# and the largest threshold their nodes accept.
COMFYUI_ENGINES = ("EasyCache", "LazyCache")
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
        """How many thresholds of which engine, e.g. "5 taus" or "3 EasyCache reuse_thresholds"."""
        engine = "" if self.engine == OUR_ENGINE else f"{self.engine} "
        return f"{len(self.taus)} {engine}{self.threshold_name}s"

    def cost(self, steps: int) -> str:
        """What the calibration costs, said before it runs."""
        return sweep_cost([self], steps)


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
    return RolloutCount(_per_prompts(per_prompt, first.prompts),
                        full_rollouts * (1 + sum(len(plan.taus) for plan in plans)), full_rollouts)


@dataclasses.dataclass(frozen=True)
class RolloutCount:
    """A calibration's cost before it runs, the one formula behind its report and the node's line on the canvas.

    breakdown: how the rollouts add up, e.g. "4 full rollouts + 4 cached rollouts x 5 taus".
    rollouts: every rollout (at most, when ``at_most``: the two-expert picks together run only when both pick a tau).
    full_rollouts: those at full compute; each costs one full-rollout time, a cached one less (at the ~2x speed-up
    of a good tau, half).
    """

    breakdown: str
    rollouts: int
    full_rollouts: int
    at_most: bool = False

    @property
    def full_rollout_times(self) -> float:
        """About how many full rollouts' time it takes at a 2x cache speed-up."""
        return self.full_rollouts + (self.rollouts - self.full_rollouts) / 2

    def text(self, steps: int) -> str:
        """The report's cost line."""
        return (f"{self.breakdown} = {self.rollouts} rollouts{' at most' if self.at_most else ''} "
                f"({self.rollouts * steps} sampler steps; at most {self.rollouts} full-rollout times, about "
                f"{self.full_rollout_times:g} at a 2x cache speed-up), each decoded and scored by the verifier")

    def line(self) -> str:
        """The node's line on the canvas, before it runs."""
        return (f"Cost: {self.rollouts} rollouts{' at most' if self.at_most else ''} = {self.breakdown}; about "
                f"{self.full_rollout_times:g} full-rollout times at a 2x cache speed-up (at most {self.rollouts}), "
                "each decoded and scored.")

    def as_dict(self) -> dict:
        return {"breakdown": self.breakdown, "rollouts": self.rollouts, "full_rollouts": self.full_rollouts,
                "full_rollout_times": self.full_rollout_times, "at_most": self.at_most, "line": self.line()}


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The measured table of one calibration and its recommendation (0.0: leave the cache off)."""

    plan: CalibrationPlan
    results: tuple[ArmResult, ...]
    recommended: ArmResult | None  # the audit's tau* rule's pick; None when no tau meets the target
    full_seconds: float  # mean seconds of a full rollout

    @classmethod
    def from_store(cls, store: ScoreStore, plan: CalibrationPlan, prompts: list[int] | None = None,
                   bootstrap: int = 2000, arm_prefix: str = "") -> Calibration:
        """The table of ``store``'s full and tau rollouts of ``prompts`` (default the plan's 0 ... P - 1) on the
        plan's seeds, pooled over the prompts as the audit pools them (the tau arms named ``arm_prefix +
        tau_arm(tau)``: one expert's arms of a two-expert calibration)."""
        seeds, prompts = plan.seed_list, plan.prompt_list if prompts is None else list(prompts)
        results = evaluate_arms(store, {arm_prefix + plan.arm(tau): tau for tau in plan.taus}, prompts, seeds,
                                bootstrap)
        tau = recommend_tau(results, plan.capture_target)
        picked = next((result for result in results if result.tau == tau), None) if tau is not None else None
        full_seconds = float(store.table(FULL_ARM, prompts, seeds, "seconds").mean())
        return cls(plan, tuple(results), picked, full_seconds)

    @property
    def recommended_tau(self) -> float:
        """The tau to use; 0 (Apply Cache then never skips) when none meets the target."""
        return self.recommended.tau if self.recommended is not None else 0.0

    @property
    def has_intervals(self) -> bool:
        return self.plan.has_intervals

    def rows(self) -> list[dict]:
        """One JSON-ready row per tau (the panel's table); speed-ups in transformer calls and in seconds."""
        return [self.row(result) for result in self.results]

    def row(self, result: ArmResult) -> dict:
        fidelity = result.fidelity
        row = {"tau": result.tau, "skipped": float(result.skipped_share), "call_speedup": float(result.call_speedup),
               "calls": result.calls, "computed_calls": result.computed_calls, "speedup": float(result.speedup),
               "meets_target": bool(fidelity.capture_of_means.value >= self.plan.capture_target),
               "recommended": result is self.recommended}
        for name, interval in (("rho", fidelity.rho), ("top1", fidelity.top1),
                               ("capture", fidelity.capture_of_means), ("regret", fidelity.regret)):
            row[name] = [_json_number(interval.value), *((_json_number(interval.low), _json_number(interval.high))
                                                         if self.has_intervals else ())]
        return row

    def memory_entry(self) -> dict:
        """What the memory keeps of this calibration."""
        picked = self.recommended
        return {"tau": self.recommended_tau,
                "capture": picked.fidelity.capture_of_means.value if picked is not None else None,
                "capture_target": self.plan.capture_target, "seeds": self.plan.seeds, "prompts": self.plan.prompts,
                "taus": list(self.plan.taus)}

    def report(self, subject: str | None = None) -> str:
        plan = self.plan
        subject = subject or ("this model and prompt" if plan.prompts == 1 else "this model and these prompts")
        name = plan.threshold_name
        lines = [f"| {name} | skipped calls | speed-up (calls) | speed-up (s) | rho | top-1 | capture | regret |",
                 "|---|---|---|---|---|---|---|---|"]
        for result in self.results:
            lines.append(self.table_line(f"{result.tau:g}{' *' if result is self.recommended else ''}", result))
        target = f"{100 * plan.capture_target:.0f} %"
        engine = "" if plan.engine == OUR_ENGINE else f"{plan.engine} "
        if self.recommended is not None:
            capture = self.recommended.fidelity.capture_of_means.value
            verdict = (f"Recommended {engine}{name}: {self.recommended_tau:g} (the largest {name} whose capture meets "
                       f"{target}: {100 * capture:.1f} %, {self.recommended.call_speedup:.2f}x fewer transformer "
                       "calls).")
        else:
            verdict = (f"Recommended {engine}{name}: 0. No measured {name} keeps {target} of best-of-{plan.seeds}'s "
                       f"gain: leave {plan.engine if engine else 'the cache'} off for {subject} (or measure smaller "
                       "values).")
        return "\n".join([*lines, "", verdict, self.pooling(), self.spread()])

    def pooling(self) -> str:
        """What each figure of the table rests on."""
        plan = self.plan
        if plan.prompts == 1:
            return f"Each figure rests on 1 prompt x {plan.seeds} seeds."
        return (f"Each figure rests on {plan.prompts} prompts x {plan.seeds} seeds, pooled as the audit pools them: "
                "capture is the ratio of the prompts' mean gains, rho the median of the prompts' rho, top-1 the share "
                "of prompts whose winner is kept, regret the mean over prompts.")

    def spread(self) -> str:
        """What the intervals resample, or why there are none."""
        plan = self.plan
        if plan.prompts > 1:
            return (f"Intervals: 95 % bootstrap over the {plan.prompts} prompts (how much the answer moves with the "
                    "choice of prompts); about 25 prompts of the kinds you make give a recommendation for the model "
                    "family." if self.has_intervals else
                    f"No intervals: {plan.prompts} prompts cannot be resampled meaningfully; use 3 or more.")
        return (f"Intervals: 95 % bootstrap over the {plan.seeds} seeds. With few seeds they are wide (at S = 4 a "
                "top-1 interval is usually [0, 1] and capture's spans tens of points); more seeds, or several "
                "prompts, narrow them." if self.has_intervals else
                f"No intervals: {plan.seeds} seeds cannot be resampled meaningfully; use 3 or more.")

    def table_line(self, label: str, result: ArmResult) -> str:
        """One row of the report's table for ``result`` (an arm of this calibration's seeds), labelled ``label``."""
        fidelity = result.fidelity
        return (f"| {label} | {100 * result.skipped_share:.0f} % | {result.call_speedup:.2f}x | {result.speedup:.2f}x "
                f"| {self._interval(fidelity.rho)} | {self._interval(fidelity.top1)} "
                f"| {self._interval(fidelity.capture_of_means)} | {self._interval(fidelity.regret)} |")

    def _interval(self, interval) -> str:
        if not math.isfinite(interval.value):
            return "-"
        if not self.has_intervals or not math.isfinite(interval.low):
            return f"{interval.value:.3f}"
        return f"{interval.value:.3f} [{interval.low:.3f}, {interval.high:.3f}]"

    def chart(self, width: int = 640, height: int = 400, label: str = "") -> np.ndarray:
        """Capture and speed-up (transformer calls) against tau, the capture target dashed, the pick circled: an
        RGB image [height, width, 3] of uint8; ``label`` begins the title (e.g. "high-noise expert: "). Its text is
        large and its ticks few, so it reads on a Preview Image at 100 % zoom (the node shows it about half size)."""
        from PIL import Image, ImageDraw, ImageFont

        image = Image.new("RGB", (width, height), "white")
        draw = ImageDraw.Draw(image)
        font = ImageFont.load_default(size=22)
        left, right, top, bottom = 64, width - 64, 72, height - 56
        taus = [r.tau for r in self.results]
        captures = [r.fidelity.capture_of_means.value for r in self.results]
        speedups = [r.call_speedup for r in self.results]
        tau_low, tau_high = min(taus), max(taus)
        span = tau_high - tau_low or 1.0
        finite_captures = [c for c in captures if math.isfinite(c)]
        capture_low = min([0.0, *finite_captures])
        capture_high = max([1.0, *finite_captures])
        speed_high = max(2.0, *[s for s in speedups if math.isfinite(s)])

        def x(tau):
            return left + (tau - tau_low) / span * (right - left) if len(taus) > 1 else (left + right) / 2

        def y_capture(value):
            return bottom - (value - capture_low) / (capture_high - capture_low) * (bottom - top)

        def y_speed(value):
            return bottom - (value - 1.0) / (speed_high - 1.0) * (bottom - top)

        capture_colour, speed_colour, target_colour = (40, 120, 200), (220, 110, 30), (90, 90, 90)
        draw.rectangle([left, top, right, bottom], outline=(0, 0, 0))
        labelled_until = -math.inf  # a tau label too close to the previous one is left out (its tick stays)
        for tau in taus:
            draw.line([x(tau), bottom, x(tau), bottom + 5], fill=(0, 0, 0))
            text = f"{tau:g}"
            text_width = draw.textlength(text, font=font)
            if x(tau) - text_width / 2 > labelled_until + 6:
                draw.text((x(tau) - text_width / 2, bottom + 7), text, fill=(0, 0, 0), font=font)
                labelled_until = x(tau) + text_width / 2
        for tick in (0.0, 0.5, 1.0):
            if capture_low <= tick <= capture_high:
                draw.text((left - 8, y_capture(tick)), f"{tick:.0%}", fill=capture_colour, font=font, anchor="rm")
        for tick in (1.0, speed_high):
            draw.text((right + 8, y_speed(tick)), f"{tick:.1f}x", fill=speed_colour, font=font, anchor="lm")
        target_y = y_capture(self.plan.capture_target)
        for start in range(left, right, 12):
            draw.line([start, target_y, min(start + 6, right), target_y], fill=target_colour, width=2)
        target = f"target {self.plan.capture_target:.0%}"
        box = draw.textbbox((right - 6, target_y + 5), target, font=font, anchor="ra")
        draw.rectangle([box[0] - 3, box[1] - 2, box[2] + 3, box[3] + 2], fill="white")
        draw.text((right - 6, target_y + 5), target, fill=target_colour, font=font, anchor="ra")
        for values, scale, colour in ((captures, y_capture, capture_colour), (speedups, y_speed, speed_colour)):
            points = [(x(tau), scale(value)) for tau, value in zip(taus, values) if math.isfinite(value)]
            if len(points) > 1:
                draw.line(points, fill=colour, width=3)
            for px, py in points:
                draw.ellipse([px - 4, py - 4, px + 4, py + 4], fill=colour)
        picked = self.recommended
        if picked is not None and math.isfinite(picked.fidelity.capture_of_means.value):
            px, py = x(picked.tau), y_capture(picked.fidelity.capture_of_means.value)
            draw.ellipse([px - 10, py - 10, px + 10, py + 10], outline=(200, 30, 30), width=3)
        name = self.plan.threshold_name
        title = label + (f"recommended {name} {self.recommended_tau:g}" if picked is not None else
                         f"no {name} meets the target: cache off")
        size = 26
        while size > 14 and draw.textlength(title, font=ImageFont.load_default(size=size)) > width - 16:
            size -= 2  # a long engine name and verdict still fit on one line
        draw.text((8, 6), title, fill=(0, 0, 0), font=ImageFont.load_default(size=size))
        legend_x = 8
        for text, colour in (("capture", capture_colour), ("speed-up in calls", speed_colour),
                             ("the pick", (200, 30, 30))):
            draw.line([legend_x, 50, legend_x + 18, 50], fill=colour, width=3)
            draw.text((legend_x + 24, 50), text, fill=colour, font=font, anchor="lm")
            legend_x += 24 + draw.textlength(text, font=font) + 24
        draw.text(((left + right) / 2, height - 6), name, fill=(0, 0, 0), font=font, anchor="mb")
        return np.array(image, dtype=np.uint8)


@dataclasses.dataclass(frozen=True)
class EnginesCalibration:
    """One table per cache engine (ours first, then ComfyUI's EasyCache or LazyCache), all on the same full
    rollouts, and the engine and threshold that keep the target at the fewest computed transformer calls: the
    report's frontier of cache engines, measured on one's own model."""

    calibrations: tuple[Calibration, ...]

    @classmethod
    def from_store(cls, store: ScoreStore, plans: list[CalibrationPlan], bootstrap: int = 2000) -> EnginesCalibration:
        return cls(tuple(Calibration.from_store(store, plan, bootstrap=bootstrap) for plan in plans))

    @property
    def ours(self) -> Calibration:
        return self.calibrations[0]

    @property
    def plan(self) -> CalibrationPlan:
        return self.ours.plan

    @property
    def recommended_tau(self) -> float:
        return self.ours.recommended_tau

    @property
    def full_seconds(self) -> float:
        return self.ours.full_seconds

    def threshold(self, engine: str) -> float:
        """``engine``'s recommended threshold; 0 (its cache off) when none meets the target or it was not measured."""
        return next((calibration.recommended_tau for calibration in self.calibrations
                     if calibration.plan.engine == engine), 0.0)

    @property
    def fastest(self) -> Calibration | None:
        """The engine whose recommendation computes the fewest transformer calls; None when no engine meets the
        target."""
        meeting = [calibration for calibration in self.calibrations if calibration.recommended is not None]
        return min(meeting, key=lambda calibration: calibration.recommended.computed_calls, default=None)

    def fastest_pick(self) -> dict | None:
        """The panel's verdict across engines: {"engine", "threshold"} of ``fastest``, or None."""
        fastest = self.fastest
        return None if fastest is None else {"engine": fastest.plan.engine, "threshold": fastest.recommended_tau}

    def rows(self) -> list[dict]:
        """Our cache's rows (the panel's table without the engines)."""
        return self.ours.rows()

    def engine_rows(self) -> list[dict]:
        """Every engine's rows, ``engine`` naming it."""
        return [{"engine": calibration.plan.engine, **row} for calibration in self.calibrations
                for row in calibration.rows()]

    def memory_entry(self) -> dict:
        return self.ours.memory_entry()

    def report(self) -> str:
        sections = []
        for calibration in self.calibrations:
            sections += [f"{calibration.plan.engine}:", calibration.report(), ""]
        fastest = self.fastest
        target = f"{100 * self.plan.capture_target:.0f} %"
        if fastest is None:
            sections.append(f"No engine keeps {target} of the search's gain at any measured threshold: search without "
                            "a cache on this setup.")
        else:
            picked = fastest.recommended
            sections.append(f"Fewest computed calls at the target: {fastest.plan.engine} {fastest.plan.threshold_name} "
                            f"{picked.tau:g} (capture {100 * picked.fidelity.capture_of_means.value:.1f} %, "
                            f"{picked.call_speedup:.2f}x fewer transformer calls; {picked.computed_calls} computed of "
                            f"{picked.calls}).")
        return "\n".join(sections)

    def chart(self) -> np.ndarray:
        """Each engine's chart, ours on top: [400 x engines, 640, 3] uint8."""
        return np.concatenate([calibration.chart(label=f"{calibration.plan.engine}: ")
                               for calibration in self.calibrations], axis=0)


def _per_prompts(per_prompt: str, prompts: int) -> str:
    return per_prompt if prompts == 1 else f"{prompts} prompts x ({per_prompt})"


def _json_number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def setup_key(model_file: str, steps: int, sampler_name: str, scheduler: str) -> str:
    """The setup a calibration holds for: what changes the trajectory the cache sees."""
    return f"{model_file} | {steps} steps | {sampler_name} | {scheduler}"


class CalibrationMemory:
    """Calibrations remembered per setup in one JSON file (the latest result of each setup). A file that is not a
    memory (a crash or an edit broke it) is set aside under a name of its own, never overwritten; ``problems`` says
    so, to show on the node. Each write replaces the file whole (``safe_files.write_atomically``): two writers at
    once never tear it, the later one's file wins."""

    def __init__(self, path: pathlib.Path):
        self.path = pathlib.Path(path)
        self.problems: list[str] = []

    def _load(self) -> dict:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as error:
            return self._set_aside(f"it could not be read ({error})")
        if not text.strip():
            return {}
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as error:
            return self._set_aside(f"it is not JSON ({error})")
        if not (isinstance(entries, dict) and all(isinstance(entry, dict) for entry in entries.values())):
            return self._set_aside("it is not a calibration memory (a JSON object of calibrations by setup)")
        return entries

    def _set_aside(self, why: str) -> dict:
        self.problems.append(set_aside(self.path, why, "the calibrations it remembered are not shown (calibrate "
                                                       "again, or restore it by hand)"))
        return {}

    def remember(self, key: str, calibration: Calibration | ExpertsCalibration) -> None:
        """Raises OSError when the file cannot be written (the old one is then left as it was)."""
        entries = self._load()
        entries[key] = calibration.memory_entry()
        write_atomically(self.path, json.dumps(entries, indent=1, sort_keys=True).encode("utf-8"))

    def recall(self, key: str) -> dict | None:
        return self._load().get(key)


def describe_remembered(entry: dict, expert: str | None = None) -> str:
    """The line Apply Cache shows for a remembered calibration of its setup (of one expert's cache: ``expert``)."""
    subject = "this setup"
    if expert is not None:
        entry, subject = entry[expert], f"this setup's {expert} expert"
    if entry["tau"] == 0:
        return (f"calibrated for {subject}: tau 0 (no tau kept {100 * entry['capture_target']:.0f} % capture; "
                "cache off)")
    pooled = f", {entry['prompts']} prompts" if entry.get("prompts", 1) > 1 else ""
    return f"calibrated for {subject}: tau {entry['tau']:g} (capture {100 * entry['capture']:.0f} %{pooled})"


HIGH_NOISE, LOW_NOISE = EXPERTS = ("high-noise", "low-noise")


def experts_setup_key(high_file: str, low_file: str, steps: int, split_step: int, sampler_name: str,
                      scheduler: str) -> str:
    """A two-expert setup: both expert files, and where the low-noise expert takes over."""
    return f"{high_file} + {low_file} | {steps} steps, split at {split_step} | {sampler_name} | {scheduler}"


def expert_arm_prefix(expert: str) -> str:
    return f"{expert} "


def together_arm(tau_high: float, tau_low: float) -> str:
    """The store's name of the arm with both experts cached at once."""
    return f"together: high-noise tau {tau_high:g}, low-noise tau {tau_low:g}"


@dataclasses.dataclass(frozen=True)
class ExpertsPlan:
    """A two-expert calibration: each expert's taus measured with the other expert at full compute (a sweep per
    expert, not a grid: S x (taus_high + taus_low) cached rollouts instead of S x taus_high x taus_low), on the same
    seeds and full rollouts, then the two picks together once (S more rollouts, only when both experts pick a tau)."""

    high: CalibrationPlan
    low: CalibrationPlan

    @classmethod
    def create(cls, taus_high, taus_low, seeds: int, first_seed: int, capture_target: float,
               prompts: int = 1) -> ExpertsPlan:
        return cls(CalibrationPlan(tuple(taus_high), seeds, first_seed, capture_target, "taus_high", prompts),
                   CalibrationPlan(tuple(taus_low), seeds, first_seed, capture_target, "taus_low", prompts))

    @property
    def seeds(self) -> int:
        return self.high.seeds

    @property
    def seed_list(self) -> list[int]:
        return self.high.seed_list

    @property
    def prompt_list(self) -> list[int]:
        return self.high.prompt_list

    @property
    def capture_target(self) -> float:
        return self.high.capture_target

    @property
    def rollouts(self) -> int:
        """At most: the full rollouts, each expert's sweep and the two picks together."""
        return self.high.prompts * self.seeds * (2 + len(self.high.taus) + len(self.low.taus))

    def cost(self, steps: int) -> str:
        return self.rollout_count().text(steps)

    def rollout_count(self) -> RolloutCount:
        seeds = self.seeds
        per_prompt = (f"{seeds} full rollouts + {seeds} cached rollouts x ({len(self.high.taus)} high-noise taus + "
                      f"{len(self.low.taus)} low-noise taus) + {seeds} with both picks")
        return RolloutCount(_per_prompts(per_prompt, self.high.prompts), self.rollouts, self.high.prompts * seeds,
                            at_most=True)


@dataclasses.dataclass(frozen=True)
class ExpertsCalibration:
    """Both experts' tables and recommendations, and the two picks measured together (None until that arm ran,
    and when either expert recommends 0)."""

    plan: ExpertsPlan
    high: Calibration
    low: Calibration
    together: ArmResult | None

    @classmethod
    def from_store(cls, store: ScoreStore, plan: ExpertsPlan, bootstrap: int = 2000) -> ExpertsCalibration:
        high = Calibration.from_store(store, plan.high, bootstrap=bootstrap, arm_prefix=expert_arm_prefix(HIGH_NOISE))
        low = Calibration.from_store(store, plan.low, bootstrap=bootstrap, arm_prefix=expert_arm_prefix(LOW_NOISE))
        together = None
        arm = together_arm(high.recommended_tau, low.recommended_tau)
        if all(store.has(arm, prompt, seed) for prompt in plan.prompt_list for seed in plan.seed_list):
            (together,) = evaluate_arms(store, {arm: None}, plan.prompt_list, plan.seed_list, bootstrap)
        return cls(plan, high, low, together)

    @property
    def experts(self) -> dict[str, Calibration]:
        return {HIGH_NOISE: self.high, LOW_NOISE: self.low}

    @property
    def together_taus(self) -> tuple[float, float] | None:
        """The picks to measure together: both experts recommend a tau (with one at 0 the pair is the other's
        measured arm already)."""
        taus = (self.high.recommended_tau, self.low.recommended_tau)
        return taus if all(taus) else None

    @property
    def together_meets_target(self) -> bool | None:
        if self.together is None:
            return None
        return bool(self.together.fidelity.capture_of_means.value >= self.plan.capture_target)

    @property
    def full_seconds(self) -> float:
        return self.high.full_seconds

    def rows(self) -> list[dict]:
        """The panel's rows: each expert's taus (``expert`` names it), then the picks together."""
        rows = [{"expert": expert, **row} for expert, calibration in self.experts.items()
                for row in calibration.rows()]
        if self.together is not None:
            row = self.high.row(self.together)
            taus = f"{self.high.recommended_tau:g} + {self.low.recommended_tau:g}"
            rows.append({**row, "expert": "both", "tau": taus, "recommended": False})
        return rows

    def report(self) -> str:
        sections = []
        for expert, calibration in self.experts.items():
            other = LOW_NOISE if expert == HIGH_NOISE else HIGH_NOISE
            sections += [f"{expert.capitalize()} expert (the {other} expert at full compute):",
                         calibration.report(f"the {expert} expert"), ""]
        if self.together is not None:
            capture = self.together.fidelity.capture_of_means.value
            target = f"{100 * self.plan.capture_target:.0f} %"
            verdict = (f"Together they keep {100 * capture:.1f} % (target {target}) at "
                       f"{self.together.call_speedup:.2f}x fewer transformer calls: " +
                       ("use both picks." if self.together_meets_target else
                        "below the target, because each expert's loss adds up. Lower the high-noise tau a step (or "
                        "measure with more seeds) before a search that must keep the target."))
            sections += ["Both picks together:", "| taus | skipped calls | speed-up (calls) | speed-up (s) | rho "
                         "| top-1 | capture | regret |", "|---|---|---|---|---|---|---|---|",
                         self.high.table_line(f"{self.high.recommended_tau:g} + {self.low.recommended_tau:g}",
                                              self.together), "", verdict]
        elif self.together_taus is None:
            sections.append("Not measured together: an expert with tau 0 computes every call, so the other expert's "
                            "row above is what the search runs.")
        return "\n".join(sections).rstrip()

    def chart(self) -> np.ndarray:
        """Each expert's chart, high-noise above low-noise: [800, 640, 3] uint8."""
        return np.concatenate([self.high.chart(label=f"{HIGH_NOISE} expert: "),
                               self.low.chart(label=f"{LOW_NOISE} expert: ")], axis=0)

    def memory_entry(self) -> dict:
        together = self.together.fidelity.capture_of_means.value if self.together is not None else None
        return {HIGH_NOISE: self.high.memory_entry(), LOW_NOISE: self.low.memory_entry(),
                "together_capture": together}
