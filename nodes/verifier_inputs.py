"""The inputs the verifier nodes share with the nodes that judge as they do: the drafts a verifier reads, and how
VideoScore's five aspects make one score (Calibrate repeats those so a calibration judges as the search does)."""

from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core.video_score import ASPECTS, AVERAGE
from .types import Candidates

DEFAULT_ASPECT_WEIGHTS = "1, 1, 1, 1, 1"


def draft_inputs() -> list:
    """The inputs every verifier node takes: the decoded drafts, their candidates and the prompt."""
    return [
        io.Image.Input("images", tooltip="All drafts' frames as VAEDecode emits them: N x F frames."),
        Candidates.Input("candidates", tooltip="From the CachedSearch sampler that made the drafts."),
        io.String.Input("prompt", multiline=True, default="",
                        tooltip="The prompt the videos were made from (the same text as the encoder's)."),
    ]


def video_score_ranking_inputs(**options) -> list:
    """How VideoScore's five aspects make one score: the VideoScore Verifier's inputs, which Calibrate repeats so a
    calibration judges as the search does."""
    return [
        io.Combo.Input("rank_by", options=[AVERAGE, *ASPECTS, "weighted"], default=AVERAGE, **options,
                       tooltip="Which score ranks: the mean of the five aspects (the report's choice), one "
                       "aspect, or 'weighted' with aspect_weights."),
        io.String.Input("aspect_weights", default=DEFAULT_ASPECT_WEIGHTS, **options,
                        tooltip="For rank_by = weighted: five non-negative numbers in the order visual "
                        "quality, temporal consistency, dynamic degree, text-to-video alignment, factual "
                        "consistency."),
    ]


def frames_per_candidate_input(tooltip: str) -> io.Int.Input:
    """K, the frames a verifier reads per candidate: the Verifier's widget and Calibrate's, one range for both."""
    return io.Int.Input("frames_per_candidate", default=8, min=1, max=256, tooltip=tooltip)
