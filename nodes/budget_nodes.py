"""The budget plan node (the search nodes take its plan on ``sampler_node.budget_input``)."""

from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core import MAX_CANDIDATES
from ..cachedsearch_core.budget import BudgetPlan, BudgetUnit
from .types import BudgetType

AS_DRAFTS_FIT, AUTO = "as drafts fit", "auto"
CHOICES = (AS_DRAFTS_FIT, AUTO)
_WALL_TIME_NOTE = (
    "wall time: the measured draft seconds, with the drafts' computed-call fraction predicting what the full-compute "
    "recommit will take; counts everything a rollout spends, but the chosen N then depends on wall time (machine "
    "load, model loading in the first draft), so the same graph can choose a different N."
)


class SearchBudget(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchBudget",
            display_name="CachedSearch Budget",
            category="CachedSearch",
            description="Spend what full best-of-M would cost instead of choosing N: connected to a CachedSearch "
            "sampler's budget input, the search keeps drafting seeds while the drafts so far plus one full-compute "
            "recommit fit in M full rollouts, and reports the N it chose. Counted in transformer calls (default) the "
            "choice is deterministic; counted in wall time the chosen N depends on wall time. With a Pruning Plan on the "
            "same sampler, the savings of pruning buy width: the widest N whose schedule fits is explored. On "
            "choose \"auto\", a calibration of your setup (CachedSearch Calibrate on the same model file, steps, "
            "sampler and scheduler) chooses the width and, with a Pruning Plan, the pruning rounds that deliver the "
            "best video for the budget; without one it drafts as above and says why.",
            inputs=[
                io.Int.Input("budget_rollouts", default=4, min=2, max=MAX_CANDIDATES,
                             tooltip="M: the search may spend what M full rollouts cost (full best-of-M), one of "
                             "them for the recommit. With drafts twice as cheap as a full rollout, best-of-4's cost "
                             "explores 6 seeds."),
                io.Combo.Input("budget_unit", options=[unit.value for unit in BudgetUnit],
                               default=BudgetUnit.CALLS.value,
                               tooltip="transformer calls (default): counted exactly by the cache, so the same graph "
                               "always chooses the same N; a full rollout costs every call a draft computed or "
                               f"skipped. {_WALL_TIME_NOTE}"),
                io.Int.Input("max_candidates", default=16, min=1, max=MAX_CANDIDATES,
                             tooltip="The most seeds the search drafts even when budget is left (drafts that skip "
                             "almost everything would otherwise run on); the seeds run from seed to "
                             "seed + max_candidates - 1."),
                io.Combo.Input("choose", options=list(CHOICES), default=AS_DRAFTS_FIT, optional=True,
                               tooltip="as drafts fit (default): draft seeds while they fit, as above. auto: use the "
                               "calibration of this setup remembered by CachedSearch Calibrate (same model file, "
                               "steps, sampler, scheduler, cache warmup and cooldown; with a Pruning Plan also the "
                               "same verifier and preview frames): it chooses how wide to search and where to prune, "
                               "and the search never spends more than the budget, whatever the cache skips this "
                               "time. Counted in transformer calls."),
            ],
            outputs=[BudgetType.Output(display_name="budget", tooltip="Connect to a CachedSearch sampler's budget "
                                       "input.")],
        )

    @classmethod
    def validate_inputs(cls, budget_rollouts=None, budget_unit=None, max_candidates=None, choose=None):
        try:
            BudgetPlan(**{name: value for name, value in (("rollouts", budget_rollouts), ("unit", budget_unit),
                                                          ("max_candidates", max_candidates),
                                                          ("auto", None if choose is None else choose == AUTO))
                          if value is not None})
        except ValueError as error:
            return str(error)
        return True

    @classmethod
    def execute(cls, budget_rollouts, budget_unit, max_candidates, choose=AS_DRAFTS_FIT) -> io.NodeOutput:
        return io.NodeOutput(BudgetPlan(budget_rollouts, budget_unit, max_candidates, choose == AUTO))
