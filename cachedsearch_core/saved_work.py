"""Finished work kept on disk so that nothing is computed twice: a search's drafts (``draft_store``) and a
calibration's rollouts (``saved_rollouts``), in one folder, one format and under one cap.

The folder holds one index (``index.jsonl``, a ``jsonl_store``: a header naming the format, one record per line,
appended at once, a torn line skipped and a file that is not ours set aside) and, for an entry with tensors (a
draft's latent), one safetensors file named after its key. An index record is the entry's key, its kind ("draft",
"rollout"), when it was saved, its bytes on disk and its file, with the kind's own fields; those are read by the
kind's view when an entry is used, so a kind this version does not know is kept as it is, not dropped.

The entries together (their tensor files and index lines) stay under ``max_bytes`` (``DEFAULT_MAX_BYTES`` unless
the caller says otherwise): adding one that would go over it first deletes the oldest entries, of any kind. A
tensor file that is missing or does not read back is set aside (when present), its entry dropped and the problem
reported; the work is computed again.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import time

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from .jsonl_store import JsonlFormat, JsonlStore
from .safe_files import set_aside, write_atomically

FORMAT = "cachedsearch saved work"
VERSION = 1
INDEX_FILE = "index.jsonl"
# Wan 2.1 at 480p, 81 frames: a draft's latent is about 2.5 MB (16 x 21 x 60 x 104 float32), so 4 GiB keeps some
# 1,600 drafts, at 720p about 700; a calibration rollout's record is about 200 bytes. Oldest first beyond it.
DEFAULT_MAX_BYTES = 4 * 1024**3
_ENTRY_FIELDS = ("key", "kind", "saved_at", "size", "file")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One saved piece of work: its kind, the kind's own fields (JSON), its tensor file's name (None without
    tensors), its bytes on disk (file and index line) and when it was saved (seconds since the epoch)."""

    kind: str
    fields: dict
    file: str | None
    size: int
    saved_at: float


def _read(record) -> tuple[str, Entry]:
    if not isinstance(record, dict):
        raise ValueError("not a record")
    key, kind, file = record.get("key"), record.get("kind"), record.get("file")
    try:
        size, saved_at = int(record["size"]), float(record["saved_at"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"incomplete record ({error})") from None
    if not (isinstance(key, str) and isinstance(kind, str) and size >= 0 and math.isfinite(saved_at)):
        raise ValueError("the key, kind, size or time is out of range")
    if file is not None and not (isinstance(file, str) and pathlib.PurePath(file).name == file
                                 and file.endswith(".safetensors")):
        raise ValueError("the file is not a tensor file's name in the folder")
    fields = {name: value for name, value in record.items() if name not in _ENTRY_FIELDS}
    return key, Entry(kind, fields, file, size, saved_at)


def _write(key: str, entry: Entry) -> dict:
    return {"key": key, "kind": entry.kind, "saved_at": entry.saved_at, "size": entry.size, "file": entry.file,
            **entry.fields}


WORK_FORMAT = JsonlFormat(FORMAT, VERSION, read=_read, write=_write, item="saved result")  # a draft or a rollout


class SavedWork:
    """The entries saved in one folder. ``problems`` lists what was found wrong (on opening, with a tensor file
    that did not read back, with an entry its view could not read), to report."""

    def __init__(self, folder, max_bytes: int = DEFAULT_MAX_BYTES):
        if max_bytes < 1:
            raise ValueError(f"max_bytes: got {max_bytes}; use at least 1 byte")
        self.folder = pathlib.Path(folder)
        self.max_bytes = max_bytes
        self.index = JsonlStore(self.folder / INDEX_FILE, WORK_FORMAT)
        self.problems: list[str] = list(self.index.problems)

    def get(self, key: str, kind: str) -> Entry | None:
        entry = self.index.get(key)
        return entry if entry is not None and entry.kind == kind else None

    def tensors(self, key: str, required: str) -> dict[str, torch.Tensor] | None:
        """The entry's tensors, read from its file now; None when there is no such entry, it has no file, or the
        file is missing, unreadable or lacks the ``required`` tensor (then set aside, the entry dropped and the
        problem reported)."""
        entry = self.index.get(key)
        if entry is None or entry.file is None:
            return None
        path = self.folder / entry.file
        again = f"the {entry.kind} is computed again"
        try:
            tensors = load_file(path)
            if required not in tensors:
                raise KeyError(required)
        except FileNotFoundError:
            self.drop(key, f"{path}: missing; {again}")
            return None
        except (OSError, SafetensorError, KeyError, RuntimeError, ValueError) as error:
            self.drop(key, set_aside(path, f"it is not a saved {entry.kind}'s tensors ({type(error).__name__})",
                                     again))
            return None
        return tensors

    def drop(self, key: str, problem: str) -> None:
        """Forgets an entry found unusable (its file, if any, already gone or set aside) and reports why."""
        self.problems.append(problem)
        self.index.drop([key])

    def add(self, key: str, kind: str, fields: dict, tensors: dict[str, torch.Tensor] | None = None) -> None:
        """Saves the entry at once: its tensor file first (if any), then its index record; the oldest entries
        deleted first when the new one would take the folder over ``max_bytes``."""
        data = None if not tensors else save({name: tensor.detach().to("cpu").contiguous()
                                              for name, tensor in tensors.items()})
        file = None if data is None else f"{key}.safetensors"
        line = json.dumps(_write(key, Entry(kind, fields, file, 0, time.time())))
        size = (0 if data is None else len(data)) + len(line) + 1
        self._make_room(size)
        if data is not None:
            write_atomically(self.folder / file, data)
        self.index.add(key, Entry(kind, fields, file, size, time.time()))

    @property
    def size(self) -> int:
        """The bytes of the saved entries (tensor files and index lines)."""
        return sum(entry.size for entry in self.index.records.values())

    def _make_room(self, needed: int) -> None:
        total, evicted = self.size, []
        for key, entry in self.index.records.items():  # oldest first
            if total + needed <= self.max_bytes:
                break
            total -= entry.size
            evicted.append(key)
        for key in evicted:
            if (file := self.index.records[key].file) is not None:
                (self.folder / file).unlink(missing_ok=True)
        if evicted:
            self.index.drop(evicted)


class SavedKind:
    """A view of one kind of entry (``KIND``) in a folder's saved work: what the kind's store (drafts, rollouts)
    shares. ``problems`` are the store's (to report)."""

    KIND = ""

    def __init__(self, folder, max_bytes: int = DEFAULT_MAX_BYTES):
        self.work = SavedWork(folder, max_bytes)
        self.folder = self.work.folder
        self.problems = self.work.problems

    def _read(self, key: str, parse):
        """``parse(entry)`` of the entry of this kind saved under ``key``; None when there is none, or when
        ``parse`` raises ValueError (a record out of range: dropped and reported, the work computed again)."""
        entry = self.work.get(key, self.KIND)
        if entry is None:
            return None
        try:
            return parse(entry)
        except ValueError as error:
            self.work.drop(key, f"{self.folder}: a saved {self.KIND}'s record is {error}; the {self.KIND} is "
                                "computed again")
            return None
