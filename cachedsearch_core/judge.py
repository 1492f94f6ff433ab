"""Judging one video's decoded frames: which frames a verifier reads and how its output becomes one score.

Every place that scores frames goes through ``FrameJudge``: the Verifier and VideoScore Verifier nodes (a draft),
Calibrate (a calibration rollout) and the Pruning Plan (a preview), so a calibration and a pruning preview judge
exactly as the search's ranking does. An image verifier (ImageReward, CLIP score) scores K frames spread over the
clip (``spread_frame_indices``) one by one and averages them; VideoScore watches up to K frames as one clip, taken at
the stride its model card feeds it (``video_score.sample_frame_indices``: the model's input contract, not a choice
of ours), and scores five aspects, which ``rank_by`` turns into one number ("CachedSearch: Training-Free Cached
Exploration for Test-Time Search in Video Diffusion", Sec. 3.2).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from .video_score import ASPECTS, AVERAGE, AspectWeights, VideoScore, sample_frame_indices


def spread_frame_indices(frame_count: int, count: int) -> list[int]:
    """``count`` frames of a ``frame_count``-frame clip spread evenly, first and last included (all of them when
    there are no more): the one rule for "K frames of a clip", used by the image verifiers' scoring, the pruning
    previews, the panels' rows and the benches.

    Why this rule: it is the one ImageReward's 8-frame scores (the ranking's) were measured with, so no score or
    ranking moves; first and last are both judged, and one frame is the middle one, the most representative of a
    clip. Positions round half up (floor(x + 0.5)), the same on every platform; for 8 or 4 frames no position is
    ever a half, so the panels' and the previews' former round() picked the same frames.
    """
    if frame_count <= count:
        return list(range(frame_count))
    if count == 1:
        return [frame_count // 2]
    return [math.floor(index * (frame_count - 1) / (count - 1) + 0.5) for index in range(count)]


def watches_clips(verifier) -> bool:
    """A verifier that scores a whole clip (VideoScore), not frame by frame; ``verifier`` may be the bare model or a
    holder of it (its ``verifier`` attribute), as the loader nodes hand it on."""
    return isinstance(getattr(verifier, "verifier", verifier), VideoScore)


@dataclasses.dataclass(frozen=True)
class FrameJudge:
    """One verifier judging one video's frames against ``prompt``.

    frames: K, the frames an image verifier averages, or the most a clip verifier reads (its max_frames).
    rank_by / aspect_weights: how a clip verifier's five aspects make the score (as on the VideoScore Verifier);
    ignored by an image verifier.
    """

    verifier: object
    prompt: str
    frames: int
    rank_by: str = AVERAGE
    aspect_weights: str = ""

    def __post_init__(self):
        if self.frames < 1:
            raise ValueError(f"frames: got {self.frames}; score at least one frame per video")
        AspectWeights.parse(self.rank_by, self.aspect_weights)  # a bad rank_by or weights fails before any frame

    @property
    def weights(self) -> AspectWeights:
        return AspectWeights.parse(self.rank_by, self.aspect_weights)

    @property
    def watches_clips(self) -> bool:
        return watches_clips(self.verifier)

    @property
    def label(self) -> str:
        """What the ranking is called: the verifier's name, or for a clip verifier how its aspects rank."""
        if not self.watches_clips:
            return self.verifier.name
        return "VideoScore" if self.rank_by == AVERAGE else f"VideoScore ({self.rank_by})"

    def frame_indices(self, frame_count: int) -> list[int]:
        """The frames of a ``frame_count``-frame video this verifier reads."""
        if self.watches_clips:
            return sample_frame_indices(frame_count, self.frames)
        return spread_frame_indices(frame_count, self.frames)

    def score(self, frames: torch.Tensor) -> tuple[float, dict[str, float]]:
        """The video's score and the named values shown beside it (a clip verifier's five aspects), from all its
        decoded frames [F, H, W, 3]."""
        picked = frames[self.frame_indices(frames.shape[0])]
        if self.watches_clips:
            aspects = self.verifier.score_clip(self.prompt, picked)
            return self.weights.combine(aspects).item(), dict(zip(ASPECTS, aspects.tolist(), strict=True))
        return self.verifier.score(self.prompt, picked).mean().item(), {}
