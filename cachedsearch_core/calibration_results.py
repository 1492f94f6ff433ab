"""A calibration's measured tables: per threshold the audit's metrics pooled over the prompts
(``audit.evaluate_arms``: one code path for the GUI's table and bench/audit.py's numbers), with intervals from a
bootstrap over the prompts (over the S seeds with one prompt), and the recommendation of the audit's tau* rule (of
the taus whose capture meets the target, the one that skips most; 0, the cache off, when none does or none of them
skips a call); one table per cache engine, and the
engine that keeps the target at the fewest computed calls."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .audit import FULL_ARM, ArmResult, ScoreStore, evaluate_arms, recommend_tau
from .calibration import OUR_ENGINE, CalibrationPlan
from .calibration_chart import capture_chart


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

    @property
    def none_skipped(self) -> bool:
        """No measured threshold skipped a call (the warmup and cooldown left too few steps, or every threshold was
        too small): why nothing is recommended, when nothing is."""
        return not any(result.skipped_share > 0 for result in self.results)

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
            verdict = (f"Recommended {engine}{name}: {self.recommended_tau:g} (of the {name}s whose capture meets "
                       f"{target}, the one that skips most: {100 * capture:.1f} %, "
                       f"{self.recommended.call_speedup:.2f}x fewer transformer calls).")
        elif self.none_skipped:
            verdict = (f"Recommended {engine}{name}: 0. No measured {name} skipped a call, so none saves anything: "
                       "leave the cache off, or measure again with fewer warmup and cooldown steps"
                       f"{'' if engine else ' (they leave few steps to skip)'}.")
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
        """This table's chart (``calibration_chart.capture_chart``): [height, width, 3] uint8."""
        return capture_chart(self.results, self.recommended, self.plan.capture_target, self.plan.threshold_name,
                             width, height, label)


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

    @property
    def none_skipped(self) -> bool:
        """No tau of our cache skipped a call (the panel's verdict is our cache's)."""
        return self.ours.none_skipped

    def engine_rows(self) -> list[dict]:
        """Every engine's rows, ``engine`` naming it and ``ours`` marking CachedSearch's own cache's."""
        return [{"engine": calibration.plan.engine, "ours": calibration.plan.engine == OUR_ENGINE, **row}
                for calibration in self.calibrations for row in calibration.rows()]

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


def _json_number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
