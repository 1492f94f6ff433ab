"""Decoded frames for the result panels: a few small temp images per candidate (ComfyUI's temp folder, which the
frontend reads through /view), from frames the graph decodes anyway or, on request, from the drafts."""

from __future__ import annotations

import comfy.model_management
import torch
from comfy_api.latest import io, ui

from ..cachedsearch_core.panels import spread_evenly, thumbnails
from .candidates import draft_rows

FILENAME_PREFIX = "cachedsearch_panel"


def save_panel_frames(frames: torch.Tensor) -> list[dict]:
    """At most ``PANEL_FRAMES`` evenly spaced of ``frames`` [F, H, W, 3], shrunk to thumbnails and saved as temp
    PNGs; returns their /view references ({"filename", "subfolder", "type"})."""
    picked = thumbnails(frames[spread_evenly(range(frames.shape[0]))])
    saved = ui.ImageSaveHelper.save_images(picked, FILENAME_PREFIX, io.FolderType.temp, None, compress_level=1)
    return [dict(result) for result in saved]


def decode_draft_frames(vae, candidates, announce=None) -> dict[int, list[dict]]:
    """The sampler's optional preview_vae: each draft decoded as VAEDecode decodes it, one draft at a time (Cancel
    works between them), its panel frames saved; keyed by candidate number."""
    frames = {}
    numbers = candidates.candidate_numbers
    for index, number in enumerate(numbers):
        comfy.model_management.throw_exception_if_processing_interrupted()
        if announce is not None:
            announce(f"decoding previews {index + 1} / {len(numbers)} (candidate {number})")
        images = vae.decode(candidates.draft_latents[index : index + 1])
        frames[number] = save_panel_frames(images.reshape(-1, *images.shape[-3:]))
    return frames


def panel_rows(candidates, ranking=None, frames: dict[int, list[dict]] | None = None) -> list[dict]:
    """``draft_rows`` with decoded frames: a finished draft's from ``frames`` (keyed by candidate number), a pruned
    candidate's from its Pruning Plan preview; every candidate of a pruned search also gets its preview's frames as
    "preview_frames"."""
    previews = {index + 1: list(saved) for index, saved in enumerate(candidates.pruning_previews)}
    frames = frames or {}
    rows = []
    for row in draft_rows(candidates, ranking):
        number = row["candidate"]
        if number in previews:
            row["preview_frames"] = previews[number]
        shown = previews.get(number) if row.get("pruned") else frames.get(number)
        if shown:
            row["frames"] = shown
        rows.append(row)
    return rows
