"""Finished drafts kept on disk, so that a search stopped by Cancel, an error or a restart, re-queued or widened,
computes only the drafts it lacks, and a pick never drafts again.

A draft is saved under the digest of everything that determines it (``draft_key``: the search's setup as the graph
builds it, and its seed): its latent exactly as sampled in a safetensors file of its own, and its
record (seed, seconds, transformer calls per stage, the latent file's size and when it was saved) in an index, a
``jsonl_store`` like Calibrate's saved rollouts: one implementation of keyed records, their header, their set-aside
of a file that is not ours and their skipping of torn lines. A record is read when the store opens; its latent only
when the draft is used (``latent``), so a wide search holds no latent it does not deliver.

The latent files together stay under ``max_bytes`` (``DEFAULT_MAX_BYTES`` unless the caller says otherwise): saving
a draft that would go over it first deletes the oldest drafts. A latent file that is missing or does not read back
is set aside (when present), its record dropped, and reported; the draft is computed again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import pathlib
import time

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from .jsonl_store import JsonlFormat, JsonlStore
from .records import Draft, StageCalls
from .safe_files import set_aside, write_atomically

FORMAT = "cachedsearch saved drafts"
VERSION = 1
INDEX_FILE = "index.jsonl"
# Wan 2.1 at 480p, 81 frames: a latent of about 2.5 MB (16 x 21 x 60 x 104 float32), so 4 GiB keeps some 1,600
# drafts; at 720p about 700. Oldest first beyond it.
DEFAULT_MAX_BYTES = 4 * 1024**3


def draft_key(setup: str, seed: int) -> str:
    """The digest a draft is saved under: its search's setup fingerprint (everything but the seed that makes the
    draft, the stage recipe included) and its seed."""
    return hashlib.sha256(json.dumps([setup, seed]).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class SavedDraft:
    """A saved draft's record: the draft as it was measured, where its latent lies and when it was saved."""

    draft: Draft
    file: str  # the latent file's name in the store's folder
    size: int  # its bytes
    saved_at: float  # seconds since the epoch

    @classmethod
    def from_record(cls, record: dict) -> SavedDraft:
        """Raises ValueError when ``record`` is not a complete draft record."""
        try:
            stages = tuple(StageCalls(int(computed), int(skipped)) for computed, skipped in record["stage_calls"])
            draft = Draft(seed=int(record["seed"]), seconds=float(record["seconds"]),
                          calls_computed=sum(stage.computed for stage in stages),
                          calls_skipped=sum(stage.skipped for stage in stages), stage_calls=stages,
                          cache_inactive_reason=record.get("cache_inactive_reason") or None)
            saved = cls(draft, str(record["file"]), int(record["size"]), float(record["saved_at"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"incomplete record ({error})") from None
        if not (math.isfinite(draft.seconds) and draft.seconds >= 0 and stages and saved.size >= 0
                and pathlib.PurePath(saved.file).name == saved.file and saved.file.endswith(".safetensors")):
            raise ValueError("the seconds, calls, size or file name are out of range")
        return saved

    def record(self, key: str) -> dict:
        draft = self.draft
        # A draft a distributed worker sent carries its calls in all only: one stage's worth.
        stages = draft.stage_calls or (StageCalls(draft.calls_computed, draft.calls_skipped),)
        return {"key": key, "seed": draft.seed, "seconds": draft.seconds,
                "stage_calls": [[calls.computed, calls.skipped] for calls in stages],
                "cache_inactive_reason": draft.cache_inactive_reason, "file": self.file, "size": self.size,
                "saved_at": self.saved_at}


def _read(record) -> tuple[str, SavedDraft]:
    if not isinstance(record, dict) or not isinstance(record.get("key"), str):
        raise ValueError("not a record")
    return record["key"], SavedDraft.from_record(record)


DRAFTS_FORMAT = JsonlFormat(FORMAT, VERSION, read=_read, write=lambda key, saved: saved.record(key),
                            item="draft")


class DraftStore:
    """The drafts saved in one folder (its ``index.jsonl`` and one ``<key>.safetensors`` per draft). ``problems``
    lists what was found wrong (on opening, and with any latent that did not read back), to report."""

    def __init__(self, folder, max_bytes: int = DEFAULT_MAX_BYTES):
        if max_bytes < 1:
            raise ValueError(f"max_bytes: got {max_bytes}; use at least 1 byte")
        self.folder = pathlib.Path(folder)
        self.max_bytes = max_bytes
        self.index = JsonlStore(self.folder / INDEX_FILE, DRAFTS_FORMAT)
        self.problems: list[str] = list(self.index.problems)

    def get(self, key: str) -> SavedDraft | None:
        return self.index.get(key)

    def latent(self, key: str) -> torch.Tensor | None:
        """The saved draft's latent samples, read from its file now; None when there is no such draft or its file
        is missing or unreadable (then set aside, its record dropped and the problem reported)."""
        tensors = self.tensors(key)
        return None if tensors is None else tensors["samples"]

    def tensors(self, key: str) -> dict[str, torch.Tensor] | None:
        """Every tensor saved with the draft (its latent as ``samples`` and the ``extras`` it was added with), read
        from its file now; None as ``latent`` says."""
        saved = self.get(key)
        if saved is None:
            return None
        path = self.folder / saved.file
        try:
            tensors = load_file(path)
            if "samples" not in tensors:
                raise KeyError("samples")
        except FileNotFoundError:
            self._drop_unreadable(key, f"{path}: missing; the draft is computed again")
            return None
        except (OSError, SafetensorError, KeyError, RuntimeError, ValueError) as error:
            reason = f"it is not a saved draft's latent ({type(error).__name__})"
            self._drop_unreadable(key, set_aside(path, reason, "the draft is computed again"))
            return None
        return tensors

    def _drop_unreadable(self, key: str, problem: str) -> None:
        self.problems.append(problem)
        self.index.drop([key])

    def add(self, key: str, draft: Draft, samples: torch.Tensor, extras: dict[str, torch.Tensor] | None = None) -> None:
        """Saves the draft at once: its latent (and any ``extras``, named tensors read back by ``tensors``) file
        first, then its record; the oldest drafts deleted first when the new one would take the files over
        ``max_bytes``."""
        tensors = {**(extras or {}), "samples": samples}
        data = save({name: tensor.detach().to("cpu").contiguous() for name, tensor in tensors.items()})
        self._make_room(len(data))
        file = f"{key}.safetensors"
        write_atomically(self.folder / file, data)
        self.index.add(key, SavedDraft(draft, file, len(data), time.time()))

    @property
    def size(self) -> int:
        """The bytes of the saved latents."""
        return sum(saved.size for saved in self.index.records.values())

    def _make_room(self, needed: int) -> None:
        total, evicted = self.size, []
        for key, saved in self.index.records.items():  # oldest first
            if total + needed <= self.max_bytes:
                break
            total -= saved.size
            evicted.append(key)
        for key in evicted:
            (self.folder / self.index.records[key].file).unlink(missing_ok=True)
        if evicted:
            self.index.drop(evicted)
