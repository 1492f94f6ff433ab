"""How a worker's drafts reach the master of a distributed search, and only from the worker they were handed to.

A worker first claims the seeds it drafts (``DraftInbox.claim``) and gets a token back; its heartbeats and drafts
carry that token, and the master keeps a draft only when it comes with the token of the claim that holds its seed.
The master opens the job when its own search starts (``DraftInbox.open_job``), with the seeds it hands each worker
(the fixed slices of ``seed_slices``): a claim must match them, and one made before the master opened the job that
does not is dropped.

A draft travels as one safetensors blob: the latent exactly as sampled (raw bytes, so the master's copy is
bit-identical) and the draft's statistics in the header metadata. The master keeps what arrives in a
``DraftInbox``: drafts and the time each participant was last heard from, per search job, so it can tell a slow
worker from a dead one. What it holds is bounded: at most ``MAX_OPEN_JOBS`` jobs of at most ``MAX_SEEDS_PER_JOB``
seeds, and a job its master has not opened is forgotten ``UNOPENED_SECONDS`` after its last message.
"""

from __future__ import annotations

import collections
import dataclasses
import hmac
import json
import math
import secrets
import struct
import threading
import time

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from .records import MAX_CANDIDATES, MAX_SEED, Draft

WIRE_FORMAT = "cachedsearch-draft-2"  # 2: the claim's token travels with the draft
# A master runs one search at a time; the other open jobs are searches whose workers started before their master
# (its queue was busy). A claim that would open one more is refused.
MAX_OPEN_JOBS = 4
MAX_SEEDS_PER_JOB = MAX_CANDIDATES  # the widest search
# Workers send a heartbeat every 2 s while they draft; a job no one has written to for this long, and that its
# master has not opened, is taken to have no master coming (its prompt failed, or went to another server).
UNOPENED_SECONDS = 300.0


@dataclasses.dataclass(frozen=True)
class DraftMessage:
    job_id: str
    participant: str
    draft: Draft
    latent: torch.Tensor
    token: str = ""  # the sender's claim's token


def encode_draft(message: DraftMessage) -> bytes:
    draft = message.draft
    metadata = {
        "format": WIRE_FORMAT, "job_id": message.job_id, "participant": message.participant, "token": message.token,
        "seed": str(draft.seed), "seconds": repr(draft.seconds),
        "calls_computed": str(draft.calls_computed), "calls_skipped": str(draft.calls_skipped),
        "cache_inactive_reason": draft.cache_inactive_reason or "",
    }
    return save_tensors({"latent": message.latent.detach().cpu().contiguous()}, metadata=metadata)


_NOT_A_DRAFT = "send the blob a CachedSearch worker sends (are master and worker on the same CachedSearch version?)"


def _header_metadata(blob: bytes) -> dict:
    if len(blob) < 8:
        raise ValueError(f"draft: got {len(blob)} bytes, too short for a safetensors blob; {_NOT_A_DRAFT}")
    (header_length,) = struct.unpack("<Q", blob[:8])
    if header_length > len(blob) - 8:
        raise ValueError(f"draft: the safetensors header runs past the end of the blob (truncated upload?); "
                         f"{_NOT_A_DRAFT}")
    try:
        header = json.loads(blob[8 : 8 + header_length])
    except (ValueError, RecursionError):
        raise ValueError(f"draft: the safetensors header is not JSON; {_NOT_A_DRAFT}") from None
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(metadata, dict) or not all(isinstance(value, str) for value in metadata.values()):
        raise ValueError(f"draft: the safetensors header has no metadata of text fields; {_NOT_A_DRAFT}")
    return metadata


def _whole_number(metadata: dict, name: str, high: int) -> int:
    text = metadata.get(name, "")
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(high)) and int(text) <= high):
        raise ValueError(f"draft: header field {name}: got {text[:40]!r}; use a whole number from 0 to {high}")
    return int(text)


def _seconds(metadata: dict) -> float:
    text = metadata.get("seconds", "")
    try:
        seconds = float(text) if len(text) <= 40 else math.nan
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"draft: header field seconds: got {text[:40]!r}; use a finite number of seconds, 0 or more")
    return seconds


def decode_draft(blob: bytes) -> DraftMessage:
    """The message ``encode_draft`` wrote; a ValueError naming what is wrong for anything else."""
    metadata = _header_metadata(blob)
    if metadata.get("format") != WIRE_FORMAT:
        raise ValueError(f"draft: header field format: got {metadata.get('format', '')[:40]!r}; use {WIRE_FORMAT!r} "
                         "(are master and worker on the same CachedSearch version?)")
    try:
        tensors = load_tensors(blob)
    except (SafetensorError, RuntimeError):  # safetensors' or torch's own text is not ours to show
        raise ValueError(f"draft: the safetensors data does not match its header; {_NOT_A_DRAFT}") from None
    if set(tensors) != {"latent"}:
        raise ValueError(f"draft: got tensors {sorted(tensors)[:4]}; send one tensor named 'latent'")
    draft = Draft(seed=_whole_number(metadata, "seed", MAX_SEED), seconds=_seconds(metadata),
                  calls_computed=_whole_number(metadata, "calls_computed", 2**62),
                  calls_skipped=_whole_number(metadata, "calls_skipped", 2**62),
                  cache_inactive_reason=metadata.get("cache_inactive_reason") or None)
    return DraftMessage(metadata.get("job_id", ""), metadata.get("participant", ""), draft, tensors["latent"],
                        metadata.get("token", ""))


class MessageRefused(ValueError):
    """A message the inbox does not take, which changes nothing. ``reason``: "invalid" (it cannot be right),
    "forbidden" (not the sender's to send), "conflict" (already there), "gone" (its job was closed, or its sender
    dropped), "full" (too many open jobs). ``keep_going``: whether its sender should go on drafting."""

    def __init__(self, reason: str, message: str, keep_going: bool = False):
        super().__init__(message)
        self.reason = reason
        self.keep_going = keep_going


@dataclasses.dataclass(frozen=True)
class _Claim:
    token: str
    seeds: frozenset


def _listed(seeds) -> str:
    return ", ".join(map(str, sorted(seeds)))


@dataclasses.dataclass
class _Job:
    created: float
    last_message: float
    opened_at: float | None = None  # when the master's search opened the job
    handed: dict = dataclasses.field(default_factory=dict)  # participant -> frozenset of seeds, once opened
    claims: dict = dataclasses.field(default_factory=dict)  # participant -> _Claim
    drafts: dict = dataclasses.field(default_factory=dict)  # seed -> DraftMessage
    last_heard: dict = dataclasses.field(default_factory=dict)  # participant -> clock time
    messages: dict = dataclasses.field(default_factory=collections.Counter)  # participant -> messages taken
    dropped: dict = dataclasses.field(default_factory=dict)  # participant -> why

    def heard(self, participant: str, now: float) -> None:
        self.last_heard[participant] = self.last_message = now
        self.messages[participant] += 1


class DraftInbox:
    """Thread-safe store of what workers sent, per job (see the module docstring). A closed job and a dropped
    participant refuse further messages, which tells the worker to stop."""

    def __init__(self, clock=time.monotonic, unopened_seconds: float = UNOPENED_SECONDS,
                 max_open_jobs: int = MAX_OPEN_JOBS, remembered_closed: int = 256):
        self._clock = clock
        self._unopened_seconds = unopened_seconds
        self._max_open_jobs = max_open_jobs
        self._jobs: dict[str, _Job] = {}
        self._closed: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._remembered_closed = remembered_closed
        self._changed = threading.Condition()

    def _forget_unopened(self, now: float) -> None:
        """Forget the jobs no master opened and no one wrote to for ``unopened_seconds`` (lock held)."""
        for stale in [job_id for job_id, job in self._jobs.items()
                      if job.opened_at is None and now - job.last_message > self._unopened_seconds]:
            del self._jobs[stale]

    def _refuse_closed(self, job_id: str) -> None:
        if job_id in self._closed:
            raise MessageRefused("gone", f"job_id: search job {job_id!r} was closed ({self._closed[job_id]}); "
                                         "its drafts are no longer needed")

    def claim(self, job_id: str, participant: str, seeds) -> str:
        """``participant`` drafts ``seeds`` of job ``job_id``: the token its later messages must carry. Raises
        MessageRefused when the seeds are not its to draft or the master holds too many jobs."""
        listed, seeds = list(seeds), frozenset(seeds)
        if len(seeds) != len(listed) or not 0 < len(seeds) <= MAX_SEEDS_PER_JOB:
            raise MessageRefused("invalid", f"seeds: got {len(listed)} seeds, {len(seeds)} distinct; a claim lists "
                                            f"1 to {MAX_SEEDS_PER_JOB} seeds, each once")
        with self._changed:
            now = self._clock()
            self._forget_unopened(now)
            self._refuse_closed(job_id)
            job = self._jobs.get(job_id)
            if job is None and len(self._jobs) >= self._max_open_jobs:
                raise MessageRefused("full", f"job_id: this master already holds {len(self._jobs)} open search "
                                             f"jobs, the most it keeps ({self._max_open_jobs}); queue again once "
                                             "they end (the master drafts this worker's seeds itself)")
            job = job or _Job(created=now, last_message=now)
            if participant in job.claims:
                raise MessageRefused("conflict", f"participant: {participant!r} already claimed its seeds of job "
                                                 f"{job_id!r}; a worker claims once per job (are two workers "
                                                 "configured with this id?)")
            if job.opened_at is not None and job.handed.get(participant) != seeds:
                handed = job.handed.get(participant)
                raise MessageRefused("forbidden", f"seeds: got {_listed(seeds)}; job {job_id!r} hands participant "
                                                  f"{participant!r} " + (f"seeds {_listed(handed)}" if handed else
                                                                         "no seeds (it is not one of its workers)"))
            claimed = {seed: other for other, claim in job.claims.items() for seed in claim.seeds}
            taken = sorted(seed for seed in seeds if seed in claimed)
            if taken:
                raise MessageRefused("conflict", f"seeds: {taken[0]} of job {job_id!r} is already claimed by "
                                                 f"participant {claimed[taken[0]]!r}; claim only your own slice")
            if len(claimed) + len(seeds) > MAX_SEEDS_PER_JOB:
                raise MessageRefused("invalid", f"seeds: job {job_id!r} would hold {len(claimed) + len(seeds)} "
                                                f"seeds; a search has at most {MAX_SEEDS_PER_JOB}")
            token = secrets.token_urlsafe(16)
            job.claims[participant] = _Claim(token, seeds)
            job.heard(participant, now)
            self._jobs[job_id] = job
            self._changed.notify_all()
            return token

    def _claimed(self, job_id: str, participant: str, token: str) -> tuple[_Job, _Claim]:
        """The job and the claim a message's token proves (lock held)."""
        self._forget_unopened(self._clock())
        self._refuse_closed(job_id)
        job = self._jobs.get(job_id)
        claim = job.claims.get(participant) if job is not None else None
        if claim is None or not hmac.compare_digest(claim.token.encode(), str(token).encode()):
            raise MessageRefused("forbidden", f"token: does not match a claim of participant {participant!r} in "
                                              f"job {job_id!r}; send the token the claim answered, with the same "
                                              "job_id and participant")
        if participant in job.dropped:
            raise MessageRefused("gone", f"participant: {participant!r} was dropped from job {job_id!r} "
                                         f"({job.dropped[participant]}); the master drafts its seeds itself")
        return job, claim

    def heartbeat(self, job_id: str, participant: str, token: str) -> None:
        """Record that ``participant`` is alive; raises MessageRefused when it should stop."""
        with self._changed:
            job, _ = self._claimed(job_id, participant, token)
            job.heard(participant, self._clock())
            self._changed.notify_all()

    def deliver(self, message: DraftMessage) -> None:
        """Keep a draft of a seed its sender claimed; raises MessageRefused otherwise."""
        with self._changed:
            job, claim = self._claimed(message.job_id, message.participant, message.token)
            seed = message.draft.seed
            if seed not in claim.seeds:
                raise MessageRefused("forbidden", f"seed: got {seed}; job {message.job_id!r} handed participant "
                                                  f"{message.participant!r} seeds {_listed(claim.seeds)}")
            if seed in job.drafts:
                raise MessageRefused("conflict", f"seed: {seed} of job {message.job_id!r} was already delivered; "
                                                 "each draft is sent once", keep_going=True)
            job.drafts[seed] = message
            job.heard(message.participant, self._clock())
            self._changed.notify_all()

    def open_job(self, job_id: str, handed: dict[str, tuple[int, ...]]) -> dict[str, str]:
        """The master's search starts and hands each worker its seeds (``handed``); the job is kept until
        ``close``. Returns the participants whose earlier claims did not match, now dropped, with why."""
        with self._changed:
            now = self._clock()
            self._forget_unopened(now)
            if job_id in self._closed:
                raise ValueError(f"search job {job_id!r} was already closed; queue the workflow again")
            job = self._jobs.get(job_id)
            if job is None:
                unopened = sorted((other.last_message, key) for key, other in self._jobs.items()
                                  if other.opened_at is None)
                if len(self._jobs) >= self._max_open_jobs and unopened:
                    del self._jobs[unopened[0][1]]  # this master's own search comes first
                job = self._jobs[job_id] = _Job(created=now, last_message=now)
            job.opened_at = now
            job.handed = {participant: frozenset(seeds) for participant, seeds in handed.items()}
            dropped = {}
            for participant, claim in job.claims.items():
                if job.handed.get(participant) != claim.seeds:
                    dropped[participant] = job.dropped[participant] = (
                        f"it claimed seeds {_listed(claim.seeds)}, the master handed it "
                        f"{_listed(job.handed.get(participant, ())) or 'none'}")
                    for seed in claim.seeds:
                        job.drafts.pop(seed, None)
            return dropped

    def wait(self, timeout: float) -> None:
        """Block until a message arrives or ``timeout`` seconds pass."""
        with self._changed:
            self._changed.wait(timeout)

    def drafts(self, job_id: str) -> dict[int, DraftMessage]:
        with self._changed:
            job = self._jobs.get(job_id)
            return dict(job.drafts) if job else {}

    def silent_seconds(self, job_id: str, participant: str) -> float:
        """Seconds since ``participant`` was last heard from (since the master opened the job if never)."""
        with self._changed:
            job = self._jobs[job_id]
            since = job.opened_at if job.opened_at is not None else job.created
            return self._clock() - job.last_heard.get(participant, since)

    def drop(self, job_id: str, participant: str, why: str) -> None:
        """The master stops waiting for ``participant`` (``why``: said to it on its next message)."""
        with self._changed:
            self._jobs[job_id].dropped.setdefault(participant, why)

    def close(self, job_id: str, outcome: str) -> None:
        """Forget the job; later messages for it are refused (and their senders stop)."""
        with self._changed:
            self._jobs.pop(job_id, None)
            self._closed[job_id] = outcome
            while len(self._closed) > self._remembered_closed:
                self._closed.popitem(last=False)

    def status(self) -> dict:
        """JSON-ready view: per open job, the seeds each participant claimed and delivered and how many of its
        messages were taken; recently closed jobs; the limits."""
        with self._changed:
            now = self._clock()
            self._forget_unopened(now)
            open_jobs = {}
            for job_id, job in self._jobs.items():
                received = collections.defaultdict(list)
                for seed, message in sorted(job.drafts.items()):
                    received[message.participant].append(seed)
                open_jobs[job_id] = {
                    "opened": job.opened_at is not None,
                    "claimed": {participant: sorted(claim.seeds) for participant, claim in job.claims.items()},
                    "received": dict(received), "dropped": sorted(job.dropped), "messages": dict(job.messages),
                    "silent_seconds": {p: round(now - t, 2) for p, t in job.last_heard.items()},
                }
            return {"open": open_jobs, "closed": dict(self._closed),
                    "limits": {"open_jobs": self._max_open_jobs, "seeds_per_job": MAX_SEEDS_PER_JOB,
                               "unopened_seconds": self._unopened_seconds}}
