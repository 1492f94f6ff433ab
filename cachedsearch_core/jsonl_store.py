"""A JSON-lines file of keyed records that survives crashes, foreign files and time: the one store under the
calibration's saved rollouts (``saved_rollouts``), the search's saved drafts (``draft_store``) and the audit's scores
(``audit.ScoreStore``).

- The file starts with a header naming its format and version. A file that is not ours (another header, no header,
  not text) is set aside under a name of its own (``safe_files.set_aside``) and reported, never overwritten.
- Records are appended one line at a time (one write each), so a crash loses at most the line being written. A
  line that does not parse or whose record is incomplete (a crash mid-write, an edit) is skipped and reported.
- A later record of a key replaces the earlier one; the order of the records is the order they were last written
  in, oldest first.
- The file is compacted (rewritten atomically with one line per key, bad lines dropped) when it is loaded with bad
  or repeated lines, and when records are dropped (``drop``: a store's own cap).
- A file several processes share (``saved_work``) is changed under their lock, each change starting with ``reload``:
  what another process appended or rewrote is read first, so a rewrite never drops it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
from collections.abc import Callable, Hashable

from .safe_files import set_aside, write_atomically

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class JsonlFormat:
    """What a store's lines hold. ``read`` turns a parsed line into (key, value) and raises ValueError for anything
    that is not a complete record; ``write`` turns (key, value) back into the record. With ``reads_headerless``, a
    file written before the header existed (its first line a record) is read as it is, appended to as it is, and
    gets the header only when it is compacted."""

    name: str
    version: int
    read: Callable[[object], tuple[Hashable, object]]
    write: Callable[[Hashable, object], dict]
    reads_headerless: bool = False
    item: str = "rollout"  # what a record holds, in the problems reported: what is computed again

    @property
    def header(self) -> dict:
        return {"format": self.name, "version": self.version}


class JsonlStore:
    """The records of one file (``records``, oldest first) and what was found wrong with it on loading
    (``problems``: one line each, to report; also logged)."""

    def __init__(self, path: pathlib.Path, file_format: JsonlFormat):
        self.path = pathlib.Path(path)
        self.format = file_format
        self.records: dict[Hashable, object] = {}
        self.problems: list[str] = []
        self._ends_mid_line = False  # a run stopped mid-write: the next record must start on a line of its own
        self._seen = None  # the file as this store last read or wrote it (``_signature``)
        self._load()

    def reload(self) -> None:
        """Reads the file again if it changed on disk since this store last read or wrote it (another process
        appended to it or rewrote it)."""
        if self._signature() == self._seen:
            return
        self.records = {}
        self._ends_mid_line = False
        self._load()

    def _signature(self):
        """What changes when the file does: an append changes its size, a rewrite (a new file renamed over it) its
        inode."""
        try:
            status = self.path.stat()
        except FileNotFoundError:
            return None
        return status.st_ino, status.st_size, status.st_mtime_ns

    def _load(self) -> None:
        self._seen = self._signature()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as error:
            self._set_aside(f"it could not be read ({error})")
            return
        if not data:  # created, then stopped before the header: nothing to keep
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self._set_aside(f"it is not a {self._named_format} file (not UTF-8 text)")
            return
        lines = [line for line in text.splitlines() if line.strip()]
        self._ends_mid_line = not text.endswith("\n")
        if lines and _parsed(lines[0]) == self.format.header:
            lines = lines[1:]
        elif not (lines and self.format.reads_headerless and self._is_record(_parsed(lines[0]))):
            self._set_aside(f"it is not a {self._named_format} file")
            return
        bad = 0
        for line in lines:
            try:
                key, value = self.format.read(_parsed(line))
            except ValueError:
                bad += 1
                continue
            self.records.pop(key, None)  # a later record of a key replaces it and is newer
            self.records[key] = value
        if bad:
            self._report(f"{self.path}: {bad} unreadable line(s) ignored (a run stopped mid-write, or the file was "
                         f"edited) and removed from the file; their {self.format.item}s are computed again")
        if len(lines) != len(self.records):  # bad or repeated lines
            self._compact()

    @property
    def _named_format(self) -> str:
        return f"{self.format.name} (version {self.format.version})"

    def _is_record(self, record) -> bool:
        try:
            self.format.read(record)
        except ValueError:
            return False
        return True

    def _set_aside(self, why: str) -> None:
        self.problems.append(set_aside(self.path, why, f"every {self.format.item} in it is computed again"))

    def _report(self, problem: str) -> None:
        logger.warning("CachedSearch: %s", problem)
        self.problems.append(problem)

    def _compact(self) -> None:
        """Rewrites the file with the header and one line per key."""
        lines = [_line(self.format.header)]
        lines += [_line(self.format.write(key, value)) for key, value in self.records.items()]
        try:
            write_atomically(self.path, "".join(lines).encode("utf-8"))
        except BaseException:
            self._seen = None  # the records in memory are not the file's: the next ``reload`` reads it again
            raise
        self._ends_mid_line = False
        self._seen = self._signature()

    def get(self, key: Hashable):
        return self.records.get(key)

    def add(self, key: Hashable, value) -> None:
        """Appends the record to the file at once (the header first, in a new file). A write that fails (a full disk)
        leaves the file as it was."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = _line(self.format.write(key, value))
        if self._is_new_file():
            line = _line(self.format.header) + line
        elif self._ends_mid_line:
            line = "\n" + line
        with self.path.open("ab", buffering=0) as file:
            end = file.seek(0, os.SEEK_END)
            rest = memoryview(line.encode("utf-8"))
            try:
                while rest:  # one write, unless the disk fills part-way: a crash leaves at most this line torn
                    rest = rest[file.write(rest):]
            except OSError:
                file.truncate(end)  # what part of the line was written: a torn line the next load would report
                raise
        self._ends_mid_line = False
        self._seen = self._signature()
        self.records.pop(key, None)
        self.records[key] = value

    def drop(self, keys) -> None:
        """Removes the records of ``keys`` and rewrites the file without them."""
        for key in keys:
            self.records.pop(key, None)
        self._compact()

    def _is_new_file(self) -> bool:
        try:
            return self.path.stat().st_size == 0
        except FileNotFoundError:
            return True


def _line(record: dict) -> str:
    return json.dumps(record) + "\n"


def _parsed(line: str):
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None
