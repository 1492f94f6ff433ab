"""A fixed budget for a pruned search: the widest N whose prune schedule and one full commit run no more sampler
steps than full best-of-M ("CachedSearch: Training-Free Cached Exploration for Test-Time Search in Video Diffusion",
Sec. 3.3 with Sec. "Composition with pruned search"). The width is chosen before drafting, from the schedule's steps
(``PruningPlan.search_steps``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .budget import BudgetPlan, BudgetUnit
from .cost import SearchCost
from .cost_formulas import ExtraWork, share_of_full_best_of
from .pruning import PruningPlan


@dataclasses.dataclass(frozen=True)
class PrunedBudget:
    """The width a pruned search chose from a budget plan, before drafting: the widest N (at most
    ``plan.max_candidates``) whose schedule's sampler steps (``PruningPlan.search_steps``) and one full-compute
    commit fit in what full best-of-M runs, M T steps. Every step is counted as computed, so the choice is
    deterministic and the search never overruns; what the step cache skips comes on top (the measured calls show
    it).

    width_steps: the schedule's steps at the chosen width; wider_steps: at width + 1, which did not fit (None when
    max_candidates ended the search).
    """

    plan: BudgetPlan
    width: int
    steps: int
    width_steps: int
    wider_steps: int | None
    # Budget "auto" fell back to this rule: ``AutoChoice.as_dict`` (its line says why).
    auto: dict | None = None

    @property
    def budget_steps(self) -> int:
        return self.plan.rollouts * self.steps

    @property
    def predicted_steps(self) -> int:
        """The schedule and the commit, every step counted."""
        return self.width_steps + self.steps

    def extra_work(self) -> ExtraWork:
        """Nothing besides the pruned search's own work: the width is chosen before drafting, so no draft is
        stopped part-way."""
        return ExtraWork()

    def measured(self, cost: SearchCost) -> tuple[float, float] | None:
        """The commit's and the whole search's measured transformer calls (``BudgetOutcome.measured``)."""
        return (cost.commit_calls, cost.total_calls) if cost.commit_ran else None

    def lines(self, search_cost: SearchCost | None = None) -> list[str]:
        m, steps = self.plan.rollouts, self.steps
        ended = (f"N = {self.width + 1} would run {self.wider_steps + steps} steps" if self.wider_steps is not None
                 else f"max_candidates {self.plan.max_candidates} reached")
        lines = [f"budget: full best-of-{m} runs {m} x {steps} = {self.budget_steps} sampler steps; the pruned "
                 f"schedule at N = {self.width} runs {self.width_steps} + commit {steps} = {self.predicted_steps} "
                 f"({ended}); chosen before drafting with every step counted as computed, so the cache's skipped "
                 "calls come on top; deterministic"]
        if self.auto is not None:
            lines.insert(0, self.auto["line"])
        if search_cost is not None and search_cost.commit_ran:
            share = share_of_full_best_of(search_cost.total_calls, m, search_cost.rollout_calls)
            lines.append(f"budget: measured {search_cost.total_calls} transformer calls with the commit, "
                         f"{100 * share:.1f} % of full best-of-{m}'s {search_cost.full_calls_of(m)}")
        return lines

    def as_dict(self) -> dict:
        """JSON-ready summary for the frontend, in sampler steps (one step: one full rollout's calls / T)."""
        return {"unit": "sampler steps", "rollouts": self.plan.rollouts, "width": self.width,
                "max_candidates": self.plan.max_candidates, "full_cost": self.steps, "budget": self.budget_steps,
                "recommit_cost": self.steps, "commit_free": False, "predicted_total": self.predicted_steps,
                "deterministic": True, "pruned": True, "wider_total": (None if self.wider_steps is None
                                                                        else self.wider_steps + self.steps),
                **({} if self.auto is None else {"auto": self.auto})}


def pruned_budget_width(plan_at: Callable[[int], PruningPlan], steps: int, budget: BudgetPlan) -> PrunedBudget:
    """The widest N whose pruned plan (``plan_at(N)``, a checked plan, or a ValueError naming the input when the
    schedule cannot apply to N candidates) fits the budget with one full commit (``PrunedBudget``)."""
    if budget.unit is not BudgetUnit.CALLS:
        raise ValueError(f"budget_unit: got {budget.unit.value!r}; a pruned search chooses its width before drafting, "
                         f"from its schedule's steps, so set budget_unit to {BudgetUnit.CALLS.value!r}")
    allowance = (budget.rollouts - 1) * steps
    chosen, refusal = None, None
    for width in range(1, budget.max_candidates + 1):
        try:
            plan = plan_at(width)
        except ValueError as error:
            refusal = error
            continue
        width_steps = plan.search_steps(width, steps)
        if width_steps > allowance:
            if chosen is not None:
                return dataclasses.replace(chosen, wider_steps=width_steps)
            raise ValueError(
                f"budget_rollouts: got {budget.rollouts}; the pruning schedule runs {width_steps} steps at its "
                f"narrowest N = {width}, plus a {steps}-step commit, more than full best-of-{budget.rollouts}'s "
                f"{budget.rollouts * steps}: raise budget_rollouts, or prune earlier or keep fewer"
            )
        chosen = PrunedBudget(budget, width, steps, width_steps, None)
    if chosen is None:
        raise refusal
    return chosen
