"""Choose a pruned search from recorded rollouts (issue 51 item 2): the width, the rounds (step, keep) and, where
several were calibrated, the tau that deliver the best video for a budget of M full renders, or that keep a capture
target of full best-of-M's gain for the fewest calls. Every candidate policy is replayed on the rollouts
(``search_policy.replay_all``: every disjoint block of seeds, as the bench does) and judged by what it delivers,
the full-compute score of the committed seed.

Calls: exploration (the drafts the replay counts) plus one full-compute commit. The budget holds on the worst prompt
(the mean over its seed blocks), so a policy that fits on average but not on some prompt is not chosen.

Counting calls alone undercounts a pruned search on a GPU: every round decodes and judges each running candidate's
preview (issue 51 item 6). ``weighing_previews`` gives each scored preview its measured cost in computed calls'
time (``previews.preview_call_equivalents``); the budget and the fewest-calls question then hold on that cost, so
where previews are dear the chooser prunes in fewer rounds or on fewer candidates, and where they are free it
chooses as before.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from .fidelity import Interval
from .search_audit import _bootstrap
from .search_policy import Policy, Replay, Rollouts, Round, full_best_of, replay_all, widest_width

# The keeps a round may choose; more, and the grid grows without a measured gain (bench: "Search policies").
KEEPS = (1, 2, 3, 4, 6, 8)
MAX_ROUNDS = 2
BOOTSTRAP = 2000

Item = TypeVar("Item")


@dataclasses.dataclass(frozen=True)
class ChosenPolicy:
    """A chosen search and what the rollouts expect of it, per prompt on average.

    score: the delivered full-compute score; gain: score minus full best-of-M's, with its 95 % prompt-bootstrap
    interval; capture: the share of full best-of-M's gain over a single seed that it keeps (NaN where there is no
    gain); calls: exploration and commit transformer calls (worst_calls: on the worst prompt), against budget_calls,
    M full rollouts' calls; previews: the previews it scores, each costing preview_cost calls' time
    (``weighing_previews``; 0: not weighed); worst_cost: calls and previews' cost on the worst prompt (None: the
    worst calls and the mean previews', exact for fixed keeps).
    """

    tau: float
    policy: Policy
    score: float
    gain: Interval
    capture: float
    calls: float
    worst_calls: float
    budget_calls: float
    prompts: int
    seeds: int
    previews: float = 0.0
    preview_cost: float = 0.0
    worst_cost: float | None = None

    def __post_init__(self):
        if self.worst_cost is None:
            object.__setattr__(self, "worst_cost", self.worst_calls + self.previews * self.preview_cost)

    @property
    def cost(self) -> float:
        """Exploration, commit and the previews' call equivalents: what the budget holds."""
        return self.calls + self.previews * self.preview_cost

    @property
    def width(self) -> int:
        return self.policy.width

    @property
    def rounds(self) -> tuple[tuple[int, int], ...]:
        return tuple((prune.step, prune.keep) for prune in self.policy.rounds)


def best_within(scored: Sequence[tuple[Item, Replay]], commit: float, budget: float) -> tuple[Item, Replay]:
    """The highest mean delivered score among those whose exploration cost and commit fit ``budget`` on every prompt
    (ties: the lower cost, then the earlier)."""
    within = [(item, outcome) for item, outcome in scored if outcome.worst_cost.max() + commit <= budget]
    if not within:
        raise ValueError(f"budget: no policy fits {budget:g} calls with the {commit:g}-call commit; raise the budget")
    return max(within, key=lambda pair: (pair[1].delivered.mean(), -pair[1].cost.mean()))


def cheapest_capturing(scored: Sequence[tuple[Item, Replay]], mean_seed: np.ndarray, best_gain: float,
                       target: float) -> tuple[Item, Replay]:
    """The lowest mean exploration cost among those keeping ``target`` of ``best_gain`` over ``mean_seed``
    (ties: the higher delivered score, then the earlier)."""
    capturing = [(item, outcome) for item, outcome in scored
                 if (outcome.delivered - mean_seed).mean() / best_gain >= target]
    if not capturing:
        raise ValueError(f"capture target: got {target:g}; no policy keeps it on these rollouts: lower it, or "
                         "calibrate more seeds for wider searches")
    return min(capturing, key=lambda pair: (pair[1].cost.mean(), -pair[1].delivered.mean()))


def schedules(rollouts: Rollouts) -> list[tuple[Round, ...]]:
    """No prune, and up to ``MAX_ROUNDS`` rounds at the steps every rollout scored a preview, each keeping fewer."""
    steps = rollouts.scored_steps()
    found = [()]
    for count in range(1, MAX_ROUNDS + 1):
        for at in itertools.combinations(steps, count):
            for keeps in itertools.combinations(sorted(KEEPS, reverse=True), count):
                found.append(tuple(Round(step, keep) for step, keep in zip(at, keeps)))
    return found


def candidate_policies(rollouts: Rollouts, max_width: int, budget: float) -> list[Policy]:
    """Every schedule at every width from its first keep + 1 up to ``max_width`` and the widest whose expected
    exploration calls fit ``budget`` (``widest_width``)."""
    policies = []
    for rounds in schedules(rollouts):
        narrowest = rounds[0].keep + 1 if rounds else 1
        widest = min(max_width, widest_width(rollouts, rounds, budget))
        schedule = ", ".join(f"{prune.step}:{prune.keep}" for prune in rounds)
        policies += [Policy(f"N = {width}" + (f", {schedule}" if schedule else ""), width, rounds)
                     for width in range(narrowest, widest + 1)]
    return policies


def _checked(tables: Mapping[float, Rollouts], rollouts_m: int, name: str, max_width: int | None) -> int:
    """The widest width to try; raises a ValueError naming the input that cannot apply to ``tables``."""
    if not tables:
        raise ValueError("rollouts: none recorded; run Calibrate first")
    seeds = min(table.seeds for table in tables.values())
    if isinstance(rollouts_m, bool) or not isinstance(rollouts_m, int) or rollouts_m < 2:
        raise ValueError(f"{name}: got {rollouts_m!r}; use a whole number of full renders, 2 or more (one pays for "
                         "the commit)")
    if rollouts_m > seeds:
        raise ValueError(f"{name}: got {rollouts_m}; the rollouts hold {seeds} seeds per prompt, fewer than full "
                         f"best-of-{rollouts_m} needs: calibrate at least {rollouts_m} seeds")
    if max_width is not None and max_width < 1:
        raise ValueError(f"max_width: got {max_width}; use 1 or more")
    return seeds if max_width is None else min(seeds, max_width)


def _scored(tables: Mapping[float, Rollouts], max_width: int, budget: float
            ) -> list[tuple[tuple[float, Policy], Replay]]:
    scored = []
    for tau, table in sorted(tables.items()):
        policies = candidate_policies(table, max_width, budget)
        scored += [((tau, policy), outcome) for policy, outcome in zip(policies, replay_all(table, policies))]
    return scored


def _summary(tables: Mapping[float, Rollouts], chosen: tuple[tuple[float, Policy], Replay], rollouts_m: int
             ) -> ChosenPolicy:
    (tau, policy), outcome = chosen
    table = tables[tau]
    best, mean_seed = full_best_of(table, rollouts_m).delivered, table.full.mean(1)
    gain = _bootstrap({"gain": outcome.delivered - best}, lambda parts: {"gain": float(parts["gain"].mean())},
                      BOOTSTRAP, 0)["gain"]
    commit, best_gain = table.full_calls, float((best - mean_seed).mean())
    # Seeds that all score alike leave no gain to capture.
    capture = float((outcome.delivered - mean_seed).mean() / best_gain) if best_gain > 0 else float("nan")
    return ChosenPolicy(tau, policy, float(outcome.delivered.mean()), gain, capture,
                        float(outcome.calls.mean() + commit), float(outcome.worst.max() + commit),
                        rollouts_m * commit, len(table.full), table.seeds, float(outcome.previews.mean()),
                        table.preview_cost, float(outcome.worst_cost.max() + commit))


def weighing_previews(tables: Mapping[float, Rollouts], call_equivalents: float) -> dict[float, Rollouts]:
    """``tables`` with each scored preview costing ``call_equivalents`` calls (``previews.preview_call_equivalents``
    of the calibration): the chooser then fits calls and previews together in the budget."""
    return {tau: dataclasses.replace(table, preview_cost=call_equivalents) for tau, table in tables.items()}


def choose_within_budget(tables: Mapping[float, Rollouts], budget_rollouts: int, max_width: int | None = None,
                         runs: Callable[[Rollouts, Policy], bool] | None = None) -> ChosenPolicy:
    """The policy (tau, width, rounds on the x0 preview) with the best expected delivered score whose exploration
    and commit fit ``budget_rollouts`` full renders on every prompt; ``tables`` by tau
    (``Rollouts.from_records``), ``max_width`` the most candidates the search may draft, ``runs`` (where given)
    whether the search that runs a policy would run it as chosen (its tau's table, the policy)."""
    widest = _checked(tables, budget_rollouts, "budget_rollouts", max_width)
    commit = next(iter(tables.values())).full_calls
    budget = budget_rollouts * commit
    scored = [((tau, policy), outcome) for (tau, policy), outcome in _scored(tables, widest, budget - commit)
              if runs is None or runs(tables[tau], policy)]
    chosen = best_within(scored, commit, budget)
    return _summary(tables, chosen, budget_rollouts)


def fewest_calls(tables: Mapping[float, Rollouts], base_rollouts: int, target: float = 0.93,
                 max_width: int | None = None) -> ChosenPolicy:
    """The policy with the fewest expected calls that keeps ``target`` of full best-of-``base_rollouts``' gain
    over a single seed (the mean over prompts)."""
    widest = _checked(tables, base_rollouts, "base_rollouts", max_width)
    if not 0 < target <= 1:
        raise ValueError(f"capture target: got {target!r}; use a share of best-of-M's gain in (0, 1]")
    full = next(iter(tables.values()))
    mean_seed = full.full.mean(1)
    best_gain = float((full_best_of(full, base_rollouts).delivered - mean_seed).mean())
    if best_gain <= 0:
        raise ValueError("rollouts: full best-of-M gains nothing over one seed here, so no capture can be measured")
    # Widths up to what full best-of-M explores: a policy that computes more is not cheaper.
    chosen = cheapest_capturing(_scored(tables, widest, base_rollouts * full.full_calls), mean_seed, best_gain,
                                target)
    return _summary(tables, chosen, base_rollouts)

