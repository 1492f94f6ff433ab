"""Budget "auto" (issue 51 items 3 and 4): the search policy a budget of M full renders buys on a calibrated setup,
and the run-time ledger that keeps a search within the budget whatever the cache skips this time.

What the chooser (``policy_chooser``) needs is remembered by Calibrate in the calibration memory with the setup's
result (``PolicyTables``), not read from the saved rollouts: those are capped and may be evicted, the memory is not.
A calibration is used only for the setup it measured (the memory's key: model file, steps, sampler, scheduler) and
only when the verifier, the preview frames K and the cache's warmup and cooldown are the search's too; otherwise the
search keeps today's rule and says, in one line, what differs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from .auto_ledger import AutoLedger
from .cost import SearchCost
from .cost_formulas import ExtraWork
from .policy_chooser import ChosenPolicy, choose_within_budget, weighing_previews
from .previews import RolloutPreviews, cached_rollout, preview_call_equivalents
from .search_policy import FullRollout, Policy, Rollouts

# The memory entry's field holding a calibration's tables for the chooser.
POLICY_FIELD = "policy"
NO_CALIBRATION = ("auto: no calibration of this setup is remembered, so the budget drafts as today; a Calibrate run "
                  "on this model, steps, sampler and scheduler buys a wider search")


@dataclasses.dataclass(frozen=True)
class PolicySetup:
    """What a calibration's policy tables hold for beyond the memory's key (what the previews and the skips depend
    on): the verifier that scored them, the frames K each preview scored, the cache's warmup and cooldown."""

    verifier: str | None
    preview_frames: int | None
    warmup_steps: int
    cooldown_steps: int

    @property
    def prunes(self) -> bool:
        """A search's setup scores previews (a Pruning Plan is connected); without, verifier and frames are None."""
        return self.verifier is not None

    def difference(self, search: PolicySetup) -> str | None:
        """The first part in which ``search`` differs from this calibration, as a phrase, or None (the verifier
        and frames only where ``search`` prunes)."""
        for field, name in (("verifier", "verifier"), ("preview_frames", "preview frames"),
                            ("warmup_steps", "warmup steps"), ("cooldown_steps", "cooldown steps")):
            calibrated, used = getattr(self, field), getattr(search, field)
            if used is not None and calibrated != used:
                return f"calibrated with {name} {calibrated}, this search uses {name} {used}"
        return None


def policy_record(setup: PolicySetup, steps: int, full: Sequence[Sequence[tuple[float, float, float]]],
                  cached: Mapping[float, Sequence[Sequence[tuple[float, int, RolloutPreviews | None]]]]
                  ) -> dict | None:
    """The memory's record of a calibration for the chooser: ``full`` [prompt][seed] (score, calls, sampling
    seconds: what weighs a preview's seconds in calls, ``previews.preview_call_equivalents``), ``cached`` by
    tau [prompt][seed] (final score, computed calls, previews). None where a cached rollout has no previews (an
    in-process calibration records none): the chooser could not prune on them."""
    taus = {}
    for tau, table in cached.items():
        rows = []
        for row in table:
            if any(previews is None for _, _, previews in row):
                return None
            rows.append([{"score": score, "computed": computed, "previews": previews.record()}
                         for score, computed, previews in row])
        taus[f"{tau:g}"] = rows
    return {**dataclasses.asdict(setup), "steps": steps, "full": [[list(rollout) for rollout in row] for row in full],
            "cached": taus}


@dataclasses.dataclass(frozen=True)
class WithPolicy:
    """A calibration remembered with its tables for the chooser (``policy_record``; None: without)."""

    calibration: object
    policy: dict | None

    def memory_entry(self) -> dict:
        entry = self.calibration.memory_entry()
        return entry if self.policy is None else {**entry, POLICY_FIELD: self.policy}


@dataclasses.dataclass(frozen=True)
class PolicyTables:
    """A remembered calibration's tables for the chooser (``Rollouts`` by tau) and what they hold for."""

    setup: PolicySetup
    tables: Mapping[float, Rollouts]

    @classmethod
    def from_record(cls, record: dict) -> PolicyTables:
        """Raises ValueError when ``record`` is not a complete ``policy_record``."""
        try:
            setup = PolicySetup(str(record["verifier"]), int(record["preview_frames"]), int(record["warmup_steps"]),
                                int(record["cooldown_steps"]))
            steps = int(record["steps"])
            full = [FullRollout(prompt, seed, score, calls) for prompt, row in enumerate(record["full"])
                    for seed, (score, calls, _) in enumerate(row)]
            previews = {(tau, prompt, seed): RolloutPreviews.from_record(rollout["previews"])
                        for tau, table in record["cached"].items() for prompt, row in enumerate(table)
                        for seed, rollout in enumerate(row)}
            cached = [cached_rollout(prompt, seed, float(tau), record["cached"][tau][prompt][seed]["score"],
                                     record["cached"][tau][prompt][seed]["computed"], steps, recorded)
                      for (tau, prompt, seed), recorded in previews.items()]
            seconds = [(seconds, calls) for row in record["full"] for _, calls, seconds in row]
            tables = Rollouts.from_records(full, cached)
            # A scored preview's GPU time in calls, so the choice fits calls and previews in the budget.
            if any(recorded.steps for recorded in previews.values()):
                tables = weighing_previews(tables, preview_call_equivalents(previews.values(), seconds))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"the remembered calibration has no usable policy tables ({error})") from None
        return cls(setup, tables)

    @property
    def prompts(self) -> int:
        return len(next(iter(self.tables.values())).full)

    @property
    def seeds(self) -> int:
        return next(iter(self.tables.values())).seeds


@dataclasses.dataclass(frozen=True)
class AutoChoice:
    """Budget "auto"'s decision: the chosen policy (None: today's rule) and the line the report and panel show."""

    chosen: ChosenPolicy | None
    line: str
    tables: Rollouts | None = None

    def as_dict(self) -> dict:
        if self.chosen is None:
            return {"used": False, "line": self.line}
        chosen = self.chosen
        return {"used": True, "line": self.line, "width": chosen.width, "rounds": [list(r) for r in chosen.rounds],
                "schedule": chosen.policy.schedule, "tau": chosen.tau, "prompts": chosen.prompts,
                "seeds": chosen.seeds, "expected_gain": [_number(chosen.gain.value), _number(chosen.gain.low),
                                                         _number(chosen.gain.high)],
                "expected_calls": chosen.calls, "expected_cost": chosen.cost, "preview_cost": chosen.preview_cost,
                "budget_calls": chosen.budget_calls}


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def choose_auto(entry: dict | None, setup: PolicySetup, wired_tau: float | None, budget_rollouts: int,
                max_width: int, key_difference: str | None = None) -> AutoChoice:
    """The policy for a budget of ``budget_rollouts`` full renders from the memory's ``entry`` of the search's
    setup, restricted to the search's own cache tau ``wired_tau`` (None: the search's cache is not ours, so no
    calibrated tau applies); ``key_difference``: what differs from the nearest remembered setup when ``entry`` is
    None."""
    if entry is None:
        return AutoChoice(None, f"auto: {key_difference}; the budget drafts as today" if key_difference
                          else NO_CALIBRATION)
    if POLICY_FIELD not in entry:
        return AutoChoice(None, "auto: the remembered calibration of this setup has no previews (calibrate through "
                          "the server, or again with this version); the budget drafts as today")
    try:
        tables = PolicyTables.from_record(entry[POLICY_FIELD])
    except ValueError as error:
        return AutoChoice(None, f"auto: {error}; the budget drafts as today")
    differs = tables.setup.difference(setup)
    if differs is not None:
        return AutoChoice(None, f"auto: {differs}; the calibration is not used and the budget drafts as today")
    taus = sorted(tables.tables)
    tau = next((t for t in taus if wired_tau is not None and math.isclose(t, wired_tau, abs_tol=1e-9)), None)
    if tau is None:
        shown = "no cache of ours" if wired_tau is None else f"tau {wired_tau:g}"
        return AutoChoice(None, f"auto: calibrated at tau {', '.join(f'{t:g}' for t in taus)}, this search's cache "
                          f"uses {shown}; the budget drafts as today")
    table = tables.tables[tau] if setup.prunes else without_previews(tables.tables[tau])
    try:
        chosen = choose_within_budget({tau: table}, budget_rollouts, max_width,
                                      lambda table, policy: runs_as_chosen(table, policy, budget_rollouts))
    except ValueError as error:
        return AutoChoice(None, f"auto: {error}; the budget drafts as today")
    prompts = f"{tables.prompts} prompt{'s' if tables.prompts > 1 else ''}"
    line = (f"auto: from the calibration of this setup ({prompts} x {tables.seeds} seeds, tau {tau:g}): "
            f"N = {chosen.width}" + (f", prune {chosen.policy.schedule}" if chosen.rounds else ", no pruning") +
            f"; expected verifier score {chosen.gain.value:+.3f} over full best-of-{budget_rollouts}'s (95 % "
            f"interval {chosen.gain.low:+.3f} to {chosen.gain.high:+.3f}) for {chosen.cost:.0f} of "
            f"{chosen.budget_calls:.0f} calls" +
            (f" ({chosen.calls:.0f} computed, previews worth {chosen.cost - chosen.calls:.1f})"
             if chosen.preview_cost and chosen.previews else ""))
    return AutoChoice(chosen, line, table)


def auto_ledger(table: Rollouts, rounds: Sequence[tuple[int, int]], budget_rollouts: int) -> AutoLedger:
    """The run-time ledger of a search pruning at ``rounds`` ((step, keep), ...) on ``table``'s calibration, within
    ``budget_rollouts`` full renders less the commit's calls."""
    steps = [step for step, _ in rounds]
    return AutoLedger((budget_rollouts - 1) * table.full_calls, table.full_calls, table.steps, steps,
                      [keep for _, keep in rounds], phase_calls(table, steps), table.preview_cost)


def runs_as_chosen(table: Rollouts, policy: Policy, budget_rollouts: int) -> bool:
    """Whether a search running ``policy`` drafts its whole width on a prompt whose cache skips as calibrated. The
    ledger reserves one candidate's every remaining call and preview, so that a pruned search always delivers one
    whatever the cache skips; a policy that fits the budget on the calibration's calls but not beside that reserve
    would be narrowed at run time, so it is not chosen. A policy without rounds drafts under today's ledger, which
    its calls fit."""
    if not policy.rounds:
        return True
    ledger = auto_ledger(table, [(prune.step, prune.keep) for prune in policy.rounds], budget_rollouts)
    return ledger.planned(policy.width) <= ledger.allowance


def without_previews(table: Rollouts) -> Rollouts:
    """``table`` with no preview scored, so the chooser prunes nowhere and only chooses the width."""
    return dataclasses.replace(table, preview_cost=0.0, previews={kind: np.full_like(scores, np.nan)
                                                                  for kind, scores in table.previews.items()})


def phase_calls(tables: Rollouts, round_steps: Sequence[int]) -> tuple[float, ...]:
    """Per phase (to the first round's step, between rounds, from the last round to the end), a candidate's mean
    computed calls in it on the calibration."""
    bounds = (0, *round_steps, tables.steps)
    return tuple(float(tables.computed[..., start:end].sum(-1).mean()) for start, end in zip(bounds, bounds[1:]))


@dataclasses.dataclass(frozen=True)
class AutoOutcome:
    """What a Budget "auto" pruned search bought and spent (the search's ``budget`` record, in transformer calls):
    the choice, the width it drafted, the exploration calls its ledger charged (``spent``: computed now or read back
    as charged when computed; ``wasted``: of those, the drafts stopped and candidates cut, in no finished draft's
    record), the previews' call-equivalents charged (``preview_spent``: their GPU time in calls, where the choice
    weighed them) and why it narrowed (``notes``)."""

    choice: AutoChoice
    rollouts: int
    full_calls: float
    width: int
    spent: int
    wasted: int
    notes: tuple[str, ...]
    preview_spent: float = 0.0

    @property
    def charged(self) -> float:
        return self.spent + self.preview_spent

    @property
    def budget(self) -> float:
        return self.rollouts * self.full_calls

    def extra_work(self) -> ExtraWork:
        return ExtraWork(self.wasted)

    def measured(self, cost: SearchCost) -> tuple[float, float] | None:
        """The commit's and the whole search's measured transformer calls (``BudgetOutcome.measured``)."""
        return (cost.commit_calls, cost.total_calls) if cost.commit_ran else None

    def lines(self, search_cost: SearchCost | None = None) -> list[str]:
        lines = [self.choice.line, *(f"auto: {note}" for note in self.notes),
                 f"auto: exploration charged {self.spent} calls{self._previews_text()} + commit "
                 f"{self.full_calls:.0f} = {self.charged + self.full_calls:.0f} of full best-of-{self.rollouts}'s "
                 f"{self.budget:.0f}"]
        if search_cost is not None and search_cost.commit_ran:
            lines.append(f"budget: measured {search_cost.total_calls} transformer calls with the commit, "
                         f"{100 * search_cost.total_calls / self.budget:.1f} % of full best-of-{self.rollouts}'s "
                         f"{self.budget:.0f}")
        return lines

    def _previews_text(self) -> str:
        return f" + previews worth {self.preview_spent:.1f}" if self.preview_spent else ""

    def as_dict(self) -> dict:
        """The budget panel's fields (as ``BudgetOutcome.as_dict``) and ``auto``: the choice and what it spent."""
        return {"unit": "transformer calls", "rollouts": self.rollouts, "width": self.width,
                "max_candidates": self.choice.chosen.width, "full_cost": self.full_calls, "budget": self.budget,
                "recommit_cost": self.full_calls, "commit_free": False,
                "predicted_total": self.charged + self.full_calls, "deterministic": True, "pruned": True,
                "auto": {**self.choice.as_dict(), "spent_calls": self.spent, "spent_previews": self.preview_spent,
                         "narrowed": list(self.notes)}}
