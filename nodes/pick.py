"""The artist's pick on the ComfyUI side: the candidates a Recommit can deliver, the commit of any of them (a pruned
one included), and the optional wait for a click on the panel in the same run with the route that answers it.

While a Recommit waits, the prompt worker's thread blocks inside it; the server's event loop runs in another thread
and hands POST /cachedsearch/pick to the waiting run. Cancel (POST /interrupt) sets ComfyUI's interrupt flag, which
the wait polls.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time

import comfy.model_management

from ..cachedsearch_core.pick import MODES, VERIFIERS_CHOICE, Pick, PickChoices
from .prompt_server import PerServer, prompt_server
from .route_checks import (
    ExtensionRoutes, RouteRefused, check_fields, json_answer, name, no_query, read_json_object, shown, whole_number,
)
from .candidates import SearchCandidates
from .commit import Commit, commit, run_full_compute

ROUTE = "/cachedsearch/pick"
AWAITING_PICK_EVENT = "cachedsearch.awaiting_pick"
POLL_SECONDS = 0.1
PICK_MAX_BYTES = 16 * 1024  # four short fields; the largest pick the panel sends is under 200 bytes
PICK_REQUEST = '{"prompt_id": str, "node": str, "candidate": int, "mode": "commit" or "keep"}'


def pick_choices(candidates: SearchCandidates) -> PickChoices:
    """Every seed of the search in seed order, pruned ones included, and which of them have a finished draft."""
    if candidates.pruning is not None:
        return PickChoices(candidates.pruning.seeds, candidates.pruning.survivor_indices)
    return PickChoices(tuple(candidates.seeds), tuple(range(len(candidates))))


def commit_pick(candidates: SearchCandidates, pick: Pick, models: tuple = ()) -> Commit:
    """The picked candidate generated at full compute: ``commit`` for a finished draft; for a candidate a pruned
    search stopped, its seed run the same way through every stage (the draft's record ends at the prune step)."""
    if pick.draft_index is not None:
        return commit(candidates, pick.draft_index, models)
    return run_full_compute(candidates.recipe, pick.seed, models)


class PickRefused(Exception):
    """An answer the route refuses, with its HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass
class WaitingPick:
    """A Recommit waiting for the artist's click: what it offers, and the answer once one came."""

    prompt_id: str
    node: str
    choices: PickChoices
    preselected: int  # candidate number, 0: none
    mode: str  # the node's mode, used when an answer names none
    answered: threading.Event = dataclasses.field(default_factory=threading.Event)
    answer: tuple[int, str] | None = None

    def as_dict(self) -> dict:
        return {"prompt_id": self.prompt_id, "node": self.node, "candidates": len(self.choices),
                "preselected": self.preselected}


class PickMailbox:
    """The Recommits of one server that wait for a pick, by prompt id and node id."""

    def __init__(self):
        self._waiting: dict[tuple[str, str], WaitingPick] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def waiting(self, prompt_id: str, node: str, choices: PickChoices, preselected: int, mode: str):
        """Open a wait for the duration of the block; whatever ends the block (an answer, a time-out, Cancel, an
        error) closes it, so nothing waits on after its run."""
        entry = WaitingPick(str(prompt_id), str(node), choices, preselected, mode)
        with self._lock:
            self._waiting[(entry.prompt_id, entry.node)] = entry
        try:
            yield entry
        finally:
            with self._lock:
                self._waiting.pop((entry.prompt_id, entry.node), None)

    def answer(self, prompt_id: str, node: str, candidate: int, mode: str | None = None) -> None:
        """Hand the click to the waiting Recommit; raises PickRefused (409: nothing waits there, 400: a choice it
        cannot deliver, so it waits on)."""
        with self._lock:
            entry = self._waiting.get((str(prompt_id), str(node)))
            if entry is None or entry.answered.is_set():
                raise PickRefused(409, f"prompt_id and node: no CachedSearch Recommit of prompt {prompt_id!r}, node "
                                       f"{node!r} is waiting for a pick (it finished, was cancelled, or was already "
                                       f"answered); use a wait GET {ROUTE} lists")
            mode = entry.mode if mode is None else mode
            try:
                entry.choices.check_choice(candidate, mode, input_name="candidate")
            except ValueError as error:
                raise PickRefused(400, str(error)) from None
            entry.answer = (candidate, mode)
            entry.answered.set()

    def listing(self) -> list[dict]:
        with self._lock:
            return [entry.as_dict() for entry in self._waiting.values()]


# One per server: the route registered on a server answers the Recommits waiting on that server.
MAILBOXES = PerServer(PickMailbox)


def _await_answer(entry: WaitingPick, timeout_seconds: int) -> tuple[int, str] | None:
    """Block until the click arrives (its candidate and mode), the time-out passes (None; 0: never) or Cancel is
    pressed (raises ComfyUI's InterruptProcessingException)."""
    deadline = time.monotonic() + timeout_seconds if timeout_seconds else None
    while not entry.answered.wait(POLL_SECONDS):
        comfy.model_management.throw_exception_if_processing_interrupted()
        if deadline is not None and time.monotonic() >= deadline:
            return None
    return entry.answer


def wait_for_click(choices: PickChoices, preselected: int, mode: str, timeout_seconds: int, node_id) -> tuple[int, str]:
    """The pick and mode the artist clicks on the panel, while the run waits; on time-out the pre-selected
    candidate as the verifier's choice (pick 0) in the node's mode."""
    server = prompt_server()
    if server is None or node_id is None:
        raise ValueError("wait_for_pick: there is no ComfyUI server to click a draft on (this run has no GUI); set "
                         "wait_for_pick to false and set pick instead")
    prompt_id = server.last_prompt_id
    with MAILBOXES.of(server).waiting(prompt_id, node_id, choices, preselected, mode) as entry:
        server.send_sync(AWAITING_PICK_EVENT, entry.as_dict())
        # short: the panel's banner says the rest, and a long text is cut at the node's bottom edge
        limit = f" (the verifier's choice after {timeout_seconds} s)" if timeout_seconds and preselected else ""
        server.send_progress_text(f"waiting for your pick{limit}; Cancel stops the run", node_id)
        answer = _await_answer(entry, timeout_seconds)
    if answer is not None:
        return answer
    if not preselected:
        raise ValueError(f"pick_timeout: no pick within {timeout_seconds} s and nothing pre-selected (no ranking "
                         "connected); set pick_timeout to 0 (no time-out), connect a verifier's ranking or set pick")
    return VERIFIERS_CHOICE, mode


def register_pick_routes(routes: ExtensionRoutes) -> None:
    """POST and GET /cachedsearch/pick on a running ComfyUI server."""
    mailbox = MAILBOXES.of(routes.server)

    @routes.post(ROUTE)
    async def post_pick(request):
        body = await read_json_object(request, PICK_MAX_BYTES, PICK_REQUEST)
        # "candidates" and "preselected": the awaiting event's own fields, which a client may send back with its pick
        check_fields(body, ("prompt_id", "node", "candidate"), ("mode", "candidates", "preselected"), PICK_REQUEST)
        listed = f"as GET {ROUTE} lists it"
        prompt_id = name(body["prompt_id"], "prompt_id", f"the waiting run's prompt id, {listed}")
        node = name(body["node"], "node", f"the waiting Recommit's node id, {listed}")
        candidate = whole_number(body["candidate"], "candidate", use="a candidate number (1 is the sampler's seed)")
        mode = body.get("mode")
        if mode is not None and mode not in MODES:
            raise RouteRefused(400, f"mode: got {shown(mode)}; use \"commit\" (full compute) or \"keep\" (the draft "
                                    "as it is), or leave it out for the node's mode")
        try:
            mailbox.answer(prompt_id, node, candidate, mode)
        except PickRefused as refused:
            raise RouteRefused(refused.status, str(refused)) from None
        return json_answer({"ok": True})

    @routes.get(ROUTE)
    async def list_waiting(request):
        no_query(request)
        return json_answer({"waiting": mailbox.listing()})
