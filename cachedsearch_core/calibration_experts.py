"""A two-expert calibration (Wan 2.2 A14B), calibrated one expert at a time on the same full rollouts: each expert's
taus with the other expert at full compute, each expert recommended by the same rule, then both picks together once,
so the table also shows what the search will actually run."""

from __future__ import annotations

import dataclasses

import numpy as np

from .audit import ArmResult, ScoreStore, evaluate_arms
from .calibration import CalibrationPlan, RolloutCount, counted, per_prompts
from .calibration_results import Calibration

HIGH_NOISE, LOW_NOISE = EXPERTS = ("high-noise", "low-noise")


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
        sweeps = f"{counted(len(self.high.taus), 'high-noise tau')} + {counted(len(self.low.taus), 'low-noise tau')}"
        per_prompt = f"{seeds} full rollouts + {seeds} cached rollouts x ({sweeps}) + {seeds} with both picks"
        return RolloutCount(per_prompts(per_prompt, self.high.prompts), self.rollouts, self.high.prompts * seeds,
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

    @property
    def none_skipped(self) -> bool:
        """Neither expert's taus skipped a call."""
        return self.high.none_skipped and self.low.none_skipped

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
