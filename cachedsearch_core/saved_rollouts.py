"""A calibration's finished rollouts, saved as they finish so that a calibration stopped by Cancel, a crash or a
restart resumes where it was: re-queued, it computes only the rollouts missing from the store.

A rollout is saved under the digest of everything that makes it (``saved_keys.rollout_key``): the setup (model, VAE and verifier as the graph
builds them, sampler settings, negative prompt, input latent), the prompt (its text and conditioning), the seed and
the arm (cache engine, threshold and cache window). Changing one of these changes the digest of exactly the rollouts
it changes: a new tau adds rollouts, a new warmup recomputes the cached ones and keeps the full ones.

The store is ``saved_work``, which a search's saved drafts share (one index, one format, one cap, the oldest
entries of either kind evicted first); a rollout is a record there without tensors (scores, seconds and calls, and
for a cached rollout its previews' scores, ``previews.RolloutPreviews``). A record that does not read back is dropped
and reported; the rollout is computed again. A cached rollout saved before previews were recorded reads back without
them, and Calibrate completes it.
"""

from __future__ import annotations

import dataclasses
import math

from .previews import RolloutPreviews
from .saved_work import SavedKind

KIND = "rollout"


@dataclasses.dataclass(frozen=True)
class SavedRollout:
    """What a calibration keeps of a rollout: each verifier's score, seconds and transformer calls, and for a cached
    rollout its previews (None for a full or ComfyUI-cache rollout, and for a cached one saved before they were
    recorded)."""

    scores: tuple[float, ...]
    seconds: float
    calls: int
    skipped: int
    previews: RolloutPreviews | None = None

    @classmethod
    def from_record(cls, record: dict) -> SavedRollout:
        """Raises ValueError when ``record`` is not a complete, finite rollout record (its fields in the store)."""
        try:
            rollout = cls(tuple(float(score) for score in record["scores"]), float(record["seconds"]),
                          int(record["calls"]), int(record["skipped"]),
                          RolloutPreviews.from_record(record["previews"]) if "previews" in record else None)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"incomplete record ({error})") from None
        if not rollout.scores or not all(map(math.isfinite, (*rollout.scores, rollout.seconds))) or \
                not 0 <= rollout.skipped <= rollout.calls:
            raise ValueError("a score, the seconds or the calls are out of range")
        return rollout

    def record(self) -> dict:
        fields = {"scores": list(self.scores), "seconds": self.seconds, "calls": self.calls, "skipped": self.skipped}
        return fields if self.previews is None else {**fields, "previews": self.previews.record()}


class SavedRollouts(SavedKind):
    """The rollouts saved in one folder's store (``saved_work``). ``problems`` lists what was found wrong (to
    report)."""

    KIND = KIND

    def get(self, key: str) -> SavedRollout | None:
        return self._read(key, lambda entry: SavedRollout.from_record(entry.fields))

    def add(self, key: str, rollout: SavedRollout) -> None:
        self.work.add(key, self.KIND, rollout.record())
