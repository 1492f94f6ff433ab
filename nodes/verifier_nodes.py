"""The verifier nodes: a verifier's scores of every draft, shown as a ranking (``ranking_panel``)."""

from __future__ import annotations

import comfy.model_management
import comfy.utils
from comfy_api.latest import io

from ..cachedsearch_core import Ranking
from ..cachedsearch_core.judge import FrameJudge
from ..cachedsearch_core.video_score import MAX_FRAMES, REPORT_FRAMES
from .panel_frames import save_panel_frames
from .ranking_panel import show_ranking
from .types import SHOW_RESULTS_WHEN_CACHED, RankingType, Verifier, VideoVerifier
from .verifier_inputs import draft_inputs, frames_per_candidate_input, video_score_ranking_inputs


class ScoreCandidates(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchVerifier",
            display_name="CachedSearch Verifier",
            category="CachedSearch",
            description="Ranks the drafts: the verifier's reward (ImageReward or CLIP score) averaged over K "
            "uniformly spaced frames of each candidate (first and last included). Connect the VAEDecode of the "
            "sampler's drafts (N x F frames).",
            inputs=[
                *draft_inputs(),
                Verifier.Input("verifier", tooltip="From CachedSearch Load ImageReward or Load CLIP Verifier."),
                frames_per_candidate_input("K frames scored per candidate (the report uses 8); more is slower."),
            ],
            outputs=[
                RankingType.Output(display_name="ranking", tooltip="Scores and winner for Recommit."),
                io.String.Output(display_name="scores", tooltip="One line per candidate: seed and mean reward."),
            ],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def execute(cls, images, candidates, prompt, verifier, frames_per_candidate) -> io.NodeOutput:
        return _ranking_output(images, candidates, FrameJudge(verifier, prompt, frames_per_candidate))


def _frames_per_candidate(images, candidates) -> int:
    count = len(candidates)
    total = images.shape[0]
    if total % count:
        raise ValueError(
            f"images: got {total} frames for {count} candidates, which does not divide evenly; connect the "
            "VAEDecode of this sampler's drafts output (N x F frames)"
        )
    return total // count


def _ranking_output(images, candidates, judge: FrameJudge) -> io.NodeOutput:
    """Scores every candidate's frames with ``judge``, with a progress bar and Cancel between candidates, and
    builds the ranking, its text and the GUI table, whose rows show the frames the verifier read."""
    count = len(candidates)
    per_candidate = _frames_per_candidate(images, candidates)
    scored_frames = judge.frame_indices(per_candidate)
    progress = comfy.utils.ProgressBar(count)
    scores, columns = [], {}
    for index in range(count):
        comfy.model_management.throw_exception_if_processing_interrupted()
        value, extra = judge.score(images[index * per_candidate : (index + 1) * per_candidate])
        scores.append(value)
        for name, column_value in extra.items():
            columns.setdefault(name, []).append(column_value)
        progress.update(1)
    ranking = Ranking(tuple(scores), verifier=judge.label, columns=tuple(columns.items()))
    frames = {number: save_panel_frames(images[[index * per_candidate + pick for pick in scored_frames]])
              for index, number in enumerate(candidates.candidate_numbers)}
    return show_ranking(ranking, candidates, frames)


class ScoreVideos(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchVideoVerifier",
            display_name="CachedSearch VideoScore Verifier",
            category="CachedSearch",
            description="Ranks the drafts with VideoScore, which watches each candidate as a clip (max_frames "
            "uniformly strided frames) and scores five aspects on [1, 4]. The table shows all five; the ranking uses "
            "their average (the report's choice), one aspect, or a weighted mean. Connect the VAEDecode of the "
            "sampler's drafts (N x F frames).",
            inputs=[
                *draft_inputs(),
                VideoVerifier.Input("verifier", tooltip="From CachedSearch Load VideoScore."),
                io.Int.Input("max_frames", default=REPORT_FRAMES, min=1, max=MAX_FRAMES,
                             tooltip="Frames the judge reads per candidate (all of them if the clip is shorter). "
                             f"The report uses {REPORT_FRAMES}; VideoScore-v1.1 reads up to {MAX_FRAMES}. Cost grows "
                             "with the count (64 tokens per frame)."),
                *video_score_ranking_inputs(),
            ],
            outputs=[
                RankingType.Output(display_name="ranking", tooltip="Scores and winner for Recommit or Combine Scores."),
                io.String.Output(display_name="scores", tooltip="One line per candidate: seed, score and aspects."),
            ],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def execute(cls, images, candidates, prompt, verifier, max_frames, rank_by, aspect_weights) -> io.NodeOutput:
        return _ranking_output(images, candidates, FrameJudge(verifier, prompt, max_frames, rank_by,
                                                                   aspect_weights))
