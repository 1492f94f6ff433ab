"""Finished drafts kept on disk (``saved_work``, the store they share with Calibrate's saved rollouts), so that a
search stopped by Cancel, an error or a restart, re-queued or widened, computes only the drafts it lacks, and a pick
never drafts again.

A draft is saved under the digest of everything that determines it (``saved_keys.draft_key``: the search's setup as the graph
builds it, and its seed): its latent exactly as sampled (with any extra tensors, e.g. a pruned search's x0 estimate
at a round) in a safetensors file of its own (a latent packed of parts, LTX-2's video and audio, as one tensor a
part: ``samples``, ``samples.1``, ..., their count in its record), and its record (seed, seconds, transformer calls per stage) in the
store's index. A record is read when the store opens; its latent only when the draft is used (``latent``), so a
wide search holds no latent it does not deliver. A record or latent that does not read back is dropped and
reported; the draft is computed again.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from .records import Draft, StageCalls
from .saved_work import SavedKind

KIND = "draft"


def draft_fields(draft: Draft) -> dict:
    # A draft a distributed worker sent carries its calls in all only: one stage's worth.
    stages = draft.stage_calls or (StageCalls(draft.calls_computed, draft.calls_skipped),)
    return {"seed": draft.seed, "seconds": draft.seconds,
            "stage_calls": [[calls.computed, calls.skipped] for calls in stages],
            "cache_inactive_reason": draft.cache_inactive_reason}


def draft_of(fields: dict) -> Draft:
    """Raises ValueError when ``fields`` are not a complete draft record."""
    try:
        stages = tuple(StageCalls(int(computed), int(skipped)) for computed, skipped in fields["stage_calls"])
        draft = Draft.of_stages(int(fields["seed"]), float(fields["seconds"]), stages,
                                cache_inactive_reason=fields.get("cache_inactive_reason") or None)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"incomplete record ({error})") from None
    if not (math.isfinite(draft.seconds) and draft.seconds >= 0 and stages
            and all(stage.computed >= 0 and stage.skipped >= 0 for stage in stages)):
        raise ValueError("the seconds or calls are out of range")
    return draft


@dataclasses.dataclass(frozen=True)
class SavedDraft:
    """A saved draft's record: the draft as it was measured, and when it was saved (seconds since the epoch)."""

    draft: Draft
    saved_at: float
    # How many tensors its latent is packed of (LTX-2: video and audio); 1 for a plain latent.
    latent_parts: int = 1

    @property
    def part_names(self) -> list[str]:
        return ["samples", *(f"samples.{index}" for index in range(1, self.latent_parts))]


def _saved_draft(entry) -> SavedDraft:
    if entry.file is None:
        raise ValueError("without its latent file")
    parts = entry.fields.get("latent_parts", 1)
    if not isinstance(parts, int) or parts < 1:
        raise ValueError(f"a latent of {parts!r} parts")
    return SavedDraft(draft_of(entry.fields), entry.saved_at, parts)


class DraftStore(SavedKind):
    """The drafts saved in one folder's store (``saved_work``). ``problems`` lists what was found wrong (on
    opening, and with any draft that did not read back), to report."""

    KIND = KIND

    def get(self, key: str) -> SavedDraft | None:
        """The saved draft's record (its latent is not read); None when there is none or it does not read."""
        return self._read(key, _saved_draft)

    def latent(self, key: str) -> torch.Tensor | tuple[torch.Tensor, ...] | None:
        """The saved draft's latent samples (a packed latent's: the tuple of its parts), read from its file now;
        None when there is no such draft or its file is missing or unreadable (then set aside, its record dropped
        and the problem reported)."""
        tensors = self.tensors(key)
        return None if tensors is None else tensors["samples"]

    def tensors(self, key: str) -> dict[str, torch.Tensor] | None:
        """Every tensor saved with the draft (its latent as ``samples``, a packed one as the tuple of its parts, and
        the ``extras`` it was added with), read from its file now; None as ``latent`` says (and when a part is
        missing: a packed latent never comes back without its audio)."""
        saved = self.get(key)
        if saved is None:
            return None
        names = saved.part_names
        tensors = self.work.tensors(key, required=names[-1])
        if tensors is None or saved.latent_parts == 1:
            return tensors
        if not all(name in tensors for name in names):
            self.work.drop(key, f"{self.folder}: a saved draft lacks a part of its latent; it is computed again")
            return None
        return {**{name: tensor for name, tensor in tensors.items() if name not in names},
                "samples": tuple(tensors[name] for name in names)}

    def add(self, key: str, draft: Draft, samples: torch.Tensor | tuple[torch.Tensor, ...],
            extras: dict[str, torch.Tensor] | None = None, model: str | None = None) -> None:
        """Saves the draft at once: its latent (a packed one as the tuple of its parts; and any ``extras``, named
        tensors read back by ``tensors``) file first, then its record (with the ``model`` file it was drafted on, by
        which the artist can clear it); the oldest saved work deleted first when the new one would take the store
        over its cap."""
        parts = samples if isinstance(samples, tuple) else (samples,)
        packing = {"latent_parts": len(parts)} if len(parts) > 1 else {}
        names = SavedDraft(draft, 0.0, len(parts)).part_names
        self.work.add(key, self.KIND, {**draft_fields(draft), "model": model, **packing},
                      {**(extras or {}), **dict(zip(names, parts))})

    def by_model(self) -> dict[str | None, tuple[int, int]]:
        """The saved drafts per model file (None: not known): how many, and their bytes on disk."""
        counts = {}
        for entry in self.work.entries(self.KIND):
            drafts, size = counts.get(entry.fields.get("model"), (0, 0))
            counts[entry.fields.get("model")] = (drafts + 1, size + entry.size)
        return counts

    def clear(self, model: str | None = None) -> tuple[int, int]:
        """Deletes the saved drafts (of ``model`` only, when given; a calibration's rollouts stay): how many, and
        the bytes on disk that freed."""
        return self.work.clear(self.KIND) if model is None else self.work.clear(self.KIND, model=model)

    @property
    def size(self) -> int:
        """The bytes of everything saved in the store (drafts and rollouts)."""
        return self.work.size
