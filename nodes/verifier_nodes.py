"""The ranking nodes: a verifier's scores of every draft, and the ranking, text and table they show (Combine
Scores shows its ranking the same way)."""

from __future__ import annotations

import comfy.model_management
import comfy.utils
from comfy_api.latest import io

from ..cachedsearch_core import Ranking
from ..cachedsearch_core.judge import FrameJudge
from ..cachedsearch_core.panels import describe_verifier
from ..cachedsearch_core.video_score import ASPECTS, AVERAGE, MAX_FRAMES, REPORT_FRAMES
from .candidates import pruned_rows
from .packed_latent import carries_sound
from .panel_frames import panel_rows, save_panel_frames
from .types import SHOW_RESULTS_WHEN_CACHED, Candidates, RankingType, Verifier, VideoVerifier


def _draft_inputs() -> list:
    """The inputs every verifier node takes: the decoded drafts, their candidates and the prompt."""
    return [
        io.Image.Input("images", tooltip="All drafts' frames as VAEDecode emits them: N x F frames."),
        Candidates.Input("candidates", tooltip="From the CachedSearch sampler that made the drafts."),
        io.String.Input("prompt", multiline=True, default="",
                        tooltip="The prompt the videos were made from (the same text as the encoder's)."),
    ]


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
                *_draft_inputs(),
                Verifier.Input("verifier", tooltip="From CachedSearch Load ImageReward or Load CLIP Verifier."),
                io.Int.Input("frames_per_candidate", default=8, min=1, max=256,
                             tooltip="K frames scored per candidate (the report uses 8); more is slower."),
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


def show_ranking(ranking, candidates, frames=None) -> io.NodeOutput:
    """The ranking, its text and the GUI table: every candidate in seed order with score, rank and margin (pruned
    ones with their preview), what the verifier's score means, and ``frames`` (keyed by candidate number)."""
    lines = []
    for index, (number, seed, score) in enumerate(zip(candidates.candidate_numbers, candidates.seeds,
                                                      ranking.scores)):
        details = "".join(f", {name} {values[index]:.4f}" for name, values in ranking.columns)
        lines.append(f"{'*' if index == ranking.winner else ' '} candidate {number}, seed {seed}: {score:.4f}"
                     f"{details}")
    text = "\n".join(lines)
    shown = {"text": (text,), "cachedsearch_ranking": panel_rows(candidates, ranking, frames),
             "cachedsearch_verifier": [describe_verifier(ranking.verifier,
                                                         carries_sound(candidates.draft_latents))]}
    if candidates.pruning is not None:
        shown["cachedsearch_pruned"] = pruned_rows(candidates)
        shown["cachedsearch_pruning"] = [candidates.pruning.as_dict()]
    return io.NodeOutput(ranking, text, ui=shown)


DEFAULT_ASPECT_WEIGHTS = "1, 1, 1, 1, 1"


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
                *_draft_inputs(),
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
