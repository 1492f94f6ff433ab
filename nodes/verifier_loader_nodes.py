"""The loader nodes of the verifiers: ImageReward, a CLIP score and VideoScore, strictly from local folders."""

from __future__ import annotations

import os

import folder_paths
from comfy_api.latest import io

from ..cachedsearch_core.clip_score import ClipScore
from ..cachedsearch_core.image_reward import TOKENIZER_FOLDER, ImageReward
from ..cachedsearch_core.video_score import VideoScore, expected_files_message
from .types import Verifier, VideoVerifier
from .verifier_models import (
    CLIP_FOLDER, DTYPES, VERIFIER_FOLDER, VIDEO_SCORE_FOLDER, ManagedVerifier, clip_model_folders, default_dtype,
    model_folders, offload_device,
)


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
                io.Combo.Input("dtype", options=list(DTYPES), default="fp32",
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
        model = ImageReward.from_files(path, device=offload_device(), dtype=DTYPES[dtype])
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
                io.Combo.Input("dtype", options=list(DTYPES), default="fp32", tooltip="Weights' precision."),
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
        model = ClipScore.from_folder(folder, device=offload_device(), dtype=DTYPES[dtype])
        return io.NodeOutput(ManagedVerifier(model, model, "ClipScore"))


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
                io.Combo.Input("dtype", options=["default", *DTYPES], default="default",
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
        model = VideoScore.from_folder(folder, dtype=DTYPES.get(dtype) or default_dtype())
        model.network.to(offload_device())
        return io.NodeOutput(ManagedVerifier(model, model.network, "VideoScore-v1.1"))
