"""The run-time ledger of a Budget "auto" pruned search: every computed transformer call is charged as it happens
(and, where the choice weighed them, every scored preview at its calls' worth of GPU time), and none is allowed that
could take exploration and the full-compute commit past M full renders, whatever the cache skips on this prompt
(issue 51 items 3 and 6).

The chosen policy drafts N seeds to the first round's step and continues the best at each round. Three rules keep
it within the budget:

- Drafting (to the first round's step) stops before a call that would leave less than the rest needs: the
  calibrated continuation of the kept candidates, scaled by how much more this prompt's drafts computed than the
  calibration's did, and never less than one candidate's every remaining call and preview (so one always reaches
  the end).
- At each round, the keep shrinks to what the expected rest still affords (at least one).
- After a round, the best candidate (the anchor) continues first and is never refused: its every remaining call and
  preview is reserved. Any other candidate is cut before a call that would eat into that reserve (with the preview
  its step would be scored by).
"""

from __future__ import annotations

from collections.abc import Sequence

from .budget import BudgetSpent


class AutoLedger:
    """What a pruned search spent against ``allowance`` (M full renders less the commit's calls): ``calls``, the
    computed transformer calls, and ``spent``, those and ``preview_cost`` call-equivalents per scored preview
    (``Rollouts.preview_cost``; 0: previews not weighed).

    full_calls: one full rollout's calls (T steps); round_steps, keeps: the chosen rounds; phase_calls: per phase
    (``auto_policy.phase_calls``), a candidate's calibrated mean computed calls."""

    def __init__(self, allowance: float, full_calls: float, steps: int, round_steps: Sequence[int],
                 keeps: Sequence[int], phase_calls: Sequence[float], preview_cost: float = 0.0):
        if len(phase_calls) != len(round_steps) + 1 or len(keeps) != len(round_steps) or not round_steps:
            raise ValueError("auto ledger: give one keep per round and one phase per round plus the end")
        self.allowance, self.per_step, self.steps = float(allowance), full_calls / steps, steps
        self.round_steps, self.keeps, self.phase_calls = tuple(round_steps), list(keeps), tuple(phase_calls)
        self.preview_cost = float(preview_cost)
        self.spent, self.calls, self.previews = 0.0, 0, 0
        self.drafted: list[int] = []  # each finished draft's computed calls to the first round's step
        self._current = 0
        self._reserve = 0.0  # the anchor's remaining calls and previews, every call counted, while others continue
        self.wasted = 0  # calls of drafts stopped and candidates cut: spent, but in no finished draft's record
        self.notes: list[str] = []

    def worst_after(self, round_index: int) -> float:
        """One candidate's every call from round ``round_index``'s step to the end, and its later rounds' previews."""
        later_rounds = len(self.round_steps) - 1 - round_index
        return (self.steps - self.round_steps[round_index]) * self.per_step + later_rounds * self.preview_cost

    def skip_ratio(self) -> float:
        """How much more (> 1) or less this prompt's drafts computed to the first round's step than calibrated."""
        if not self.drafted or self.phase_calls[0] <= 0:
            return 1.0
        return sum(self.drafted) / len(self.drafted) / self.phase_calls[0]

    def expected_rest(self, round_index: int, keep: int) -> float:
        """The calibrated calls after round ``round_index`` with ``keep`` kept there (later keeps at most that),
        scaled to this prompt (``skip_ratio``), and the later rounds' previews; never less than one candidate's
        (``worst_after``)."""
        reaching, calls, previews = keep, 0.0, 0
        for index in range(round_index, len(self.round_steps)):
            if index > round_index:
                previews += reaching  # scored at round ``index``
                reaching = min(reaching, self.keeps[index])
            calls += reaching * self.phase_calls[index + 1]
        return max(calls * self.skip_ratio() + previews * self.preview_cost, self.worst_after(round_index))

    def planned(self, width: int) -> float:
        """What drafting ``width`` candidates and finishing the first round's keep needs when this prompt's cache
        skips as calibrated: the sum ``draft_call`` holds to the allowance at the last draft's last call. A policy
        whose ``planned`` passes the allowance is narrowed at run time even on a calibrated prompt, so the chooser
        does not buy it (``auto_policy.runs_as_chosen``)."""
        return width * (self.phase_calls[0] + self.preview_cost) + self.expected_rest(0, min(self.keeps[0], width))

    def draft_call(self) -> None:
        """Before a computed call of a draft to the first round's step: raises ``BudgetSpent`` (stop drafting) when
        it, the draft's preview and what the first round's keep needs to finish would not fit."""
        reaching = min(self.keeps[0], len(self.drafted) + 1)
        if self.spent + 1 + self.preview_cost + self.expected_rest(0, reaching) > self.allowance:
            raise BudgetSpent
        self._charge_call()

    def _charge_call(self) -> None:
        self.spent += 1
        self.calls += 1
        self._current += 1

    def _charge_preview(self) -> None:
        self.spent += self.preview_cost
        self.previews += 1

    def start_candidate(self) -> None:
        self._current = 0

    def draft_finished(self) -> None:
        """The draft reached the first round's step: its preview is charged (its calls reserved it; one that
        computed none is checked here, and raises ``BudgetSpent`` where it does not fit)."""
        reaching = min(self.keeps[0], len(self.drafted) + 1)
        if self.spent + self.preview_cost + self.expected_rest(0, reaching) > self.allowance:
            raise BudgetSpent
        self.drafted.append(self._current)
        self._charge_preview()

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

    def phase_finished(self, anchor: bool, round_index: int | None) -> None:
        """A candidate (``anchor``: the last round's best) ran to round ``round_index``'s step (None: to the end):
        its preview there is charged, or ``BudgetSpent`` raised (cut it) where another than the anchor's does not
        fit; the anchor's remaining calls and previews are reserved."""
        if round_index is not None:
            # Reserved by its calls; a candidate that computed none on the way is checked here.
            if not anchor and self.spent + self.preview_cost + self._reserve > self.allowance:
                raise BudgetSpent
            self._charge_preview()
        if anchor:
            self._reserve = 0.0 if round_index is None else self.worst_after(round_index)

    def call(self, anchor: bool, to_round: bool) -> None:
        """Before a computed call after the first round: the anchor's always fits (reserved); another's raises
        ``BudgetSpent`` (cut it) when it, and the preview its phase ends with (``to_round``), would eat into the
        anchor's reserve."""
        preview = self.preview_cost if to_round else 0.0
        if not anchor and self.spent + 1 + preview + self._reserve > self.allowance:
            raise BudgetSpent
        self._charge_call()

    def cut(self, seed: int, step: int) -> None:
        """The candidate in progress was cut: its calls since its last round stay spent."""
        self.wasted += self._current
        self.notes.append(f"seed {seed} cut after step {step}: the budget could not pay its next call")
