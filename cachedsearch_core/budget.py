"""Fixed-budget search: draft while the drafts so far plus one full recommit cost no more than full best-of-M
("CachedSearch: Training-Free Cached Exploration for Test-Time Search in Video Diffusion", Sec. 3.3)."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence

from .cost import SearchCost
from .cost_formulas import ExtraWork, break_even_width, share_of_full_best_of
from .records import MAX_CANDIDATES


def predicted_full_cost(draft_cost: float, computed_fraction: float) -> float:
    """A full rollout's cost predicted from one draft before any commit has run: the draft computed only
    ``computed_fraction`` of its transformer calls, which dominate a rollout's cost."""
    if not 0 < computed_fraction <= 1:
        raise ValueError(f"computed_fraction: got {computed_fraction}; a draft computes a fraction in (0, 1]")
    return draft_cost / computed_fraction


def budget_width(draft_costs: Sequence[float], full_cost: float, budget_rollouts: int,
                 commit_free: bool = False) -> int:
    """The largest N with cost(drafts 1..N) + one full recommit <= ``budget_rollouts`` full rollouts; with
    ``commit_free`` (every draft skipped nothing, so the recommit delivers a draft as it is) no recommit is paid.

    Costs in transformer calls make N deterministic; in seconds N depends on wall time.
    """
    if budget_rollouts < 1:
        raise ValueError(f"budget_rollouts: got {budget_rollouts}; spend at least what one full rollout costs")
    if full_cost <= 0:
        raise ValueError(f"full_cost: got {full_cost}; a full rollout costs more than nothing")
    allowance = budget_rollouts * full_cost - (0.0 if commit_free else full_cost)
    spent = 0.0
    width = 0
    for cost in draft_costs:
        if spent + cost > allowance:
            break
        spent += cost
        width += 1
    return width


class BudgetUnit(str, enum.Enum):
    """What the budget counts. Transformer calls are counted exactly, so the width they give is deterministic;
    wall time includes everything a rollout spends but makes the width depend on the machine's speed."""

    CALLS = "transformer calls"
    WALL_TIME = "wall time"


@dataclasses.dataclass(frozen=True)
class BudgetPlan:
    """Draft as many candidates as fit in what full best-of-``rollouts`` costs, one full recommit included.

    rollouts: M, the full rollouts the search may spend (2 or more: one is the recommit).
    unit: what is counted (``BudgetUnit``); transformer calls by default.
    max_candidates: the most drafts the search makes, so that it ends even when drafts cost nearly nothing.
    auto: choose the width and the pruning rounds from a calibration of the search's setup (``auto_policy``).
    """

    rollouts: int = 4
    unit: BudgetUnit = BudgetUnit.CALLS
    max_candidates: int = 16
    auto: bool = False

    def __post_init__(self):
        try:
            object.__setattr__(self, "unit", BudgetUnit(self.unit))
        except ValueError:
            raise ValueError(
                f"budget_unit: got {self.unit!r}; use one of {', '.join(repr(u.value) for u in BudgetUnit)}"
            ) from None
        if not 2 <= self.rollouts <= MAX_CANDIDATES:
            raise ValueError(
                f"budget_rollouts: got {self.rollouts}; use 2 to {MAX_CANDIDATES} (one full rollout pays for the "
                "recommit, the rest for drafts; the report's example spends best-of-4)"
            )
        if self.auto and self.unit is not BudgetUnit.CALLS:
            raise ValueError(f"budget_unit: got {self.unit.value!r}; auto chooses from the calibrated transformer "
                             f"calls, so set budget_unit to {BudgetUnit.CALLS.value!r}")
        if not 1 <= self.max_candidates <= MAX_CANDIDATES:
            raise ValueError(
                f"max_candidates: got {self.max_candidates}; use 1 to {MAX_CANDIDATES} (the search stops there "
                "even when budget is left)"
            )

    @property
    def deterministic(self) -> bool:
        return self.unit is BudgetUnit.CALLS


class BudgetSpent(Exception):
    """Raised before a transformer call that the budget cannot pay for; the search stops the draft there."""


class BudgetLedger:
    """What a fixed-budget search has spent, and whether it may compute the next transformer call.

    Finished drafts tell the cost of a full rollout before any commit has run: in calls, a draft's computed plus
    skipped calls are exactly the calls a full rollout computes; in wall time, the drafts' seconds over their
    computed-call fraction (``predicted_full_cost``). Until the first draft has finished nothing is known and
    nothing is stopped: a draft never costs more than a full rollout, which any plan (M >= 2) affords.

    While every finished draft skipped nothing the recommit will be free (whichever wins, its draft already is the
    full-compute result), so the drafts may spend all M rollouts.
    """

    def __init__(self, plan: BudgetPlan):
        self.plan = plan
        self.reset()

    def reset(self) -> None:
        self.draft_costs: list[float] = []
        self.stopped_draft_cost: float | None = None
        self.stopped_draft_seconds = 0.0
        self.stopped_draft_skipped = False
        self._every_draft_skipped_nothing = True
        self._computed_calls = 0
        self._total_calls = 0
        self._draft_seconds = 0.0
        self._rollout_calls = 0
        self._current_calls = 0
        self._current_start = 0.0
        self.replayed_drafts = 0

    def __repr__(self) -> str:
        return (f"BudgetLedger({self.plan.unit.value}, {len(self.draft_costs)} drafts, spent "
                f"{sum(self.draft_costs):g}, full rollout {self.full_cost()})")

    def full_cost(self) -> float | None:
        """One full rollout's cost in the plan's unit, predicted from the finished drafts (None before any)."""
        if not self.draft_costs:
            return None
        if self.plan.unit is BudgetUnit.CALLS:
            return float(self._rollout_calls)
        return predicted_full_cost(self._draft_seconds / len(self.draft_costs),
                                   self._computed_calls / self._total_calls)

    def commit_free(self) -> bool:
        """Every finished draft skipped nothing: the recommit delivers the winner's draft at no cost."""
        return bool(self.draft_costs) and self._every_draft_skipped_nothing

    def recommit_cost(self) -> float | None:
        """The recommit's predicted cost: a full rollout, or nothing while the commit is free."""
        full = self.full_cost()
        if full is None:
            return None
        return 0.0 if self.commit_free() else full

    def allowance(self) -> float | None:
        """What the drafts may spend: M full rollouts less the recommit."""
        full = self.full_cost()
        return None if full is None else self.plan.rollouts * full - self.recommit_cost()

    def left_for_drafts(self) -> float | None:
        """What the finished drafts left of the allowance (None before the first has finished)."""
        allowance = self.allowance()
        return None if allowance is None else max(allowance - sum(self.draft_costs), 0.0)

    def start_draft(self, now: float) -> None:
        self._current_calls = 0
        self._current_start = now

    def _current_cost(self, now: float) -> float:
        return float(self._current_calls) if self.plan.unit is BudgetUnit.CALLS else now - self._current_start

    def _next_call_cost(self) -> float:
        if self.plan.unit is BudgetUnit.CALLS:
            return 1.0
        return self._draft_seconds / self._computed_calls

    def before_computed_call(self, now: float) -> None:
        """Count the transformer call about to be computed, or raise ``BudgetSpent`` when it would not fit."""
        allowance = self.allowance()
        if allowance is not None:
            spent = sum(self.draft_costs) + self._current_cost(now) + self._next_call_cost()
            if spent > allowance:
                self._stop_draft(self._current_cost(now), now)
                raise BudgetSpent
        self._current_calls += 1

    def finish_draft(self, skipped_calls: int, now: float) -> None:
        """Book the draft in progress, which skipped ``skipped_calls``: a full rollout computes those too.

        A draft that skipped calls after drafts that skipped nothing makes the recommit a full rollout again; when
        the drafts and that recommit no longer fit, the draft is stopped (``BudgetSpent``) and dropped instead.
        """
        cost = self._current_cost(now)
        if skipped_calls and self.commit_free():
            full = self.full_cost()
            if sum(self.draft_costs) + cost > (self.plan.rollouts - 1) * full:
                self._stop_draft(cost, now)
                self.stopped_draft_skipped = True
                raise BudgetSpent
        seconds = now - self._current_start
        total_calls = self._current_calls + skipped_calls
        self._every_draft_skipped_nothing = self._every_draft_skipped_nothing and skipped_calls == 0
        self.draft_costs.append(cost)
        self._computed_calls += self._current_calls
        self._total_calls += total_calls
        self._draft_seconds += seconds
        self._rollout_calls = max(self._rollout_calls, total_calls)

    def replay_draft(self, computed_calls: int, skipped_calls: int, seconds: float) -> None:
        """Book a finished draft an earlier run saved as if it ran now: its computed calls one at a time (each at its
        share of the recorded ``seconds``), then its end. A search reusing saved drafts so stops where the
        uninterrupted search stopped (exactly in calls; a wall-time budget depends on wall time anyway). Raises
        ``BudgetSpent`` where the draft would have been stopped."""
        per_call = seconds / computed_calls if computed_calls else 0.0
        self.start_draft(0.0)
        for index in range(computed_calls):
            self.before_computed_call(index * per_call)
        self.finish_draft(skipped_calls, seconds)
        self.replayed_drafts += 1

    def _stop_draft(self, cost: float, now: float) -> None:
        """Record what the draft in progress spent when the budget stopped it."""
        self.stopped_draft_cost = cost
        self.stopped_draft_seconds = now - self._current_start

    def outcome(self) -> BudgetOutcome:
        if not self.draft_costs:
            raise ValueError("budget: no draft finished, so there is no width to report")
        stopped_calls = self._current_calls if self.stopped_draft_cost is not None else 0
        return BudgetOutcome(self.plan, tuple(self.draft_costs), self.full_cost(), self.stopped_draft_cost,
                             commit_free=self.commit_free(), stopped_draft_skipped=self.stopped_draft_skipped,
                             stopped_draft_calls=stopped_calls, stopped_draft_seconds=self.stopped_draft_seconds,
                             replayed_drafts=self.replayed_drafts)


def format_cost(value: float, unit: BudgetUnit) -> str:
    return f"{value:.0f} calls" if unit is BudgetUnit.CALLS else f"{value:.2f} s"


@dataclasses.dataclass(frozen=True)
class BudgetOutcome:
    """The width a fixed-budget search chose and what it predicted (costs in ``plan.unit``)."""

    plan: BudgetPlan
    draft_costs: tuple[float, ...]
    full_cost: float  # predicted before any commit ran
    stopped_draft_cost: float | None  # spent on the draft the budget stopped; None when max_candidates ended it
    commit_free: bool = False  # every draft skipped nothing: the recommit delivers the winner's draft at no cost
    # The stopped draft ran to its end but skipped calls, so the recommit would have cost a full rollout again.
    stopped_draft_skipped: bool = False
    stopped_draft_calls: int = 0  # transformer calls the stopped draft computed, in either unit
    # Seconds the stopped draft ran, in either unit: measured on this machine, not part of what the budget decided.
    stopped_draft_seconds: float = dataclasses.field(default=0.0, compare=False)
    # Drafts read back from an earlier run's saved drafts: charged as when they were drafted (so N is the same), at
    # no cost in this run's measured cost.
    replayed_drafts: int = 0
    # Budget "auto" fell back to this rule, or chose no pruning: ``AutoChoice.as_dict`` (its line says why).
    auto: dict | None = None

    @property
    def width(self) -> int:
        return len(self.draft_costs)

    @property
    def budget(self) -> float:
        return self.plan.rollouts * self.full_cost

    @property
    def recommit_cost(self) -> float:
        """A full rollout, or nothing when the commit is free."""
        return 0.0 if self.commit_free else self.full_cost

    @property
    def predicted_total(self) -> float:
        """Drafts, the stopped draft's part and the recommit at its predicted cost."""
        return sum(self.draft_costs) + (self.stopped_draft_cost or 0.0) + self.recommit_cost

    def extra_work(self) -> ExtraWork:
        """What the search paid for besides its finished drafts: the draft the budget stopped."""
        return ExtraWork(self.stopped_draft_calls, self.stopped_draft_seconds)

    @property
    def break_even_width(self) -> float:
        """Predicted, in the plan's unit (``cost_formulas.break_even_width``)."""
        mean_draft = sum(self.draft_costs) / self.width
        return break_even_width(mean_draft / self.full_cost, self.recommit_cost / self.full_cost)

    def measured(self, cost: SearchCost) -> tuple[float, float] | None:
        """The recommit's and the whole search's measured cost in the plan's unit, as the search's cost model
        counts them (calls: search calls + commit calls; wall time: search seconds + commit seconds); None until a
        commit ran (keep runs none)."""
        if not cost.commit_ran:
            return None
        if self.plan.unit is BudgetUnit.CALLS:
            return cost.commit_calls, cost.total_calls
        return cost.commit_seconds, cost.total_seconds

    def lines(self, search_cost: SearchCost | None = None) -> list[str]:
        """Report lines; with the search's cost model (``search_cost``) after a commit, the predicted-vs-measured
        check."""
        unit, m = self.plan.unit, self.plan.rollouts

        def cost(value):
            return format_cost(value, unit)

        dependence = "deterministic" if self.plan.deterministic else "N depends on wall time"
        heading = (f"budget: full best-of-{m} in {unit.value} = {m} x {cost(self.full_cost)} (full rollout, predicted "
                   f"from the drafts) = {cost(self.budget)}; {dependence}")
        lines = [heading] if self.auto is None else [self.auto["line"], *(f"auto: {note}" for note in
                                                                        self.auto.get("narrowed", ())), heading]
        if self.stopped_draft_skipped:
            ended = (f"draft {self.width + 1} dropped after {cost(self.stopped_draft_cost)}: it skipped calls, so the "
                     "recommit would no longer be free, and a full one does not fit")
        elif self.stopped_draft_cost is not None:
            ended = (f"draft {self.width + 1} stopped after {cost(self.stopped_draft_cost)}, where the next call "
                     "would have overrun the budget")
        else:
            ended = f"max_candidates {self.plan.max_candidates} reached"
        recommit = "free (every draft skipped nothing)" if self.commit_free else cost(self.full_cost)
        comparison = ("drafts cost as much as full rollouts: this is full best-of-N without its recommit"
                      if self.commit_free else f"break-even width N* = {self.break_even_width:.2f}")
        stopped = f" + stopped draft {cost(self.stopped_draft_cost)}" if self.stopped_draft_cost else ""
        replayed = (f" ({self.replayed_drafts} of them saved by an earlier run: charged as when drafted, so N is the "
                    "same; they cost nothing now)" if self.replayed_drafts else "")
        lines.append(
            f"budget: N = {self.width} chosen ({ended}); drafts {cost(sum(self.draft_costs))}{replayed}{stopped} + "
            f"recommit {recommit} predicted = {cost(self.predicted_total)} of {cost(self.budget)}; {comparison}"
        )
        measured = self.measured(search_cost) if search_cost is not None else None
        if measured is not None:
            commit_cost, measured_total = measured
            lines.append(
                f"budget: recommit predicted {cost(self.recommit_cost)}, measured {cost(commit_cost)}; search total "
                f"predicted {cost(self.predicted_total)}, measured {cost(measured_total)} "
                f"({100 * share_of_full_best_of(measured_total, self.plan.rollouts, self.full_cost):.1f} % of the "
                f"budget)"
            )
        return lines

    def as_dict(self) -> dict:
        """JSON-ready summary for the frontend."""
        return {"unit": self.plan.unit.value, "rollouts": self.plan.rollouts, "width": self.width,
                "max_candidates": self.plan.max_candidates, "full_cost": self.full_cost, "budget": self.budget,
                "recommit_cost": self.recommit_cost, "commit_free": self.commit_free,
                "predicted_total": self.predicted_total, "deterministic": self.plan.deterministic,
                "break_even_width": self.break_even_width if math.isfinite(self.break_even_width) else None,
                **({} if self.auto is None else {"auto": self.auto})}
