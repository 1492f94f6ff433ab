"""The search's report, at the top of the core: the text the sampler and recommit nodes show of a search's drafts,
ranking and cost (report Sec. 3.2), and the search's cost built from its drafts and, for a pruned or fixed-budget
search, what pruning and the budget add (each of those layers owns its formula)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .cost import SearchCost
from .cost_formulas import calls_per_stage, skipped_share
from .records import Draft, Ranking
from .cache_statistics import INACTIVE_PREFIX

if TYPE_CHECKING:
    from .budget import BudgetOutcome
    from .pruned_budget import PrunedBudget
    from .pruning import PruningOutcome

# How the report says what delivered the winner (the artist's pick line says it the same way): a commit, keep, or a
# free commit (the delivered draft computed every call, so it is the full result).
DELIVERED_BY = {"commit": "recommit at full compute", "keep": "the cached draft as-is (keep)"}
COMMIT_FREE_DELIVERY = "its draft, which computed every call (commit free)"
WINNER_LINE_PREFIX = "winner: "
COMMIT_FREE_LINE = ("commit free: the winning draft skipped nothing, so it already is the full-compute result "
                    "(delivered without sampling again)")


def search_cost(drafts: Sequence[Draft], pruning: PruningOutcome | None = None,
                budget: BudgetOutcome | PrunedBudget | None = None, commit_free: bool = False,
                stage_names: Sequence[str] = ()) -> SearchCost:
    """The cost of a search that finished ``drafts``, before any commit (``SearchCost.of_search``): a pruned search
    (``pruning``) started every seed it scored and paid for its dropped drafts and previews, a fixed-budget search
    (``budget``) for the draft it stopped; each says what that was (``extra_work``)."""
    extra = [part.extra_work() for part in (pruning, budget) if part is not None]
    width = len(pruning.seeds) if pruning is not None else None
    return SearchCost.of_search(drafts, *extra, width=width, commit_free=commit_free, stage_names=stage_names)


def search_report(
    drafts: Sequence[Draft],
    cache_description: str,
    cost: SearchCost,
    ranking: Ranking | None = None,
    stage_names: Sequence[str] = (),
    numbers: Sequence[int] | None = None,
) -> str:
    """The text the sampler and recommit nodes show: per candidate and for the whole search, with ``stage_names``
    the skipped calls of each stage over all drafts, with a ranking the winner and what delivered it, then the
    search's ``cost`` (its commit predicted on the sampler, counted on the recommit). ``numbers``: each draft's
    candidate number (its place in the search's seed order, which a pruned search's survivors keep); 1, 2, ... by
    default."""
    numbers = list(numbers) if numbers is not None else list(range(1, len(drafts) + 1))
    lines = [f"CachedSearch: {len(drafts)} candidate(s), {cache_description}"]
    inactive_reasons = dict.fromkeys(d.cache_inactive_reason for d in drafts if d.cache_inactive_reason)
    lines.extend(f"{INACTIVE_PREFIX}{reason}" for reason in inactive_reasons)
    winner = ranking.winner if ranking is not None else None
    lines.append(f"{'':2}{'#':>3}  {'seed':>20}  {'score':>9}  {'skipped calls':>15}  {'seconds':>8}")
    for index, draft in enumerate(drafts):
        score = f"{ranking.scores[index]:9.4f}" if ranking is not None else f"{'-':>9}"
        share = skipped_share(draft.calls_skipped, draft.calls) or 0.0
        skipped = f"{draft.calls_skipped}/{draft.calls} ({100 * share:.0f}%)"
        marker = "*" if index == winner else " "
        lines.append(f"{marker:2}{numbers[index]:>3}  {draft.seed:>20}  {score}  {skipped:>15}  {draft.seconds:8.2f}")
    for name, skipped, calls in calls_per_stage(drafts, stage_names):
        share = skipped_share(skipped, calls) or 0.0
        lines.append(f"{name}: {skipped}/{calls} calls skipped ({100 * share:.0f}%) over all drafts")
    delivered_free = cost.commit_ran and cost.commit_free
    if winner is not None:
        delivered = DELIVERED_BY["keep" if cost.kept else "commit"]
        if delivered_free:
            delivered = COMMIT_FREE_DELIVERY
        lines.append(f"{WINNER_LINE_PREFIX}candidate {numbers[winner]}, seed {drafts[winner].seed}, delivered by "
                     f"{delivered}")
    if delivered_free:
        lines.append(COMMIT_FREE_LINE)
    lines.extend(cost.report_lines())
    return "\n".join(lines)
