"""The run-time ledger of a Budget "auto" pruned search: every computed transformer call is charged as it happens,
and none is allowed that could take exploration and the full-compute commit past M full renders, whatever the
cache skips on this prompt (issue 51 item 3).

The chosen policy drafts N seeds to the first round's step and continues the best at each round. Three rules keep
it within the budget:

- Drafting (to the first round's step) stops before a call that would leave less than the rest needs: the
  calibrated continuation of the kept candidates, scaled by how much more this prompt's drafts computed than the
  calibration's did, and never less than one candidate's every remaining call (so one always reaches the end).
- At each round, the keep shrinks to what the expected rest still affords (at least one).
- After a round, the best candidate (the anchor) continues first and is never refused: its every remaining call is
  reserved. Any other candidate is cut before a call that would eat into that reserve.
"""

from __future__ import annotations

from collections.abc import Sequence

from .budget import BudgetSpent


class AutoLedger:
    """Computed calls spent by a pruned search against ``allowance`` (M full renders less the commit's calls).

    full_calls: one full rollout's calls (T steps); round_steps, keeps: the chosen rounds; phase_calls: per phase
    (``auto_policy.phase_calls``), a candidate's calibrated mean computed calls."""

    def __init__(self, allowance: float, full_calls: float, steps: int, round_steps: Sequence[int],
                 keeps: Sequence[int], phase_calls: Sequence[float]):
        if len(phase_calls) != len(round_steps) + 1 or len(keeps) != len(round_steps) or not round_steps:
            raise ValueError("auto ledger: give one keep per round and one phase per round plus the end")
        self.allowance, self.per_step, self.steps = float(allowance), full_calls / steps, steps
        self.round_steps, self.keeps, self.phase_calls = tuple(round_steps), list(keeps), tuple(phase_calls)
        self.spent = 0
        self.drafted: list[int] = []  # each finished draft's computed calls to the first round's step
        self._current = 0
        self._reserve = 0.0  # the anchor's remaining calls, every one counted, while others continue
        self.wasted = 0  # calls of drafts stopped and candidates cut: spent, but in no finished draft's record
        self.notes: list[str] = []

    def worst_after(self, round_index: int) -> float:
        """One candidate's every call from round ``round_index``'s step to the end."""
        return (self.steps - self.round_steps[round_index]) * self.per_step

    def skip_ratio(self) -> float:
        """How much more (> 1) or less this prompt's drafts computed to the first round's step than calibrated."""
        if not self.drafted or self.phase_calls[0] <= 0:
            return 1.0
        return sum(self.drafted) / len(self.drafted) / self.phase_calls[0]

    def expected_rest(self, round_index: int, keep: int) -> float:
        """The calibrated calls after round ``round_index`` with ``keep`` kept there (later keeps at most that),
        scaled to this prompt (``skip_ratio``), never less than one candidate's every call to the end."""
        reaching, rest = keep, 0.0
        for index in range(round_index, len(self.round_steps)):
            reaching = min(reaching, self.keeps[index]) if index > round_index else reaching
            rest += reaching * self.phase_calls[index + 1]
        return max(rest * self.skip_ratio(), self.worst_after(round_index))

    def draft_call(self) -> None:
        """Before a computed call of a draft to the first round's step: raises ``BudgetSpent`` (stop drafting) when
        it would leave less than the first round's keep needs to finish."""
        reaching = min(self.keeps[0], len(self.drafted) + 1)
        if self.spent + 1 + self.expected_rest(0, reaching) > self.allowance:
            raise BudgetSpent
        self.spent += 1
        self._current += 1

    def start_candidate(self) -> None:
        self._current = 0

    def draft_finished(self) -> None:
        self.drafted.append(self._current)

    def drafting_stopped(self, planned: int) -> None:
        """The draft in progress was stopped: its calls stay spent; the search is narrowed to the finished ones."""
        self.notes.append(
            f"narrowed to N = {len(self.drafted)} of {planned}: this prompt's drafts computed "
            f"{self.skip_ratio():.2f}x the calibrated calls to step {self.round_steps[0]}, so the planned width no "
            "longer fits")
        self.wasted += self._current

    def keep_at(self, round_index: int, scored: int) -> int:
        """The keep at round ``round_index`` among ``scored`` candidates: the planned one, or fewer (at least one)
        when the expected rest no longer fits what is left."""
        planned = min(self.keeps[round_index], scored)
        keep = planned
        while keep > 1 and self.spent + self.expected_rest(round_index, keep) > self.allowance:
            keep -= 1
        if keep < planned:
            self.notes.append(f"kept {keep} instead of {planned} at step {self.round_steps[round_index]}: this "
                              "prompt's cache computed more than calibrated")
        self.keeps[round_index] = keep
        return keep

    def anchor_reached(self, round_index: int | None) -> None:
        """The anchor has run to the step of round ``round_index`` (None: to the end): reserve what it has left."""
        self._reserve = 0.0 if round_index is None else self.worst_after(round_index)

    def call(self, anchor: bool) -> None:
        """Before a computed call after the first round: the anchor's always fits (reserved); another's raises
        ``BudgetSpent`` (cut it) when it would eat into the anchor's reserve."""
        if not anchor and self.spent + 1 + self._reserve > self.allowance:
            raise BudgetSpent
        self.spent += 1
        self._current += 1

    def cut(self, seed: int, step: int) -> None:
        """The candidate in progress was cut: its calls since its last round stay spent."""
        self.wasted += self._current
        self.notes.append(f"seed {seed} cut after step {step}: the budget could not pay its next call")
