"""A calibration's finished rollouts, saved as they finish so that a calibration stopped by Cancel, a crash or a
restart resumes where it was: re-queued, it computes only the rollouts missing from the file.

A rollout is saved under the digest of everything that makes it: the setup (model, VAE and verifier as the graph
builds them, sampler settings, negative prompt, input latent), the prompt (its text and conditioning), the seed and
the arm (cache engine, threshold and cache window). Changing one of these changes the digest of exactly the rollouts
it changes: a new tau adds rollouts, a new warmup recomputes the cached ones and keeps the full ones.

The file is JSON lines: a header naming the format, then one record per rollout. A file without the header (not
ours) is moved aside, and a line that does not parse or lacks a field (a crash mid-write) is skipped; both are
reported, neither is trusted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import pathlib

import torch

FORMAT = "cachedsearch calibration rollouts"
VERSION = 1
_HEADER = {"format": FORMAT, "version": VERSION}


def fingerprint(value) -> str:
    """A digest of ``value``'s content: tensors by dtype, shape and bytes; lists, tuples and dicts by their parts;
    numbers, strings and None as JSON; any other object by its type (what it holds is not seen)."""
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()


def _feed(digest, value) -> None:
    if isinstance(value, torch.Tensor):
        tensor = value.detach().to("cpu").contiguous()
        digest.update(f"tensor {tensor.dtype} {tuple(tensor.shape)};".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    elif isinstance(value, dict):
        digest.update(f"dict {len(value)};".encode())
        for key in sorted(value, key=str):
            _feed(digest, str(key))
            _feed(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(f"list {len(value)};".encode())
        for item in value:
            _feed(digest, item)
    elif value is None or isinstance(value, (bool, int, float, str)):
        digest.update(f"{json.dumps(value)};".encode())
    else:
        digest.update(f"object {type(value).__module__}.{type(value).__qualname__};".encode())


def rollout_key(setup: str, prompt: str, seed: int, arm: dict) -> str:
    """The digest a rollout is saved under: its setup's and prompt's fingerprints, its seed and its arm (JSON-ready
    settings of the cache that drafted it)."""
    return hashlib.sha256(json.dumps([setup, prompt, seed, arm], sort_keys=True).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class SavedRollout:
    """What a calibration keeps of a rollout: each verifier's score, seconds and transformer calls."""

    scores: tuple[float, ...]
    seconds: float
    calls: int
    skipped: int

    @classmethod
    def from_record(cls, record: dict) -> SavedRollout:
        """Raises ValueError when ``record`` is not a complete, finite rollout record."""
        try:
            rollout = cls(tuple(float(score) for score in record["scores"]), float(record["seconds"]),
                          int(record["calls"]), int(record["skipped"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"incomplete record ({error})") from None
        if not rollout.scores or not all(map(math.isfinite, (*rollout.scores, rollout.seconds))) or \
                not 0 <= rollout.skipped <= rollout.calls:
            raise ValueError("a score, the seconds or the calls are out of range")
        return rollout

    def record(self, key: str) -> dict:
        return {"key": key, "scores": list(self.scores), "seconds": self.seconds, "calls": self.calls,
                "skipped": self.skipped}


class SavedRollouts:
    """The rollouts saved in one file. ``problems`` lists what was found wrong with it on loading (to report)."""

    def __init__(self, path):
        self.path = pathlib.Path(path)
        self.rollouts: dict[str, SavedRollout] = {}
        self.problems: list[str] = []
        self._ends_mid_line = False  # a run stopped mid-write: the next record must start on a line of its own
        self._load()

    def _load(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as error:
            self._set_aside(f"it could not be read ({error})")
            return
        lines = text.splitlines()
        self._ends_mid_line = bool(text) and not text.endswith("\n")
        if not lines or _parsed(lines[0]) != _HEADER:
            self._set_aside(f"it is not a {FORMAT} file (version {VERSION})")
            return
        bad = 0
        for line in lines[1:]:
            record = _parsed(line)
            try:
                if not isinstance(record, dict) or not isinstance(record.get("key"), str):
                    raise ValueError("not a record")
                self.rollouts[record["key"]] = SavedRollout.from_record(record)
            except ValueError:
                bad += 1
        if bad:
            self.problems.append(f"{self.path}: {bad} unreadable line(s) ignored (a run stopped mid-write, or the "
                                 "file was edited); their rollouts are computed again")

    def _set_aside(self, why: str) -> None:
        aside = self.path.with_name(self.path.name + ".ignored")
        self.path.replace(aside)
        self.problems.append(f"{self.path}: ignored, because {why}; moved to {aside.name}, and every rollout is "
                             "computed again")

    def get(self, key: str) -> SavedRollout | None:
        return self.rollouts.get(key)

    def add(self, key: str, rollout: SavedRollout) -> None:
        """Appends the rollout to the file at once (the header first, in a new file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        with self.path.open("a", encoding="utf-8") as file:
            if new:
                file.write(json.dumps(_HEADER) + "\n")
            elif self._ends_mid_line:
                file.write("\n")
                self._ends_mid_line = False
            file.write(json.dumps(rollout.record(key)) + "\n")
        self.rollouts[key] = rollout


def _parsed(line: str):
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None
