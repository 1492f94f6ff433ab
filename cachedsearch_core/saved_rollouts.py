"""A calibration's finished rollouts, saved as they finish so that a calibration stopped by Cancel, a crash or a
restart resumes where it was: re-queued, it computes only the rollouts missing from the store.

A rollout is saved under the digest of everything that makes it: the setup (model, VAE and verifier as the graph
builds them, sampler settings, negative prompt, input latent), the prompt (its text and conditioning), the seed and
the arm (cache engine, threshold and cache window). Changing one of these changes the digest of exactly the rollouts
it changes: a new tau adds rollouts, a new warmup recomputes the cached ones and keeps the full ones.

The store is ``saved_work``, which a search's saved drafts share (one index, one format, one cap, the oldest
entries of either kind evicted first); a rollout is a record there without tensors (scores, seconds and calls). A
record that does not read back is dropped and reported; the rollout is computed again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import torch

from .saved_work import SavedKind

KIND = "rollout"


def fingerprint(value) -> str:
    """A digest of ``value``'s content: tensors by dtype, shape and bytes; lists, tuples and dicts by their parts;
    numbers (a whole float as its integer), strings and None as JSON; any other object by its type (what it holds
    is not seen)."""
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
    elif isinstance(value, float) and value.is_integer():  # 5.0 as 5: the GUI's prompt writes whole floats as ints
        digest.update(f"{json.dumps(int(value))};".encode())
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
        """Raises ValueError when ``record`` is not a complete, finite rollout record (its fields in the store)."""
        try:
            rollout = cls(tuple(float(score) for score in record["scores"]), float(record["seconds"]),
                          int(record["calls"]), int(record["skipped"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"incomplete record ({error})") from None
        if not rollout.scores or not all(map(math.isfinite, (*rollout.scores, rollout.seconds))) or \
                not 0 <= rollout.skipped <= rollout.calls:
            raise ValueError("a score, the seconds or the calls are out of range")
        return rollout

    def record(self) -> dict:
        return {"scores": list(self.scores), "seconds": self.seconds, "calls": self.calls, "skipped": self.skipped}


class SavedRollouts(SavedKind):
    """The rollouts saved in one folder's store (``saved_work``). ``problems`` lists what was found wrong (to
    report)."""

    KIND = KIND

    def get(self, key: str) -> SavedRollout | None:
        return self._read(key, lambda entry: SavedRollout.from_record(entry.fields))

    def add(self, key: str, rollout: SavedRollout) -> None:
        self.work.add(key, self.KIND, rollout.record())
