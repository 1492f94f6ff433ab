"""Files that are not lost: a file is replaced whole or not at all, and a file we cannot read is moved aside under
a name of its own, never overwritten.

Used by the calibration memory (one JSON file) and the JSON-lines stores (``jsonl_store``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import secrets
import stat
import tempfile
import time

_NEW_FILE_MODE = 0o644  # mkstemp makes its file private (0600); a replaced file keeps its own mode instead

logger = logging.getLogger(__name__)


def write_atomically(path: pathlib.Path, data: bytes) -> None:
    """Replaces ``path`` with ``data``: written to a temporary file of its own in the same folder (two writers never
    share one), flushed to disk (a power loss never leaves an empty file in the old one's place), then renamed over
    ``path`` in one step. When anything fails the old file is left as it was and the temporary file is removed."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = _NEW_FILE_MODE
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def set_aside(path: pathlib.Path, why: str, consequence: str) -> str:
    """Moves ``path``, which cannot be used (``why``), to ``<name>.corrupt-<UTC time>-<random>`` beside it, so
    nothing in it is lost and the next write starts a new file; returns the one line that says so (also logged)."""
    path = pathlib.Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.corrupt-{stamp}-{secrets.token_hex(3)}")
    try:
        os.replace(path, aside)
    except OSError as error:
        raise OSError(f"{path}: {why}, and it could not be moved aside ({error}); move or delete it by hand") \
            from error
    message = f"{path}: set aside, because {why}; moved to {aside.name} beside it, and {consequence}"
    logger.warning("CachedSearch: %s", message)
    return message
