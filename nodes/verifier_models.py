"""The verifiers' models under ComfyUI: their folders in models/, and the weights ComfyUI's model management
loads for scoring and offloads again."""

from __future__ import annotations

import os

import comfy.model_management
import comfy.model_patcher
import folder_paths
import torch


VERIFIER_FOLDER = "image_reward"
CLIP_FOLDER = "clip_score"
VIDEO_SCORE_FOLDER = "video_score"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class ManagedVerifier:
    """A verifier whose weights ComfyUI's model management owns: they wait on the offload device, are loaded
    for scoring like any model (freeing VRAM from others if needed) and are offloaded again when something else
    needs the memory, so the judge never sits in VRAM during sampling unless there is room for it."""

    def __init__(self, verifier, module: torch.nn.Module, name: str):
        self.verifier = verifier
        self.name = name
        self.patcher = comfy.model_patcher.ModelPatcher(
            module, load_device=comfy.model_management.get_torch_device(), offload_device=offload_device())

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


def offload_device() -> torch.device:
    return comfy.model_management.unet_offload_device()


def default_dtype() -> torch.dtype:
    """bf16 where the model will run on a GPU (half the memory of fp32), fp32 on the CPU."""
    device = comfy.model_management.get_torch_device()
    return torch.float32 if comfy.model_management.is_device_cpu(device) else torch.bfloat16


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
