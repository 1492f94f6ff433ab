from __future__ import annotations

import os

import comfy.model_management
import comfy.utils
import folder_paths
import torch
from comfy_api.latest import io, ui

from ..cachedsearch_core import Ranking
from ..cachedsearch_core.clip_score import ClipScore
from ..cachedsearch_core.image_reward import TOKENIZER_FOLDER, ImageReward, frame_indices
from .search import draft_rows
from .search_nodes import Candidates, RankingType
from .ui_results import SHOW_RESULTS_WHEN_CACHED

VERIFIER_FOLDER = "image_reward"
CLIP_FOLDER = "clip_score"
Verifier = io.Custom("CACHEDSEARCH_VERIFIER")
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def register_model_folders() -> None:
    """models/image_reward and models/clip_score, also configurable in extra_model_paths.yaml."""
    for name, extensions in ((VERIFIER_FOLDER, {".pt", ".pth", ".safetensors"}), (CLIP_FOLDER, {".json"})):
        # extra_model_paths.yaml may have registered the name already, without extensions or the default folder
        paths, known = folder_paths.folder_names_and_paths.get(name, ([], set()))
        default = os.path.join(folder_paths.models_dir, name)
        folder_paths.folder_names_and_paths[name] = (
            paths if default in paths else [default, *paths], set(known) | extensions
        )


def clip_model_folders() -> dict[str, str]:
    """Subfolders of models/clip_score that hold a saved transformers model (a config.json)."""
    found = {}
    for root in folder_paths.get_folder_paths(CLIP_FOLDER):
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
        device = comfy.model_management.get_torch_device()
        return io.NodeOutput(ImageReward.from_files(path, device=device, dtype=_DTYPES[dtype]))


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
        device = comfy.model_management.get_torch_device()
        return io.NodeOutput(ClipScore.from_folder(folder, device=device, dtype=_DTYPES[dtype]))


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
                io.Image.Input("images", tooltip="All drafts' frames as VAEDecode emits them: N x F frames."),
                Candidates.Input("candidates", tooltip="From the CachedSearch sampler that made the drafts."),
                io.String.Input("prompt", multiline=True, default="",
                                tooltip="The prompt the videos were made from (the same text as the encoder's)."),
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
        count = len(candidates)
        total = images.shape[0]
        if total % count:
            raise ValueError(
                f"images: got {total} frames for {count} candidates, which does not divide evenly; connect the "
                "VAEDecode of this sampler's drafts output (N x F frames)"
            )
        per_candidate = total // count
        picks = frame_indices(per_candidate, frames_per_candidate)
        progress = comfy.utils.ProgressBar(count)
        scores = []
        for index in range(count):
            comfy.model_management.throw_exception_if_processing_interrupted()
            frames = images[[index * per_candidate + pick for pick in picks]]
            scores.append(verifier.score(prompt, frames).mean().item())
            progress.update(1)
        ranking = Ranking(tuple(scores), verifier=type(verifier).__name__)
        text = "\n".join(
            f"{'*' if index == ranking.winner else ' '} candidate {index + 1}, seed {seed}: {score:.4f}"
            for index, (seed, score) in enumerate(zip(candidates.seeds, scores))
        )
        middle_frames = images[[index * per_candidate + per_candidate // 2 for index in range(count)]]
        preview = ui.PreviewImage(middle_frames, cls=cls).as_dict()
        return io.NodeOutput(ranking, text, ui={**preview, "text": (text,),
                                                "cachedsearch_ranking": draft_rows(candidates, ranking)})
