"""Finished work kept on disk so that nothing is computed twice: a search's drafts (``draft_store``) and a
calibration's rollouts (``saved_rollouts``), in one folder, one format and under one cap.

The folder holds one index (``index.jsonl``, a ``jsonl_store``: a header naming the format, one record per line,
appended at once, a torn line skipped and a file that is not ours set aside) and, for an entry with tensors (a
draft's latent), one safetensors file named after its key. An index record is the entry's key, its kind ("draft",
"rollout"), when it was saved, its bytes on disk and its file, with the kind's own fields; those are read by the
kind's view when an entry is used, so a kind this version does not know is kept as it is, not dropped.

Several ComfyUI processes share the folder (ComfyUI-Distributed's local workers, one instance per GPU): every read
and change of the index is made under one lock file beside it (``filelock``: the OS's own lock, released when a
process dies, on Linux, macOS and Windows alike) and starts from the index as it is on disk then, so no process
rewrites away what another appended. A save writes its tensor file (atomically: a write stopped part-way is never
read back) before its record, so a process killed between the two leaves a file no record names; opening the store
deletes such files (and stopped writes' temporary files) once they are older than ``SWEEP_GRACE_SECONDS``, and the
files it set aside as unreadable (``*.corrupt-*``, kept for a look) once they are older than ``SET_ASIDE_KEEP_SECONDS``.

Everything in the folder the store keeps (the index, header included, and the tensor files its records name) stays
under ``max_bytes`` (the cap set for the folder, ``write_cap``, unless the caller says otherwise;
``DEFAULT_MAX_BYTES`` when none is set), measured on disk: adding an entry
that would go over it first deletes the oldest entries, of any kind and any process. A tensor file that is missing
or does not read back is set aside (when present), its entry dropped and the problem reported; the work is computed
again. A save that fails (a full disk, a read-only folder) raises OSError and leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import pathlib
import time

import filelock
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
LOCK_FILE = "index.lock"
# The cap the artist set (ComfyUI's setting, through the saved-work route), kept in the folder so that every process
# sharing it keeps the same one.
CAP_FILE = "cap.json"
# A process saves a file and then its record under the lock, so another process never sees one without the other;
# the grace keeps a file a process is writing without the lock (an older version of this extension sharing the
# folder) from being taken from under it.
SWEEP_GRACE_SECONDS = 15 * 60
# A file set aside as unreadable is kept a week for whoever wants to look at it, then swept: it is outside the cap.
SET_ASIDE_KEEP_SECONDS = 7 * 24 * 3600
# Every holder of the lock keeps it for one save or read (milliseconds); one held longer is stuck.
LOCK_TIMEOUT_SECONDS = 60
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
    that did not read back, with an entry its view could not read, with a save that failed), to report."""

    def __init__(self, folder, max_bytes: int | None = None, grace_seconds: float = SWEEP_GRACE_SECONDS):
        self.folder = pathlib.Path(folder)
        max_bytes = read_cap(self.folder) if max_bytes is None else max_bytes
        if max_bytes < 1:
            raise ValueError(f"max_bytes: got {max_bytes}; use at least 1 byte")
        self.max_bytes = max_bytes
        self._lock = filelock.FileLock(str(self.folder / LOCK_FILE), timeout=LOCK_TIMEOUT_SECONDS)
        with self._locked(writing=False):
            self.index = JsonlStore(self.folder / INDEX_FILE, WORK_FORMAT)
            self.problems: list[str] = self.index.problems  # one list: what a later reload finds is reported too
            self._sweep(grace_seconds)

    @contextlib.contextmanager
    def _locked(self, writing: bool):
        """Holds the folder's lock. A folder that is missing, or read-only (no lock file can be made), is read
        without it (no process can change it); ``writing`` makes the folder and raises OSError when it cannot."""
        if writing:
            self.folder.mkdir(parents=True, exist_ok=True)
        locked = False
        if writing or self.folder.is_dir():  # nothing saved yet: the folder is made by the first save
            try:
                self._lock.acquire()
                locked = True
            except filelock.Timeout as error:
                raise OSError(f"{self.folder}: another process has held {LOCK_FILE} for over {LOCK_TIMEOUT_SECONDS} "
                              "s; if no ComfyUI is saving there, delete that file") from error
            except OSError:
                if writing:
                    raise
        try:
            yield
        finally:
            if locked:
                self._lock.release()

    @contextlib.contextmanager
    def _current(self, writing: bool = False):
        """The lock held (``_locked``) and the index as it is on disk now: what other processes saved or evicted."""
        with self._locked(writing):
            self.index.reload()
            yield

    def _sweep(self, grace_seconds: float) -> None:
        """Deletes the tensor files no record names and the temporary files of stopped writes, older than
        ``grace_seconds`` (a process killed between a file and its record, or mid-write), and the files set aside
        as unreadable, older than ``SET_ASIDE_KEEP_SECONDS``."""
        named = {entry.file for entry in self.index.records.values()}
        now = time.time()
        with contextlib.suppress(FileNotFoundError):
            for path in list(self.folder.iterdir()):
                name = path.name
                if ".corrupt-" in name:
                    kept_for = SET_ASIDE_KEEP_SECONDS
                elif (name.endswith(".safetensors") and name not in named) or \
                        (name.startswith(".") and name.endswith(".tmp")):
                    kept_for = grace_seconds
                else:
                    continue
                with contextlib.suppress(OSError):  # gone already, or a read-only folder: a later opening
                    if path.stat().st_mtime < now - kept_for:
                        path.unlink()

    def get(self, key: str, kind: str) -> Entry | None:
        with self._current():
            entry = self.index.get(key)
        return entry if entry is not None and entry.kind == kind else None

    def tensors(self, key: str, required: str) -> dict[str, torch.Tensor] | None:
        """The entry's tensors, read from its file now; None when there is no such entry, it has no file, or the
        file is missing, unreadable or lacks the ``required`` tensor (then set aside, the entry dropped and the
        problem reported)."""
        with self._current():
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
            self._forget(key, entry, lambda: f"{path}: missing; {again}")
            return None
        except (OSError, SafetensorError, KeyError, RuntimeError, ValueError) as error:
            why = f"it is not a saved {entry.kind}'s tensors ({type(error).__name__})"
            self._forget(key, entry, lambda: set_aside(path, why, again))
            return None
        return tensors

    def drop(self, key: str, problem: str) -> None:
        """Forgets an entry found unusable (its file, if any, already gone or set aside) and reports why."""
        with self._current():
            entry = self.index.get(key)
        if entry is not None:
            self._forget(key, entry, lambda: problem)

    def _forget(self, key: str, entry: Entry, problem) -> None:
        """Drops ``entry`` and reports ``problem()`` (which may set its file aside), unless another process has
        replaced or evicted it meanwhile (then it is no problem of this one)."""
        try:
            with self._current(writing=True):
                if self.index.get(key) != entry:
                    return
                self.problems.append(problem())
                self.index.drop([key])
        except OSError as error:  # a read-only folder: the entry stays, this process computes the work again
            self.problems.append(f"{self.folder}: a saved {entry.kind} that did not read back could not be "
                                 f"dropped ({error})")

    def add(self, key: str, kind: str, fields: dict, tensors: dict[str, torch.Tensor] | None = None) -> None:
        """Saves the entry at once: its tensor file first (if any), then its index record; the oldest entries
        deleted first when the new one would take the folder over ``max_bytes``. Raises OSError when it cannot be
        written (nothing of it is left); an entry larger than the cap is not saved (reported)."""
        data = None if not tensors else save({name: tensor.detach().to("cpu").contiguous()
                                              for name, tensor in tensors.items()})
        file = None if data is None else f"{key}.safetensors"
        with self._current(writing=True):
            entry = _sized(key, Entry(kind, fields, file, 0, time.time()), data)
            if entry.size + len(_header()) > self.max_bytes:
                self.problems.append(f"a {kind} of {entry.size:,} bytes is not saved in {self.folder}: it is larger "
                                     f"than the cap on saved work ({self.max_bytes:,} bytes)")
                return
            self._make_room(entry.size)
            if data is not None:
                write_atomically(self.folder / file, data)
            try:
                self.index.add(key, entry)
            except BaseException:
                if file is not None:
                    (self.folder / file).unlink(missing_ok=True)
                raise

    def clear(self, kind: str, **fields) -> tuple[int, int]:
        """Deletes the entries of ``kind`` whose fields hold ``fields`` (every one of the kind without): their
        records, then their files. Returns how many were deleted and the bytes on disk that freed."""
        with self._current(writing=True):
            before = self._bytes_on_disk()
            chosen = [key for key, entry in self.index.records.items()
                      if entry.kind == kind and all(entry.fields.get(name) == value for name, value in fields.items())]
            files = [file for key in chosen if (file := self.index.records[key].file) is not None]
            if chosen:
                self.index.drop(chosen)
            for file in files:
                (self.folder / file).unlink(missing_ok=True)
            return len(chosen), before - self._bytes_on_disk()

    def entries(self, kind: str) -> list[Entry]:
        """The entries of ``kind``, oldest first, as they are on disk now."""
        with self._current():
            return [entry for entry in self.index.records.values() if entry.kind == kind]

    @property
    def size(self) -> int:
        """The bytes on disk of the saved work: the index (header included) and the tensor files it names."""
        with self._current():
            return self._bytes_on_disk()

    def _bytes_on_disk(self) -> int:
        files = {entry.file for entry in self.index.records.values() if entry.file is not None}
        return sum(_file_size(self.folder / name) for name in (INDEX_FILE, *files))

    def _make_room(self, needed: int) -> None:
        """Evicts the oldest entries until ``needed`` more bytes fit under the cap: their records first, then their
        files (a process stopped between the two leaves files no record names, which are swept)."""
        total, evicted = self._bytes_on_disk(), []
        for key, entry in self.index.records.items():  # oldest first, of every process
            if total + needed <= self.max_bytes:
                break
            total -= entry.size
            evicted.append(key)
        if not evicted:
            return
        files = [file for key in evicted if (file := self.index.records[key].file) is not None]
        self.index.drop(evicted)  # rewritten from the index as it is on disk now (reloaded under the lock)
        for file in files:
            (self.folder / file).unlink(missing_ok=True)


def read_cap(folder) -> int:
    """The cap set for ``folder`` (``write_cap``); ``DEFAULT_MAX_BYTES`` when none is set or its file does not read."""
    try:
        cap = json.loads((pathlib.Path(folder) / CAP_FILE).read_text(encoding="utf-8"))["max_bytes"]
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_MAX_BYTES
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1 else DEFAULT_MAX_BYTES


def write_cap(folder, max_bytes: int) -> None:
    """Sets the cap of ``folder``'s saved work: every store opened on it from now on, in any process, keeps it (the
    next save evicts down to it)."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes: got {max_bytes!r}; use at least 1 byte")
    write_atomically(pathlib.Path(folder) / CAP_FILE, json.dumps({"max_bytes": max_bytes}).encode("utf-8"))


def _header() -> str:
    return json.dumps(WORK_FORMAT.header) + "\n"


def _sized(key: str, entry: Entry, data: bytes | None) -> Entry:
    """``entry`` with its size: its tensor file's bytes and its index line's (which holds the size itself)."""
    size = -1
    while True:
        line = json.dumps(_write(key, dataclasses.replace(entry, size=max(size, 0)))) + "\n"
        measured = (0 if data is None else len(data)) + len(line.encode("utf-8"))
        if measured == size:
            return dataclasses.replace(entry, size=size)
        size = measured


def _file_size(path: pathlib.Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


class SavedKind:
    """A view of one kind of entry (``KIND``) in a folder's saved work: what the kind's store (drafts, rollouts)
    shares. ``problems`` are the store's (to report)."""

    KIND = ""

    def __init__(self, folder, max_bytes: int | None = None):
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
