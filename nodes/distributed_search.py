"""Distributed search on top of ComfyUI-Distributed (optional: without it the node searches alone).

ComfyUI-Distributed's orchestrator (its panel's Queue, or ``POST /distributed/queue``)
probes the enabled workers and sends the workflow to the reachable ones; each
participant learns its part from the prompt (``distributed_setup``).

A worker claims its slice from the master (which answers with a token), drafts
it and sends each draft to the master as an exact latent with that token, with
heartbeats in between (the routes: ``distributed_routes``). The master opens the
job with the slice it hands each worker, drafts its own slice, gathers the rest
(a draft counts only from the worker handed its seed), and re-drafts the seeds
of a worker it has not heard from for ``worker_timeout`` seconds. The result is the same
SearchCandidates a single-machine search makes, so the Verifier and Recommit
nodes work unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import urllib.error
import urllib.request

import comfy.model_management
import torch

from ..cachedsearch_core.draft_exchange import DraftInbox, DraftMessage, encode_draft
from ..cachedsearch_core.records import Draft
from ..cachedsearch_core.seed_slices import SeedSlice, slice_of
from .candidates import SearchCandidates, run_search
from .distributed_setup import MASTER, DistributedSetup, participant_label
from .packed_latent import join
from .prompt_server import PerServer
from .saved_drafts import SavedDrafts

ROUTE = "/cachedsearch/distributed"
WAIT_SLICE_SECONDS = 0.25

# Each server's mailbox for the drafts its workers send: the routes registered on a server fill it and a master's
# search on that server reads it.
_INBOXES = PerServer(DraftInbox)


def server_inbox(server) -> DraftInbox:
    """The draft inbox of ``server`` (a PromptServer); without a server, an inbox of its own that no worker reaches."""
    return _INBOXES.of(server)


@dataclasses.dataclass(frozen=True)
class DistributedCandidates(SearchCandidates):
    """SearchCandidates that also say which participant drafted each seed and what was re-drafted."""

    drafted_by: tuple[str, ...] = ()

    def distribution_line(self) -> str:
        by_participant: dict[str, list[int]] = {}
        for draft, participant in zip(self.drafts, self.drafted_by):
            by_participant.setdefault(participant, []).append(draft.seed)
        drafted = "; ".join(f"{participant_label(participant)} {', '.join(map(str, seeds))}"
                            for participant, seeds in by_participant.items())
        return f"drafted by: {drafted}"

    def report(self, ranking=None, cost=None) -> str:
        # SearchCandidates.report ends with the notes (what was re-drafted, refused, or set aside in the store).
        return "\n".join([super().report(ranking, cost), self.distribution_line()])

    def draft_is_full_compute(self, index: int, models: tuple = ()) -> bool:
        # Another machine's full-compute draft need not match this one's bit for bit: commit it here.
        return self.drafted_by[index] == MASTER and super().draft_is_full_compute(index, models)


def _assemble(like: SearchCandidates, collected: dict, notes: list[str]) -> DistributedCandidates:
    """Candidates in seed order from ``collected[seed] = (Draft, latent [1, ...], participant)``, with the recipe,
    cache description and latent entries of this participant's own search ``like``."""
    seeds = sorted(collected)
    return DistributedCandidates(
        recipe=like.recipe, drafts=tuple(collected[seed][0] for seed in seeds),
        draft_latents=join(collected[seed][1] for seed in seeds), cache_description=like.cache_description,
        latent_entries=like.latent_entries, drafted_by=tuple(collected[seed][2] for seed in seeds),
        notes=tuple(notes), drafts_saved=like.drafts_saved, drafts_not_kept=like.drafts_not_kept,
    )


def _collect(candidates: SearchCandidates, participant: str, into: dict) -> None:
    for index, draft in enumerate(candidates.drafts):
        into[draft.seed] = (draft, candidates.draft_latent(index), participant)


def _prefixed(announce, prefix: str):
    return None if announce is None else (lambda text: announce(f"{prefix}: {text}"))


@dataclasses.dataclass
class _Gathering:
    """The master's side of a distributed search while it gathers: the drafts taken so far (``collected[seed] =
    (Draft, latent [1, ...], participant)``), the workers whose drafts are refused, and the notes for the report."""

    recipe: object
    setup: DistributedSetup
    slices: tuple[SeedSlice, ...]
    worker_timeout: float
    announce: object
    inbox: DraftInbox
    saved: SavedDrafts | None
    rejected: set[str]
    notes: list[str]
    collected: dict = dataclasses.field(default_factory=dict)

    def take_arrived(self, reference: torch.Tensor) -> None:
        """Every draft that has arrived from the worker handed its seed, refusing a worker whose drafts are not of
        the shape and dtype of the master's own (``reference``)."""
        for seed, message in self.inbox.drafts(self.setup.job_id).items():
            if seed in self.collected or message.participant in self.rejected:
                continue
            if message.latent.shape != reference.shape or message.latent.dtype != reference.dtype:
                self.rejected.add(message.participant)
                self.notes.append(f"{participant_label(message.participant)} sent a draft of shape "
                                  f"{list(message.latent.shape)} {message.latent.dtype}, the master's are "
                                  f"{list(reference.shape)} {reference.dtype} (different workflow or models?); "
                                  "its seeds were re-drafted by the master")
                continue
            self.collected[seed] = (message.draft, message.latent, message.participant)
            if self.saved is not None:
                self.saved.save_draft(message.draft, message.latent)

    def missing(self) -> dict[str, list[int]]:
        """Per worker, the seeds of its slice not collected yet (workers with none left out)."""
        missing = {seed_slice.participant: [seed for seed in seed_slice.seeds if seed not in self.collected]
                   for seed_slice in self.slices if seed_slice.participant != MASTER}
        return {participant: seeds for participant, seeds in missing.items() if seeds}

    def redraft_if_gone(self, participant: str, seeds: list[int]) -> None:
        """Drop a worker whose drafts are refused or that was silent past worker_timeout, and draft its missing
        ``seeds`` here (but those that arrived just before the drop, taken on the next pass)."""
        silent = self.inbox.silent_seconds(self.setup.job_id, participant)
        refused = participant in self.rejected
        if not refused and silent <= self.worker_timeout:
            return
        self.inbox.drop(self.setup.job_id, participant, "its drafts were refused" if refused else
                        f"silent for {silent:.0f} s")
        arrived = self.inbox.drafts(self.setup.job_id)
        seeds = [seed for seed in seeds if refused or seed not in arrived]
        if not seeds:
            return
        label = participant_label(participant)
        if not refused:
            done = len(slice_of(self.slices, participant)) - len(seeds)
            self.notes.append(f"{label} was silent for {silent:.0f} s after {done} of {done + len(seeds)} drafts "
                              f"(worker_timeout {self.worker_timeout:g} s)")
        self.notes.append(f"re-drafted by the master: {', '.join(map(str, seeds))} (seeds of {label})")
        redrafted = run_search(self.recipe, seeds, _prefixed(self.announce, f"re-drafting for {label}"), self.saved)
        _collect(redrafted, MASTER, self.collected)
        self.rejected.discard(participant)


def _waiting_line(missing: dict[str, list[int]]) -> str:
    return "waiting for " + ", ".join(f"{participant_label(participant)} ({len(seeds)} draft(s) to come)"
                                      for participant, seeds in missing.items())


def search_as_master(recipe, setup: DistributedSetup, slices: tuple[SeedSlice, ...], worker_timeout: float,
                     announce, inbox: DraftInbox, saved: SavedDrafts | None = None) -> DistributedCandidates:
    """Draft the master's slice, gather the workers' drafts, re-draft what a silent worker left. With ``saved``,
    the master's own drafts are reused and saved as a plain search's are, and each worker's draft is saved as it
    is taken."""
    mismatched = inbox.open_job(setup.job_id, {seed_slice.participant: seed_slice.seeds for seed_slice in slices
                                               if seed_slice.participant != MASTER and seed_slice.seeds})
    outcome = "failed"
    try:
        gathering = _Gathering(recipe, setup, slices, worker_timeout, announce, inbox, saved, set(mismatched),
                               [f"{participant_label(participant)}'s drafts were refused: {why}"
                                for participant, why in mismatched.items()])
        own = run_search(recipe, list(slice_of(slices, MASTER)), _prefixed(announce, MASTER), saved)
        _collect(own, MASTER, gathering.collected)
        last_line = None
        while True:
            gathering.take_arrived(own.draft_latents[0:1])
            missing = gathering.missing()
            if not missing:
                break
            for participant, seeds in missing.items():
                gathering.redraft_if_gone(participant, seeds)
            if announce is not None and _waiting_line(missing) != last_line:
                last_line = _waiting_line(missing)
                announce(last_line)
            comfy.model_management.throw_exception_if_processing_interrupted()
            inbox.wait(WAIT_SLICE_SECONDS)
        outcome = "done"
        return _assemble(own, gathering.collected, gathering.notes)
    except comfy.model_management.InterruptProcessingException:
        outcome = "cancelled"
        raise
    finally:
        inbox.close(setup.job_id, outcome)  # workers still drafting are told to stop at their next message


class MasterLink:
    """A worker's connection to the master: it claims this worker's seeds (the master answers with the token its
    other messages carry), then sends heartbeats from a thread and drafts from the sampling thread.

    When the master refuses a message (search closed or cancelled, this worker dropped, its claim refused) or
    cannot be reached for ``timeout`` seconds, the worker's current run is interrupted.
    """

    def __init__(self, setup: DistributedSetup, seeds: tuple[int, ...], timeout: float):
        self.setup = setup
        self.seeds = tuple(seeds)
        self.timeout = timeout
        self.stop_reason: str | None = None
        self.has_more_to_draft = True  # once the last draft is on its way, a refusal has nothing left to stop
        self._token: str | None = None
        self._claiming = threading.Lock()  # the heartbeat thread and the sampling thread may both claim first
        self._closed = threading.Event()
        self._last_contact = time.monotonic()
        self._thread = threading.Thread(target=self._beat, name="cachedsearch-heartbeat", daemon=True)

    def __enter__(self) -> MasterLink:
        self._post_heartbeat()
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._closed.set()
        self._thread.join(timeout=self.timeout)

    def _post(self, path: str, body: bytes, content_type: str) -> dict:
        """The master's answer: "keep_going", and "error" when it refused the message. Raises OSError when it cannot
        be reached or fails, ValueError when it answers something else than JSON."""
        request = urllib.request.Request(f"{self.setup.master_url}{ROUTE}/{path}", data=body, method="POST",
                                         headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, timeout=max(5.0, self.timeout)) as response:
                answer = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            if not 400 <= error.code < 500:
                raise
            try:
                answer = json.loads(error.read() or b"{}")
            except ValueError:
                answer = {}
            if not isinstance(answer, dict):
                answer = {}
            answer.setdefault("error", f"the master answered {error.code} {error.reason}")
        if not isinstance(answer, dict):
            raise ValueError(f"the master answered {str(answer)[:60]}, not a JSON object")
        self._last_contact = time.monotonic()
        return answer

    def _json(self, **fields) -> bytes:
        return json.dumps({"job_id": self.setup.job_id, "participant": self.setup.worker_id, **fields}).encode()

    def _stop(self, reason: str) -> None:
        if self.stop_reason is None and self.has_more_to_draft:
            self.stop_reason = reason
            comfy.model_management.interrupt_current_processing(True)

    def _stop_unless_kept_going(self, answer: dict) -> None:
        if not answer.get("keep_going"):
            self._stop(f"the master refused this worker's message: "
                       f"{answer.get('error', 'it closed this search or stopped waiting for this worker')}")

    def _claimed_token(self) -> str | None:
        """This worker's token, claiming its seeds first; None when the master refused the claim (the run stops)."""
        with self._claiming:
            if self._token is None:
                answer = self._post("claim", self._json(seeds=list(self.seeds)), "application/json")
                if not isinstance(answer.get("token"), str):
                    self._stop_unless_kept_going({"error": answer.get("error", "no token in its answer")})
                    return None
                self._token = answer["token"]
            return self._token

    def _post_heartbeat(self) -> None:
        try:
            token = self._claimed_token()
            if token is not None:
                self._stop_unless_kept_going(self._post("heartbeat", self._json(token=token), "application/json"))
        except (OSError, ValueError) as error:
            if time.monotonic() - self._last_contact > self.timeout:
                self._stop(f"the master at {self.setup.master_url} did not answer for {self.timeout:g} s ({error})")

    def _beat(self) -> None:
        interval = min(2.0, self.timeout / 4)
        while not self._closed.wait(interval) and self.stop_reason is None:
            self._post_heartbeat()

    def send(self, draft: Draft, latent: torch.Tensor) -> None:
        """Deliver one draft; a retry after a lost answer is told it arrived (409, keep going)."""
        blob, deadline = None, time.monotonic() + self.timeout
        while True:
            try:
                token = self._claimed_token()
                if token is None:
                    return
                blob = blob or encode_draft(DraftMessage(self.setup.job_id, self.setup.worker_id, draft, latent,
                                                         token))
                self._stop_unless_kept_going(self._post("draft", blob, "application/octet-stream"))
                return
            except (OSError, ValueError) as error:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"could not deliver seed {draft.seed} to the master at "
                                       f"{self.setup.master_url} within worker_timeout ({self.timeout:g} s): "
                                       f"{error}; the master drafts this worker's seeds itself") from None
                time.sleep(0.5)


def search_as_worker(recipe, setup: DistributedSetup, seeds: tuple[int, ...], worker_timeout: float,
                     announce) -> DistributedCandidates:
    """Draft this worker's slice one seed at a time, sending each draft to the master as soon as it exists."""
    collected = {}
    label = participant_label(setup.worker_id)
    with MasterLink(setup, seeds, worker_timeout) as link:
        for index, seed in enumerate(seeds):
            if announce is not None:
                announce(f"{label}: draft {index + 1} / {len(seeds)} (seed {seed}) for the master")
            try:
                part = run_search(recipe, [seed])
            except comfy.model_management.InterruptProcessingException:
                if link.stop_reason is not None:
                    raise comfy.model_management.InterruptProcessingException(
                        f"{label} stopped: {link.stop_reason}") from None
                raise
            link.has_more_to_draft = index < len(seeds) - 1
            link.send(part.drafts[0], part.draft_latents)
            if link.stop_reason is not None:
                comfy.model_management.throw_exception_if_processing_interrupted()
            _collect(part, setup.worker_id, collected)
    return _assemble(part, collected, [f"{label} of {len(setup.participants)} participants: drafts sent to the "
                                       "master"])
