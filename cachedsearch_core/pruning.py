"""Mid-trajectory pruning: every candidate runs to step p, is scored on a preview there, and only the best k
continue ("CachedSearch: Training-Free Cached Exploration for Test-Time Search in Video Diffusion",
Sec. "Composition with pruned search")."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class PruningPlan:
    """Stop all candidates after ``prune_step`` sampler steps, keep the ``keep`` best previews."""

    prune_step: int
    keep: int
    preview_frames: int = 4

    def check(self, num_candidates: int, steps: int, warmup_steps: int = 0, cooldown_steps: int = 0,
              video_frames: int | None = None) -> None:
        """Raise a ValueError naming the input when the plan cannot apply to this search."""
        if not warmup_steps < self.prune_step < steps - cooldown_steps:
            raise ValueError(
                f"prune_step: got {self.prune_step}; with {steps} steps, warmup {warmup_steps} and cooldown "
                f"{cooldown_steps} it must lie strictly between {warmup_steps} and {steps - cooldown_steps} "
                "(the cache skips only there, so pruning earlier or later saves nothing)"
            )
        if not 1 <= self.keep <= num_candidates:
            raise ValueError(
                f"keep: got {self.keep}; keep 1 to {num_candidates} of the {num_candidates} candidates "
                "(the report keeps 4 of 8)"
            )
        if self.preview_frames < 1 or (video_frames is not None and self.preview_frames > video_frames):
            limit = f"1 to {video_frames}" if video_frames is not None else "at least 1"
            raise ValueError(
                f"preview_frames: got {self.preview_frames}; the video has {video_frames} frames, use {limit} "
                "(the report previews 4)"
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
