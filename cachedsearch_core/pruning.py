"""Mid-trajectory pruning: every candidate runs to step p, is scored on a preview there, and only the best k
continue ("CachedSearch: Training-Free Cached Exploration for Test-Time Search in Video Diffusion",
Sec. "Composition with pruned search")."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .search import Draft


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
class PruningPlan:
    """Stop all candidates after ``prune_step`` sampler steps, keep the ``keep`` best previews.

    prune_fraction: set when the step was computed from this share of the steps, so errors name the input the
    artist set.
    """

    prune_step: int
    keep: int
    preview_frames: int = 4
    prune_fraction: float | None = None

    def _step_input(self, steps: int) -> str:
        """How an error names the prune step: the input it came from and its value."""
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
        window: the prune step lies inside a window or at a boundary between two stages."""
        boundaries = [window.last_step for window in windows[:-1]]
        named = self._step_input(windows[-1].last_step)
        if not (any(window.admits(self.prune_step) for window in windows) or self.prune_step in boundaries):
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
        if not 1 <= self.keep <= num_candidates:
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


def survivors(preview_scores: Sequence[float], keep: int) -> list[int]:
    """Indices of the ``keep`` best preview scores, in candidate order; ties go to the lower index."""
    ranked = sorted(range(len(preview_scores)), key=lambda index: (-float(preview_scores[index]), index))
    return sorted(ranked[:keep])


def preview_frame_indices(video_frames: int, preview_frames: int) -> list[int]:
    """``preview_frames`` frame indices spread evenly over the video, first and last included."""
    if preview_frames == 1:
        return [0]
    return [round(index * (video_frames - 1) / (preview_frames - 1)) for index in range(preview_frames)]


@dataclasses.dataclass(frozen=True)
class PrunedCandidate:
    """A candidate dropped at the prune step: its draft so far (what it cost) and its preview score."""

    draft: Draft
    preview_score: float


@dataclasses.dataclass(frozen=True)
class PruningOutcome:
    """What a pruned search did at its prune step: every candidate's preview score (seed order), who survived,
    what the dropped candidates cost and how long scoring the previews took."""

    prune_step: int
    steps: int
    seeds: tuple[int, ...]
    preview_scores: tuple[float, ...]
    survivor_indices: tuple[int, ...]
    pruned: tuple[PrunedCandidate, ...]
    preview_seconds: float = 0.0
    preview_frames: int = 0

    @property
    def pruned_seconds(self) -> float:
        return sum(candidate.draft.seconds for candidate in self.pruned)

    def report_lines(self) -> list[str]:
        """The pruning part of the search report: one line per candidate in seed order (its candidate number, seed
        and preview score), then the costs."""
        lines = [f"pruned at step {self.prune_step} of {self.steps}: kept {len(self.survivor_indices)} of "
                 f"{len(self.seeds)} by preview score ({self.preview_frames} frames of the x0 estimate each)"]
        pruned_by_seed = {candidate.draft.seed: candidate for candidate in self.pruned}
        for number, (seed, score) in enumerate(zip(self.seeds, self.preview_scores), start=1):
            dropped = pruned_by_seed.get(seed)
            if dropped is None:
                lines.append(f"  {number:>3}  seed {seed:>20}  preview {score:9.4f}  kept")
                continue
            draft = dropped.draft
            calls = draft.calls_computed + draft.calls_skipped
            lines.append(f"  {number:>3}  seed {seed:>20}  preview {score:9.4f}  pruned after {calls} calls "
                         f"({draft.calls_computed} computed), {draft.seconds:.2f} s")
        pruned_calls = sum(c.draft.calls_computed for c in self.pruned)
        lines.append(f"pruned candidates cost {self.pruned_seconds:.2f} s ({pruned_calls} computed calls); "
                     f"previews {self.preview_seconds:.2f} s")
        if not self.pruned:
            lines.append(f"keep {len(self.seeds)} of {len(self.seeds)}: pruning dropped nothing but paid "
                         f"{self.preview_seconds:.2f} s for previews; lower keep on the Pruning Plan, or disconnect it")
        return lines
