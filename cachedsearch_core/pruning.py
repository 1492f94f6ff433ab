"""Mid-trajectory pruning: every candidate runs to step p, is scored on a preview there, and only the best k
continue ("CachedSearch: Training-Free Cached Exploration for Test-Time Search in Video Diffusion",
Sec. "Composition with pruned search"). A schedule prunes in several rounds: at each round's step the candidates
still running are scored and only that round's keep continue."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from fractions import Fraction

from .cost_formulas import ExtraWork
from .judge import spread_frame_indices
from .records import Draft

# The frames a preview decodes and scores unless a Pruning Plan asks for others (the report previews 4). Calibrate
# scores its recorded previews on these too (``default_preview_frames``), so that Budget "auto" applies to a search
# whose Pruning Plan keeps its default.
PREVIEW_FRAMES = 4

def pruned_search_steps(num_candidates: int, steps: int, rounds: Sequence[tuple[int, int]]) -> int:
    """Sampler steps a pruned search of ``num_candidates`` runs, with prune ``rounds`` of (step p_r, keep k_r):
    every candidate to p_1, then each round's survivors on to the next round's step, the last round's to the end,
    nothing recomputed: N p_1 + sum_r k_r (p_(r+1) - p_r), with p_(R+1) = T. Times the transformer calls per step it
    is the calls the search asks for, exact (one round: N p + k (T - p)); a step cache computes fewer of them."""
    total, reaching, previous = 0, num_candidates, 0
    for step, keep in rounds:
        total += reaching * (step - previous)
        reaching, previous = keep, step
    return total + reaching * (steps - previous)


@dataclasses.dataclass(frozen=True)
class CacheWindow:
    """A sampling stage's steps ``first_step`` to ``first_step + steps`` of the whole trajectory and its cache's
    always-computed warmup and cooldown, counted within the stage."""

    first_step: int
    steps: int
    warmup_steps: int = 0
    cooldown_steps: int = 0
    name: str = ""

    @property
    def last_step(self) -> int:
        return self.first_step + self.steps

    @property
    def has_skipping_step(self) -> bool:
        """Whether any step lies strictly between the end of warmup and the start of cooldown."""
        return self.last_step - self.cooldown_steps - (self.first_step + self.warmup_steps) > 1

    def admits(self, step: int) -> bool:
        """A prune step strictly between the end of warmup and the start of cooldown, where the cache skips."""
        return self.first_step + self.warmup_steps < step < self.last_step - self.cooldown_steps

    def describe(self) -> str:
        return (f"{self.name} steps {self.first_step}-{self.last_step} (warmup {self.warmup_steps}, cooldown "
                f"{self.cooldown_steps})")


@dataclasses.dataclass(frozen=True)
class PruneRound:
    """A round after the first: at trajectory step ``step`` the candidates still running are scored on a preview
    and the ``keep`` best continue. ``label``: the schedule's text of this round, so errors quote what was typed."""

    step: int
    keep: int
    label: str = ""


@dataclasses.dataclass(frozen=True)
class PruningPlan:
    """Stop all candidates after ``prune_step`` sampler steps, keep the ``keep`` best previews; with
    ``later_rounds``, prune the survivors again at each later round's step.

    prune_fraction: set when the step was computed from this share of the steps, so errors name the input the
    artist set.
    schedule: set when the rounds came from the Pruning Plan's schedule text (``PruningSchedule``), so errors name
    that input and quote the round; ``first_label`` is the first round's text there.
    """

    prune_step: int
    keep: int
    preview_frames: int = PREVIEW_FRAMES
    prune_fraction: float | None = None
    later_rounds: tuple[PruneRound, ...] = ()
    schedule: str | None = None
    first_label: str = ""

    @property
    def rounds(self) -> tuple[PruneRound, ...]:
        """Every round in order, the first one included."""
        return (PruneRound(self.prune_step, self.keep, self.first_label), *self.later_rounds)

    @property
    def round_steps(self) -> tuple[int, ...]:
        return tuple(prune_round.step for prune_round in self.rounds)

    @property
    def final_keep(self) -> int:
        """The candidates that run to the end."""
        return self.rounds[-1].keep

    def search_steps(self, num_candidates: int, steps: int) -> int:
        """Sampler steps the pruned search of ``num_candidates`` runs (``pruned_search_steps``)."""
        return pruned_search_steps(num_candidates, steps, [(r.step, r.keep) for r in self.rounds])

    def _step_input(self, steps: int, index: int = 0) -> str:
        """How an error names round ``index``'s step: the input it came from and its value."""
        if self.schedule is not None:
            prune_round = self.rounds[index]
            return f"schedule: round {index + 1} ({prune_round.label!r}) prunes at step {prune_round.step} of {steps}"
        if self.prune_fraction is None:
            return f"prune_step: got {self.prune_step}"
        return f"prune_fraction: got {self.prune_fraction:g}, which prunes at step {self.prune_step} of {steps}"

    def check(self, num_candidates: int, steps: int, warmup_steps: int = 0, cooldown_steps: int = 0,
              video_frames: int | None = None) -> None:
        """Raise a ValueError naming the input when the plan cannot apply to this search."""
        self.check_stages(num_candidates, [CacheWindow(0, steps, warmup_steps, cooldown_steps)], video_frames)

    def check_stages(self, num_candidates: int, windows: Sequence[CacheWindow], video_frames: int | None = None
                     ) -> None:
        """``check`` for a trajectory of several stages (e.g. Wan 2.2 A14B's two experts), each with its own cache
        window: every round's step lies inside a window or at a boundary between two stages, the steps rise from
        round to round and each round keeps fewer than the one before."""
        steps = windows[-1].last_step
        for index, prune_round in enumerate(self.rounds):
            if index and prune_round.step <= self.rounds[index - 1].step:
                raise ValueError(
                    f"{self._step_input(steps, index)}, not after round {index}'s step "
                    f"{self.rounds[index - 1].step}; list the rounds in the order they prune, each at a later step "
                    "(for example \"20%:4, 40%:2\")"
                )
            self._check_step(windows, index)
        if self.schedule is not None:
            self._check_schedule_keeps(num_candidates)
        elif not 1 <= self.keep <= num_candidates:
            raise ValueError(
                f"keep: got {self.keep}; keep 1 to {num_candidates} of the {num_candidates} candidates "
                "(the report keeps 4 of 8)"
            )
        if self.preview_frames < 1 or (video_frames is not None and self.preview_frames > video_frames):
            limit = f"1 to {video_frames}" if video_frames is not None else "at least 1"
            raise ValueError(
                f"preview_frames: got {self.preview_frames}; a preview can show {video_frames} frames of this video "
                f"(one per latent frame), use {limit} (the report previews 4)"
            )

    def _check_schedule_keeps(self, num_candidates: int) -> None:
        running = num_candidates
        for index, prune_round in enumerate(self.rounds):
            named = f"schedule: round {index + 1} ({prune_round.label!r}) keeps {prune_round.keep}"
            if prune_round.keep < 1:
                raise ValueError(f"{named}; every round keeps at least 1 candidate")
            if index == 0 and prune_round.keep > running:
                raise ValueError(f"{named} of the {running} candidates; keep at most {running} (raise "
                                 "num_candidates or keep fewer)")
            if index and prune_round.keep >= running:
                raise ValueError(
                    f"{named}, but {running} candidates reach it (round {index} kept {running}); each round keeps "
                    f"fewer than the round before, so keep at most {running - 1} there or drop the round"
                )
            running = prune_round.keep

    def _check_step(self, windows: Sequence[CacheWindow], index: int) -> None:
        step = self.rounds[index].step
        boundaries = [window.last_step for window in windows[:-1]]
        named = self._step_input(windows[-1].last_step, index)
        if any(window.admits(step) for window in windows) or step in boundaries:
            return
        if len(windows) == 1:
            (window,) = windows
            if not window.has_skipping_step:
                raise ValueError(
                    f"{named}; with {window.steps} steps, warmup "
                    f"{window.warmup_steps} and cooldown {window.cooldown_steps} the cache never skips a step, "
                    "so pruning saves nothing: lower warmup_steps and cooldown_steps on CachedSearch Apply "
                    "Cache, raise steps, or disconnect the pruning plan"
                )
            raise ValueError(
                f"{named}; with {window.steps} steps, warmup {window.warmup_steps} and "
                f"cooldown {window.cooldown_steps} it must lie strictly between {window.warmup_steps} and "
                f"{window.steps - window.cooldown_steps} (the cache skips only there, so pruning earlier or "
                "later saves nothing)"
            )
        allowed = [f"{w.first_step + w.warmup_steps + 1} to {w.last_step - w.cooldown_steps - 1}"
                   for w in windows if w.has_skipping_step]
        raise ValueError(
            f"{named}; the stages run {'; '.join(w.describe() for w in windows)}, so "
            f"use {' or '.join(allowed + [str(step) for step in boundaries])} (inside a stage between its cache "
            "warmup and cooldown, or where one stage hands over to the next)"
        )


_ROUND = re.compile(r"^\s*(?P<at>\d+(?:\.\d+)?)\s*(?P<percent>%?)\s*:\s*(?P<keep>\d+(?:\s*/\s*\d+)?)\s*$")
SCHEDULE_EXAMPLE = "\"20%:4, 40%:2\" (at 20 % of the steps keep 4, at 40 % keep 2) or \"20%:1/2, 40%:1/2, 60%:1/2\""


@dataclasses.dataclass(frozen=True)
class ScheduleRound:
    """One round as typed: where (a share of the steps, or a step) and how many continue (a count, or a share of
    the candidates that reach the round)."""

    label: str
    share: Fraction | None  # of the search's steps; None when ``step`` is given
    step: int | None
    keep_count: int | None
    keep_share: Fraction | None  # of the candidates reaching the round; None when ``keep_count`` is given

    def at_step(self, steps: int) -> int:
        return self.step if self.step is not None else round(self.share * steps)

    def keep(self, reaching: int) -> int:
        """The count kept of ``reaching`` candidates (a share rounds up, so at least 1 stays)."""
        return self.keep_count if self.keep_count is not None else math.ceil(self.keep_share * reaching)


@dataclasses.dataclass(frozen=True)
class PruningSchedule:
    """Prune rounds as an artist types them on the Pruning Plan's ``schedule``: comma-separated ``where:keep``
    pairs. ``where`` is a share of the steps ("20%") or a step ("10"); ``keep`` a count ("4") or a share of the
    candidates that reach the round ("1/2": halve the field). Parsed when made, so a typo or rounds out of order are
    refused before any sampling; the rest is checked against a search by ``PruningPlan.check_stages``."""

    text: str
    rounds: tuple[ScheduleRound, ...] = dataclasses.field(init=False)

    def __post_init__(self):
        parsed = []
        for label in (part.strip() for part in self.text.split(",")):
            match = _ROUND.match(label)
            if match is None:
                raise ValueError(f"schedule: cannot read {label!r} in {self.text!r}; write rounds as where:keep "
                                 f"separated by commas, e.g. {SCHEDULE_EXAMPLE}")
            at, keep = match["at"], re.sub(r"\s", "", match["keep"])
            if match["percent"]:
                share, step = Fraction(at) / 100, None
                if not 0 < share < 1:
                    raise ValueError(f"schedule: round {len(parsed) + 1} ({label!r}) prunes at {at} %; use a share "
                                     "between 0 and 100 % of the steps")
            elif "." in at:
                raise ValueError(f"schedule: round {len(parsed) + 1} ({label!r}): a step is a whole number; write a "
                                 "share of the steps with %, e.g. 20%")
            else:
                share, step = None, int(at)
            if "/" in keep:
                numerator, denominator = (int(part) for part in keep.split("/"))
                if not 0 < numerator < denominator:
                    raise ValueError(f"schedule: round {len(parsed) + 1} ({label!r}) keeps {keep} of the field; a "
                                     "share kept lies between 0 and 1 (1/2 halves it)")
                parsed.append(ScheduleRound(label, share, step, None, Fraction(numerator, denominator)))
            else:
                parsed.append(ScheduleRound(label, share, step, int(keep), None))
        for number, (before, now) in enumerate(zip(parsed, parsed[1:]), start=2):  # their order needs no steps
            (at_before, said_before), (at, said) = ((r.share, f"{float(100 * r.share):g} %") if r.step is None
                                                    else (r.step, f"step {r.step}") for r in (before, now))
            if (before.step is None) == (now.step is None) and at <= at_before:
                raise ValueError(f"schedule: round {number} ({now.label!r}) prunes at {said}, not after round "
                                 f"{number - 1}'s {said_before}; list the rounds in the order they prune, each at a "
                                 "later step (for example \"20%:4, 40%:2\")")
        object.__setattr__(self, "rounds", tuple(parsed))

    def plan(self, num_candidates: int, steps: int, preview_frames: int = PREVIEW_FRAMES) -> PruningPlan:
        """The rounds at this search's steps and width (not yet checked: ``PruningPlan.check_stages``)."""
        resolved, reaching = [], num_candidates
        for scheduled in self.rounds:
            keep = scheduled.keep(reaching)
            resolved.append(PruneRound(scheduled.at_step(steps), keep, scheduled.label))
            reaching = keep
        first, *later = resolved
        return PruningPlan(first.step, first.keep, preview_frames, later_rounds=tuple(later), schedule=self.text,
                           first_label=first.label)


def survivors(preview_scores: Sequence[float], keep: int) -> list[int]:
    """Indices of the ``keep`` best preview scores, in candidate order; ties go to the lower index."""
    ranked = sorted(range(len(preview_scores)), key=lambda index: (-float(preview_scores[index]), index))
    return sorted(ranked[:keep])


def default_preview_frames(video_frames: int) -> int:
    """The frames a preview of a ``video_frames``-frame (latent) video shows at the Pruning Plan's default
    (``PREVIEW_FRAMES``), every frame of a shorter one (where a plan must ask for fewer): the frames Calibrate scores
    its recorded previews on."""
    return min(PREVIEW_FRAMES, video_frames)


def preview_frame_indices(video_frames: int, preview_frames: int) -> list[int]:
    """The ``preview_frames`` (latent) frames a preview decodes: the judge's (``judge.spread_frame_indices``)."""
    return spread_frame_indices(video_frames, preview_frames)


@dataclasses.dataclass(frozen=True)
class PrunedCandidate:
    """A candidate dropped at the prune step: its draft so far (what it cost) and its preview score."""

    draft: Draft
    preview_score: float


@dataclasses.dataclass(frozen=True)
class RoundRecord:
    """One prune round: its step, the candidates scored there (indices in seed order), their preview scores and the
    candidates kept."""

    step: int
    scored: tuple[int, ...]
    preview_scores: tuple[float, ...]
    kept: tuple[int, ...]

    @property
    def dropped(self) -> tuple[int, ...]:
        return tuple(index for index in self.scored if index not in self.kept)


@dataclasses.dataclass(frozen=True)
class PruningOutcome:
    """What a pruned search did at its prune steps: every candidate's first-round preview score (seed order), who
    survived every round, what the dropped candidates cost and how long scoring the previews took. ``prune_step``,
    ``preview_scores`` are the first round's; ``later_rounds`` records the rounds after it."""

    prune_step: int
    steps: int
    seeds: tuple[int, ...]
    preview_scores: tuple[float, ...]
    survivor_indices: tuple[int, ...]
    pruned: tuple[PrunedCandidate, ...]
    preview_seconds: float = 0.0
    preview_frames: int = 0
    later_rounds: tuple[RoundRecord, ...] = ()

    @property
    def rounds(self) -> tuple[RoundRecord, ...]:
        """Every round in order, the first one (every candidate scored) included."""
        first_kept = self.later_rounds[0].scored if self.later_rounds else self.survivor_indices
        first = RoundRecord(self.prune_step, tuple(range(len(self.seeds))), self.preview_scores, first_kept)
        return (first, *self.later_rounds)

    @property
    def round_steps(self) -> tuple[int, ...]:
        return tuple(record.step for record in self.rounds)

    @property
    def dropped_work(self) -> ExtraWork:
        """What the dropped candidates' drafts computed and took."""
        return ExtraWork.of_drafts([candidate.draft for candidate in self.pruned])

    def extra_work(self) -> ExtraWork:
        """What the search paid for besides its finished drafts: the dropped drafts and scoring the previews."""
        return ExtraWork.of_drafts([candidate.draft for candidate in self.pruned], self.preview_seconds)

    def dropped_at(self, index: int) -> int | None:
        """The step of the round that dropped candidate ``index`` (seed order); None for a survivor."""
        return next((record.step for record in self.rounds if index in record.dropped), None)

    def round_scores(self, index: int) -> list[tuple[int, float]]:
        """Candidate ``index``'s preview score at each round it reached: (step, score) pairs in order."""
        return [(record.step, record.preview_scores[record.scored.index(index)]) for record in self.rounds
                if index in record.scored]

    def deciding_score(self, index: int) -> float:
        """The preview score of the last round candidate ``index`` was scored in: the one that dropped it, or for a
        survivor the last round's."""
        return self.round_scores(index)[-1][1]

    def report_lines(self) -> list[str]:
        """The pruning part of the search report: one line per candidate in seed order (its candidate number, seed
        and preview score at each round it reached), then the costs."""
        rounds = self.rounds
        if len(rounds) == 1:
            heading = (f"pruned at step {self.prune_step} of {self.steps}: kept {len(self.survivor_indices)} of "
                       f"{len(self.seeds)} by preview score ({self.preview_frames} frames of the x0 estimate each)")
        else:
            fields = ", ".join(f"step {record.step}: {len(record.kept)} of {len(record.scored)}" for record in rounds)
            heading = (f"pruned in {len(rounds)} rounds of {self.steps} steps, kept {fields} by preview score "
                       f"({self.preview_frames} frames of the x0 estimate each)")
        lines = [heading]
        pruned_by_seed = {candidate.draft.seed: candidate for candidate in self.pruned}
        for number, seed in enumerate(self.seeds, start=1):
            index = number - 1
            scores = "".join(f"  preview {score:9.4f}" for _, score in self.round_scores(index))
            dropped = pruned_by_seed.get(seed)
            if dropped is None:
                lines.append(f"  {number:>3}  seed {seed:>20}{scores}  kept")
                continue
            draft = dropped.draft
            at = f" at step {self.dropped_at(index)}" if len(rounds) > 1 else ""
            lines.append(f"  {number:>3}  seed {seed:>20}{scores}  pruned{at} after {draft.calls} calls "
                         f"({draft.calls_computed} computed), {draft.seconds:.2f} s")
        dropped_work = self.dropped_work
        lines.append(f"pruned candidates cost {dropped_work.seconds:.2f} s ({dropped_work.calls} computed calls); "
                     f"previews {self.preview_seconds:.2f} s")
        if not self.pruned:
            lines.append(f"keep {len(self.seeds)} of {len(self.seeds)}: pruning dropped nothing but paid "
                         f"{self.preview_seconds:.2f} s for previews; lower keep on the Pruning Plan, or disconnect it")
        return lines

    def as_dict(self) -> dict:
        """The rounds for the panels (JSON-ready): each round's step, who was scored (candidate numbers), their
        preview scores, who was kept and who dropped."""
        return {"steps": self.steps, "num_candidates": len(self.seeds), "preview_frames": self.preview_frames,
                "rounds": [{"round": number, "step": record.step,
                            "scored": [index + 1 for index in record.scored],
                            "preview_scores": list(record.preview_scores),
                            "kept": [index + 1 for index in record.kept],
                            "dropped": [index + 1 for index in record.dropped]}
                           for number, record in enumerate(self.rounds, start=1)]}
