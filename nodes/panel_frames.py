"""The result panels' rows of a search's candidates (``panel_rows``; a pruned search's fields, ``pruning_panel``)
and their decoded frames: a few small images per candidate, from frames the graph decodes anyway or, on request,
from the drafts. The frontend reads them through /view.

They are saved under ComfyUI's output folder (``PANEL_FOLDER``), each named by a digest of its pixels: ComfyUI
empties its temp folder when it starts and then reuses the same names, so a panel kept in a saved workflow or an open
tab would show another draft's frame after a restart. A name that is a digest of its content never names another
picture; a frame deleted since shows as missing, never as a different one.

The folder is kept under ``PANEL_FOLDER_MAX_BYTES``: saving frames deletes the least recently saved ones beyond it
(a frame saved again counts as new), so searches never fill the artist's output folder; an old panel whose frames
were deleted says so."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io as byte_io
import logging
import os
import pathlib

import comfy.model_management
import folder_paths
import numpy as np
import torch
from PIL import Image

from ..cachedsearch_core.panels import candidate_rows, spread_evenly, thumbnails
from ..cachedsearch_core.safe_files import write_atomically
from .packed_latent import parts

PANEL_FOLDER = "cachedsearch_panels"  # under ComfyUI's output folder, which it never empties
DIGEST_CHARACTERS = 24  # 96 bits of SHA-256: two different frames never share a name in practice
# A frame is at most 256 px a side, some 50-150 kB as PNG: 512 MiB keeps the frames of several hundred searches.
PANEL_FOLDER_MAX_BYTES = 512 * 1024**2


def _saved_frame(pixels: np.ndarray, folder: pathlib.Path) -> dict:
    """``pixels`` [H, W, 3] uint8 saved as ``<digest>.png`` (kept when a frame of that digest is already there);
    its /view reference."""
    digest = hashlib.sha256(f"{pixels.shape}".encode() + pixels.tobytes()).hexdigest()[:DIGEST_CHARACTERS]
    path = folder / f"{digest}.png"
    try:
        os.utime(path)  # saved again: the newest, the last to be trimmed
    except FileNotFoundError:
        encoded = byte_io.BytesIO()
        Image.fromarray(pixels).save(encoded, format="PNG", compress_level=1)
        write_atomically(path, encoded.getvalue())
    return {"filename": path.name, "subfolder": PANEL_FOLDER, "type": "output"}


def _pictures(frames: torch.Tensor) -> torch.Tensor | None:
    """``frames`` [F, H, W, C] as colour pictures [F, H, W, 3]: grey (C = 1) in three equal channels, colour with
    alpha (C = 4) without it (a thumbnail on the panel has no use for transparency); None for frames of any other
    channel count, which are not pictures (a VAE stand-in that hands over latent channels, as the ball-and-spot
    world's 16)."""
    channels = frames.shape[-1]
    if channels == 1:
        return frames.expand(*frames.shape[:-1], 3)
    if channels in (3, 4):
        return frames[..., :3]
    return None


@functools.cache
def _say_not_pictures(channels: int) -> None:
    """The server log's line (once per channel count) for frames the panels cannot show."""
    logging.warning("CachedSearch: the panels show no frames of this VAE: they have %d channels, not the 1, 3 or 4 of "
                    "a picture", channels)


def save_panel_frames(frames: torch.Tensor) -> list[dict]:
    """At most ``PANEL_FRAMES`` evenly spaced of ``frames`` [F, H, W, C], shrunk to thumbnails and saved as colour
    PNGs named by their content (as ComfyUI saves images: uint8, truncated); returns their /view references
    ({"filename", "subfolder", "type"}). Frames that are not pictures (``_pictures``) save nothing: the panel's row
    shows no frames, and the server log says why."""
    pictures = _pictures(frames)
    if pictures is None:
        _say_not_pictures(frames.shape[-1])
        return []
    picked = thumbnails(pictures[spread_evenly(range(pictures.shape[0]))])
    folder = pathlib.Path(folder_paths.get_output_directory()) / PANEL_FOLDER
    pixels = (255.0 * picked.numpy()).clip(0, 255).astype(np.uint8)
    references = [_saved_frame(frame, folder) for frame in pixels]
    trim_panel_folder(folder, PANEL_FOLDER_MAX_BYTES, keep={reference["filename"] for reference in references})
    return references


def trim_panel_folder(folder: pathlib.Path, max_bytes: int, keep: set[str] = frozenset()) -> None:
    """Deletes the least recently saved frames of ``folder`` until it holds at most ``max_bytes`` (never those named
    in ``keep``: the frames being shown now). A frame another process deleted first is simply gone."""
    frames = []
    for path in folder.glob("*.png"):
        with contextlib.suppress(FileNotFoundError):
            status = path.stat()
            frames.append((status.st_mtime, status.st_size, path))
    total = sum(size for _, size, _ in frames)
    for _, size, path in sorted(frames):
        if total <= max_bytes:
            break
        if path.name not in keep:
            path.unlink(missing_ok=True)
            total -= size


def decode_draft_frames(vae, candidates, announce=None) -> dict[int, list[dict]]:
    """The sampler's optional preview_vae: each draft decoded as VAEDecode decodes it, one draft at a time (Cancel
    works between them), its panel frames saved; keyed by candidate number."""
    frames = {}
    numbers = candidates.candidate_numbers
    for index, number in enumerate(numbers):
        comfy.model_management.throw_exception_if_processing_interrupted()
        if announce is not None:
            announce(f"decoding previews {index + 1} / {len(numbers)} (candidate {number})")
        # A packed latent's first part is its picture (LTX-2: the video; the sound is not shown).
        images = vae.decode(parts(candidates.draft_latent(index))[0])
        frames[number] = save_panel_frames(images.reshape(-1, *images.shape[-3:]))
    return frames


def _of_seed(references: list[dict], seed: int) -> list[dict]:
    return [{**reference, "seed": seed} for reference in references]


def panel_rows(candidates, ranking=None, frames: dict[int, list[dict]] | None = None) -> list[dict]:
    """Every candidate's row for the panels (``candidate_rows``: in seed order, pruned ones included; with
    ``ranking``, scored) with decoded frames: a finished draft's from ``frames`` (keyed by candidate number), a pruned
    candidate's from its Pruning Plan preview; every candidate of a pruned search also gets its preview's frames as
    "preview_frames". Each frame's reference names the seed it shows ("seed"), so that a panel refuses a frame
    that is not its row's."""
    previews = {index + 1: list(saved) for index, saved in enumerate(candidates.pruning_previews)}
    frames = frames or {}
    rows = []
    for row in candidate_rows(candidates.drafts, candidates.stage_names, candidates.pruning, ranking):
        number = row["candidate"]
        if number in previews:
            row["preview_frames"] = _of_seed(previews[number], row["seed"])
        shown = previews.get(number) if row.get("pruned") else frames.get(number)
        if shown:
            row["frames"] = _of_seed(shown, row["seed"])
        rows.append(row)
    return rows


def pruned_rows(candidates) -> list[dict]:
    """The dropped candidates of a pruned search for the frontend panels (JSON-ready): what each cost up to the
    round that dropped it, that round's step and its preview score there. Empty for an unpruned search."""
    if candidates.pruning is None:
        return []
    rows = []
    pruning = candidates.pruning
    for pruned in pruning.pruned:
        draft = pruned.draft
        index = pruning.seeds.index(draft.seed)
        rows.append({"seed": draft.seed, "preview_score": pruned.preview_score, "seconds": round(draft.seconds, 3),
                     "skipped": draft.calls_skipped, "calls": draft.calls,
                     "prune_step": pruning.dropped_at(index)})
    return rows


def pruning_panel(candidates) -> dict:
    """A pruned search's panel fields (its dropped candidates and its plan); none for an unpruned search."""
    if candidates.pruning is None:
        return {}
    return {"cachedsearch_pruned": pruned_rows(candidates), "cachedsearch_pruning": [candidates.pruning.as_dict()]}
