from __future__ import annotations

import os

import comfy.model_management
import comfy.model_patcher
import comfy.utils
import folder_paths
import torch
from comfy_api.latest import io

from ..cachedsearch_core import Ranking
from ..cachedsearch_core.clip_score import ClipScore
from ..cachedsearch_core.combine import NORMALISATIONS, RANK_AVERAGE, VerifierCombination, combine_rankings
from ..cachedsearch_core.image_reward import TOKENIZER_FOLDER, ImageReward
from ..cachedsearch_core.judge import FrameJudge
from ..cachedsearch_core.panels import describe_verifier
from ..cachedsearch_core.video_score import (
    ASPECTS,
    AVERAGE,
    MAX_FRAMES,
    REPORT_FRAMES,
    VideoScore,
    expected_files_message,
)
from .panel_frames import panel_rows, save_panel_frames
from .candidates import pruned_rows
from .types import SHOW_RESULTS_WHEN_CACHED, Candidates, CombinedVerifier, RankingType, Verifier, VideoVerifier

VERIFIER_FOLDER = "image_reward"
CLIP_FOLDER = "clip_score"
VIDEO_SCORE_FOLDER = "video_score"
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _draft_inputs() -> list:
    """The inputs every verifier node takes: the decoded drafts, their candidates and the prompt."""
    return [
        io.Image.Input("images", tooltip="All drafts' frames as VAEDecode emits them: N x F frames."),
        Candidates.Input("candidates", tooltip="From the CachedSearch sampler that made the drafts."),
        io.String.Input("prompt", multiline=True, default="",
                        tooltip="The prompt the videos were made from (the same text as the encoder's)."),
    ]

class ManagedVerifier:
    """A verifier whose weights ComfyUI's model management owns: they wait on the offload device, are loaded
    for scoring like any model (freeing VRAM from others if needed) and are offloaded again when something else
    needs the memory, so the judge never sits in VRAM during sampling unless there is room for it."""

    def __init__(self, verifier, module: torch.nn.Module, name: str):
        self.verifier = verifier
        self.name = name
        self.patcher = comfy.model_patcher.ModelPatcher(
            module, load_device=comfy.model_management.get_torch_device(), offload_device=_offload_device())

    def loaded(self):
        # Whole: plain torch layers cannot stream their weights the way comfy.ops layers do in --lowvram.
        comfy.model_management.load_models_gpu([self.patcher], force_full_load=True)
        return self.verifier

    def score(self, prompt: str, frames: torch.Tensor) -> torch.Tensor:
        """Per-frame scores (ImageReward, CLIP score)."""
        return self.loaded().score(prompt, frames)

    def score_clip(self, prompt: str, frames: torch.Tensor) -> torch.Tensor:
        """Aspect scores of one clip (VideoScore)."""
        return self.loaded().score_clip(prompt, frames)


def _offload_device() -> torch.device:
    return comfy.model_management.unet_offload_device()


def register_model_folders() -> None:
    """models/image_reward, models/clip_score and models/video_score, also configurable in extra_model_paths.yaml."""
    for name, extensions in ((VERIFIER_FOLDER, {".pt", ".pth", ".safetensors"}), (CLIP_FOLDER, {".json"}),
                             (VIDEO_SCORE_FOLDER, {".json"})):
        # extra_model_paths.yaml may have registered the name already, without extensions or the default folder
        paths, known = folder_paths.folder_names_and_paths.get(name, ([], set()))
        default = os.path.join(folder_paths.models_dir, name)
        folder_paths.folder_names_and_paths[name] = (
            paths if default in paths else [default, *paths], set(known) | extensions
        )


def clip_model_folders() -> dict[str, str]:
    """Subfolders of models/clip_score that hold a saved transformers model (a config.json)."""
    return model_folders(CLIP_FOLDER)


def model_folders(kind: str) -> dict[str, str]:
    """Subfolders of models/<kind> that hold a config.json."""
    found = {}
    for root in folder_paths.get_folder_paths(kind):
        if os.path.isdir(root):
            for name in sorted(os.listdir(root)):
                if os.path.isfile(os.path.join(root, name, "config.json")):
                    found.setdefault(name, os.path.join(root, name))
    return found


def _expected_place() -> str:
    folders = folder_paths.get_folder_paths(VERIFIER_FOLDER)
    return (f"put ImageReward.pt (ImageReward-v1.0) into {folders[0]} and the bert-base-uncased tokenizer files "
            f"(vocab.txt, tokenizer_config.json) into {os.path.join(folders[0], TOKENIZER_FOLDER)}; "
            "scripts/download_image_reward.py fetches both on a machine that is online")


class LoadImageReward(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchLoadImageReward",
            display_name="CachedSearch Load ImageReward",
            category="CachedSearch",
            description="Loads the ImageReward-v1.0 verifier strictly from local files: the checkpoint from "
            "models/image_reward and the bert-base-uncased tokenizer folder next to it. Nothing is downloaded.",
            inputs=[
                io.Combo.Input("ckpt_name", options=folder_paths.get_filename_list(VERIFIER_FOLDER),
                               tooltip="ImageReward.pt in models/image_reward (446M parameters, ~1.8 GB)."),
                io.Combo.Input("dtype", options=list(_DTYPES), default="fp32",
                               tooltip="fp32 reproduces the official rewards; bf16/fp16 halve memory on a GPU."),
            ],
            outputs=[Verifier.Output(display_name="verifier", tooltip="For CachedSearch Verifier.")],
        )

    @classmethod
    def validate_inputs(cls, ckpt_name):
        if folder_paths.get_full_path(VERIFIER_FOLDER, ckpt_name) is None:
            return f"ckpt_name: {ckpt_name!r} is not in models/{VERIFIER_FOLDER}; {_expected_place()}"
        return True

    @classmethod
    def fingerprint_inputs(cls, ckpt_name, dtype):
        path = folder_paths.get_full_path(VERIFIER_FOLDER, ckpt_name)
        return (path, os.path.getmtime(path) if path else None, dtype)

    @classmethod
    def execute(cls, ckpt_name, dtype) -> io.NodeOutput:
        path = folder_paths.get_full_path(VERIFIER_FOLDER, ckpt_name)
        if path is None:
            raise ValueError(f"ckpt_name: {ckpt_name!r} not found; {_expected_place()}")
        model = ImageReward.from_files(path, device=_offload_device(), dtype=_DTYPES[dtype])
        return io.NodeOutput(ManagedVerifier(model, model, "ImageReward"))


class LoadClipVerifier(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchLoadClipVerifier",
            display_name="CachedSearch Load CLIP Verifier",
            category="CachedSearch",
            description="A second verifier: CLIP score (100 x cosine of frame and prompt) from a transformers CLIP "
            "folder in models/clip_score (what CLIPModel.save_pretrained writes, with its tokenizer). "
            "Nothing is downloaded.",
            inputs=[
                io.Combo.Input("model_folder", options=list(clip_model_folders()),
                               tooltip="A folder in models/clip_score, e.g. clip-vit-large-patch14."),
                io.Combo.Input("dtype", options=list(_DTYPES), default="fp32", tooltip="Weights' precision."),
            ],
            outputs=[Verifier.Output(display_name="verifier", tooltip="For CachedSearch Verifier.")],
        )

    @classmethod
    def validate_inputs(cls, model_folder):
        if model_folder not in clip_model_folders():
            places = ", ".join(folder_paths.get_folder_paths(CLIP_FOLDER))
            return (f"model_folder: {model_folder!r} is not a folder with a config.json in {places}; save a "
                    "transformers CLIP model and its tokenizer there")
        return True

    @classmethod
    def execute(cls, model_folder, dtype) -> io.NodeOutput:
        folder = clip_model_folders()[model_folder]
        model = ClipScore.from_folder(folder, device=_offload_device(), dtype=_DTYPES[dtype])
        return io.NodeOutput(ManagedVerifier(model, model, "ClipScore"))


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
    return _show_ranking(ranking, candidates, frames)


def _show_ranking(ranking, candidates, frames=None) -> io.NodeOutput:
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
             "cachedsearch_verifier": [describe_verifier(ranking.verifier)]}
    if candidates.pruning is not None:
        shown["cachedsearch_pruned"] = pruned_rows(candidates)
        shown["cachedsearch_pruning"] = [candidates.pruning.as_dict()]
    return io.NodeOutput(ranking, text, ui=shown)


def _default_dtype() -> torch.dtype:
    """bf16 where the model will run on a GPU (half the memory of fp32), fp32 on the CPU."""
    device = comfy.model_management.get_torch_device()
    return torch.float32 if comfy.model_management.is_device_cpu(device) else torch.bfloat16


def _video_score_place() -> str:
    root = folder_paths.get_folder_paths(VIDEO_SCORE_FOLDER)[0]
    return expected_files_message(os.path.join(root, "VideoScore-v1.1"))


class LoadVideoScore(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchLoadVideoScore",
            display_name="CachedSearch Load VideoScore",
            category="CachedSearch",
            description="Loads VideoScore-v1.1 (TIGER-Lab; Mantis-Idefics2-8B with a five-aspect regression head), "
            "a video-native verifier that watches the clip, strictly from a local folder in models/video_score "
            "(config, safetensors shards, processor files). Nothing is downloaded. About 8B parameters: 16 GB in "
            "bf16; ComfyUI loads it only while scoring.",
            inputs=[
                io.Combo.Input("model_folder", options=list(model_folders(VIDEO_SCORE_FOLDER)),
                               tooltip="A folder in models/video_score holding the VideoScore-v1.1 download, e.g. "
                               "VideoScore-v1.1 (scripts/download_video_score.py)."),
                io.Combo.Input("dtype", options=["default", *_DTYPES], default="default",
                               tooltip="default: bf16 on a GPU (as the model card runs it), fp32 on the CPU."),
            ],
            outputs=[VideoVerifier.Output(display_name="verifier", tooltip="For CachedSearch VideoScore Verifier.")],
        )

    @classmethod
    def validate_inputs(cls, model_folder):
        if model_folder not in model_folders(VIDEO_SCORE_FOLDER):
            return f"model_folder: {model_folder!r} is not a folder with a config.json in models/video_score; " \
                   f"{_video_score_place()}"
        return True

    @classmethod
    def fingerprint_inputs(cls, model_folder, dtype):
        folder = model_folders(VIDEO_SCORE_FOLDER).get(model_folder)
        return (folder, os.path.getmtime(folder) if folder else None, dtype)

    @classmethod
    def execute(cls, model_folder, dtype) -> io.NodeOutput:
        folder = model_folders(VIDEO_SCORE_FOLDER).get(model_folder)
        if folder is None:
            raise ValueError(f"model_folder: {model_folder!r} not found; {_video_score_place()}")
        model = VideoScore.from_folder(folder, dtype=_DTYPES.get(dtype) or _default_dtype())
        model.network.to(_offload_device())
        return io.NodeOutput(ManagedVerifier(model, model.network, "VideoScore-v1.1"))


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


class CombineScores(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchCombineScores",
            display_name="CachedSearch Combine Scores",
            category="CachedSearch",
            description="Ranks by several verifiers at once (e.g. ImageReward + VideoScore): each verifier's scores "
            "are normalised across the candidates, weighted and averaged. A guard against search gaming one "
            "verifier: a winner must look good to several judges. The table shows each verifier's column.",
            inputs=[
                Candidates.Input("candidates", tooltip="From the CachedSearch sampler whose drafts were ranked."),
                RankingType.Input("ranking_1", tooltip="A verifier's ranking of these candidates."),
                io.Float.Input("weight_1", default=1.0, min=0.0, max=100.0, step=0.1,
                               tooltip="Weight of ranking_1 (0 leaves it out)."),
                RankingType.Input("ranking_2", tooltip="Another verifier's ranking of the same candidates."),
                io.Float.Input("weight_2", default=1.0, min=0.0, max=100.0, step=0.1, tooltip="Weight of ranking_2."),
                io.Combo.Input("normalisation", options=list(NORMALISATIONS), default=RANK_AVERAGE,
                               tooltip="rank average (default): ranks scaled to [0, 1], robust to one verifier's "
                               "outliers. z-score: keeps margins, so a clear win counts more, but an outlier can "
                               "dominate."),
                RankingType.Input("ranking_3", optional=True, tooltip="Optional third ranking."),
                io.Float.Input("weight_3", default=1.0, min=0.0, max=100.0, step=0.1, optional=True,
                               tooltip="Weight of ranking_3."),
            ],
            outputs=[
                RankingType.Output(display_name="ranking", tooltip="The combined ranking, for Recommit."),
                io.String.Output(display_name="scores", tooltip="One line per candidate: combined and each verifier."),
            ],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def execute(cls, candidates, ranking_1, weight_1, ranking_2, weight_2, normalisation, ranking_3=None,
                weight_3=1.0) -> io.NodeOutput:
        pairs = [(ranking_1, weight_1), (ranking_2, weight_2)]
        if ranking_3 is not None:
            pairs.append((ranking_3, weight_3))
        for position, (ranking, _) in enumerate(pairs, start=1):
            if len(ranking.scores) != len(candidates):
                raise ValueError(f"ranking_{position}: has {len(ranking.scores)} scores but the search made "
                                 f"{len(candidates)} candidates; connect rankings of this sampler's drafts")
        combined = combine_rankings([ranking for ranking, _ in pairs], [weight for _, weight in pairs], normalisation)
        return _show_ranking(combined, candidates)


_NORMALISATION_TOOLTIP = ("rank average (default): ranks scaled to [0, 1], robust to one verifier's outliers. z-score: "
                          "keeps margins, so a clear win counts more, but an outlier can dominate.")


class CombineVerifiers(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        judge = [Verifier, VideoVerifier]
        return io.Schema(
            node_id="CachedSearchCombineVerifiers",
            display_name="CachedSearch Combine Verifiers",
            category="CachedSearch",
            description="Several verifiers as one judge for CachedSearch Calibrate, combined exactly as Combine "
            "Scores combines their rankings of a search (each verifier's scores normalised across the seeds, "
            "weighted and averaged): calibrate with the same verifiers, weights and normalisation your search's "
            "Combine Scores uses.",
            inputs=[
                io.MultiType.Input("verifier_1", types=judge, tooltip="From CachedSearch Load ImageReward, Load CLIP "
                                   "Verifier or Load VideoScore."),
                io.Float.Input("weight_1", default=1.0, min=0.0, max=100.0, step=0.1,
                               tooltip="Weight of verifier_1 (0 leaves it out), as weight_1 on Combine Scores."),
                io.MultiType.Input("verifier_2", types=judge, tooltip="Another verifier."),
                io.Float.Input("weight_2", default=1.0, min=0.0, max=100.0, step=0.1, tooltip="Weight of verifier_2."),
                io.Combo.Input("normalisation", options=list(NORMALISATIONS), default=RANK_AVERAGE,
                               tooltip=_NORMALISATION_TOOLTIP),
                io.MultiType.Input("verifier_3", types=judge, optional=True, tooltip="Optional third verifier."),
                io.Float.Input("weight_3", default=1.0, min=0.0, max=100.0, step=0.1, optional=True,
                               tooltip="Weight of verifier_3."),
            ],
            outputs=[CombinedVerifier.Output(display_name="verifier",
                                             tooltip="For CachedSearch Calibrate's verifier.")],
        )

    @classmethod
    def execute(cls, verifier_1, weight_1, verifier_2, weight_2, normalisation, verifier_3=None,
                weight_3=1.0) -> io.NodeOutput:
        pairs = [(verifier_1, weight_1), (verifier_2, weight_2)]
        if verifier_3 is not None:
            pairs.append((verifier_3, weight_3))
        return io.NodeOutput(VerifierCombination(tuple(verifier for verifier, _ in pairs),
                                                 tuple(weight for _, weight in pairs), normalisation))
