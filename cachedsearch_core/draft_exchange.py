"""How a worker's drafts reach the master of a distributed search.

A draft travels as one safetensors blob: the latent exactly as sampled (raw
bytes, so the master's copy is bit-identical) and the draft's statistics in the
header metadata. The master keeps what arrives in a ``DraftInbox``: drafts and
the time each participant was last heard from, per search job, so it can tell
a slow worker from a dead one.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import struct
import threading
import time

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from .search import Draft

WIRE_FORMAT = "cachedsearch-draft-1"


@dataclasses.dataclass(frozen=True)
class DraftMessage:
    job_id: str
    participant: str
    draft: Draft
    latent: torch.Tensor


def encode_draft(message: DraftMessage) -> bytes:
    draft = message.draft
    metadata = {
        "format": WIRE_FORMAT, "job_id": message.job_id, "participant": message.participant,
        "seed": str(draft.seed), "seconds": repr(draft.seconds),
        "calls_computed": str(draft.calls_computed), "calls_skipped": str(draft.calls_skipped),
        "cache_inactive_reason": draft.cache_inactive_reason or "",
    }
    return save_tensors({"latent": message.latent.detach().cpu().contiguous()}, metadata=metadata)


def _header_metadata(blob: bytes) -> dict:
    if len(blob) < 8:
        raise ValueError(f"draft: got {len(blob)} bytes, too short for a safetensors blob")
    (header_length,) = struct.unpack("<Q", blob[:8])
    if header_length > len(blob) - 8:
        raise ValueError("draft: the safetensors header runs past the end of the blob (truncated upload?)")
    return json.loads(blob[8 : 8 + header_length]).get("__metadata__") or {}


def decode_draft(blob: bytes) -> DraftMessage:
    """The message ``encode_draft`` wrote; a clear ValueError for anything else."""
    try:
        metadata = _header_metadata(blob)
        tensors = load_tensors(blob)
    except (ValueError, json.JSONDecodeError) as error:
        raise ValueError(f"draft: not a CachedSearch draft blob ({error})") from None
    if metadata.get("format") != WIRE_FORMAT or set(tensors) != {"latent"}:
        raise ValueError(f"draft: expected format {WIRE_FORMAT!r} with one 'latent' tensor, got "
                         f"{metadata.get('format')!r} with {sorted(tensors)}; are master and worker on the same "
                         "CachedSearch version?")
    try:
        draft = Draft(seed=int(metadata["seed"]), seconds=float(metadata["seconds"]),
                      calls_computed=int(metadata["calls_computed"]), calls_skipped=int(metadata["calls_skipped"]),
                      cache_inactive_reason=metadata.get("cache_inactive_reason") or None)
        return DraftMessage(str(metadata["job_id"]), str(metadata["participant"]), draft, tensors["latent"])
    except (KeyError, ValueError) as error:
        raise ValueError(f"draft: bad or missing field in the header ({error})") from None


@dataclasses.dataclass
class _Job:
    created: float
    claimed: bool = False
    drafts: dict = dataclasses.field(default_factory=dict)  # seed -> DraftMessage
    last_heard: dict = dataclasses.field(default_factory=dict)  # participant -> clock time
    dropped: set = dataclasses.field(default_factory=set)


class DraftInbox:
    """Thread-safe store of what workers sent, per job.

    Messages may arrive before the master's search claims its job (a worker can
    start first); unclaimed jobs are forgotten after ``unclaimed_seconds``. A
    closed job and a dropped participant refuse further messages, which tells
    the worker to stop.
    """

    def __init__(self, clock=time.monotonic, unclaimed_seconds: float = 900.0, remembered_closed: int = 256):
        self._clock = clock
        self._unclaimed_seconds = unclaimed_seconds
        self._jobs: dict[str, _Job] = {}
        self._closed: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._remembered_closed = remembered_closed
        self._changed = threading.Condition()

    def _job(self, job_id: str) -> _Job | None:
        """The job's state, created on first contact; None once it was closed (call with the lock held)."""
        if job_id in self._closed:
            return None
        now = self._clock()
        for stale in [key for key, job in self._jobs.items()
                      if not job.claimed and now - job.created > self._unclaimed_seconds]:
            del self._jobs[stale]
        return self._jobs.setdefault(job_id, _Job(created=now))

    def heartbeat(self, job_id: str, participant: str) -> bool:
        """Record that ``participant`` is alive; False tells it to stop drafting."""
        with self._changed:
            job = self._job(job_id)
            if job is None or participant in job.dropped:
                return False
            job.last_heard[participant] = self._clock()
            self._changed.notify_all()
            return True

    def deliver(self, message: DraftMessage) -> bool:
        """Store a draft; False (not stored) tells its sender to stop drafting."""
        with self._changed:
            job = self._job(message.job_id)
            if job is None or message.participant in job.dropped:
                return False
            job.last_heard[message.participant] = self._clock()
            job.drafts.setdefault(message.draft.seed, message)
            self._changed.notify_all()
            return True

    def claim(self, job_id: str) -> None:
        """The master's search starts: its job is kept until ``close``."""
        with self._changed:
            job = self._job(job_id)
            if job is None:
                raise ValueError(f"search job {job_id!r} was already closed; queue the workflow again")
            job.claimed = True

    def wait(self, timeout: float) -> None:
        """Block until a message arrives or ``timeout`` seconds pass."""
        with self._changed:
            self._changed.wait(timeout)

    def drafts(self, job_id: str) -> dict[int, DraftMessage]:
        with self._changed:
            job = self._jobs.get(job_id)
            return dict(job.drafts) if job else {}

    def silent_seconds(self, job_id: str, participant: str) -> float:
        """Seconds since ``participant`` was last heard from (since the job began if never)."""
        with self._changed:
            job = self._jobs[job_id]
            return self._clock() - job.last_heard.get(participant, job.created)

    def drop(self, job_id: str, participant: str) -> None:
        with self._changed:
            self._jobs[job_id].dropped.add(participant)

    def close(self, job_id: str, outcome: str) -> None:
        """Forget the job; later messages for it are refused (and their senders stop)."""
        with self._changed:
            self._jobs.pop(job_id, None)
            self._closed[job_id] = outcome
            while len(self._closed) > self._remembered_closed:
                self._closed.popitem(last=False)

    def status(self) -> dict:
        """JSON-ready view: per open job, the seeds received from each participant; recently closed jobs."""
        with self._changed:
            now = self._clock()
            open_jobs = {}
            for job_id, job in self._jobs.items():
                received = collections.defaultdict(list)
                for seed, message in sorted(job.drafts.items()):
                    received[message.participant].append(seed)
                open_jobs[job_id] = {
                    "claimed": job.claimed, "received": dict(received), "dropped": sorted(job.dropped),
                    "silent_seconds": {p: round(now - t, 2) for p, t in job.last_heard.items()},
                }
            return {"open": open_jobs, "closed": dict(self._closed)}
