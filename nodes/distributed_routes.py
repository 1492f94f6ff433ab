"""The master's routes of a distributed search (``distributed_search``), and its on-prompt handler.

POST /cachedsearch/distributed/claim     a worker's seeds -> its token
POST /cachedsearch/distributed/heartbeat the worker is alive (with its token)
POST /cachedsearch/distributed/draft     one draft, a safetensors blob carrying the token (draft_exchange)
GET  /cachedsearch/distributed/jobs      the open and recently closed jobs

Every POST answers {"keep_going": bool}: whether the sender should go on drafting. A refused message gets a 4xx
with "error" as well and changes nothing: 400 malformed, 403 not the sender's to send (its token, or a seed it was
not handed), 409 already there (a second claim, a draft sent twice), 410 its job closed or its sender dropped, 413
too large, 429 too many open jobs.
"""

from __future__ import annotations

import asyncio

from ..cachedsearch_core.draft_exchange import MAX_SEEDS_PER_JOB, MessageRefused, decode_draft
from ..cachedsearch_core.records import MAX_SEED
from .distributed_search import ROUTE, server_inbox
from .distributed_setup import MASTER, attach_distributed_setup
from .route_checks import (
    ExtensionRoutes, RouteRefused, check_fields, json_answer, name, no_query, read_chunks, read_json_object, shown,
    whole_number,
)

# A claim of 64 seeds of 20 digits is under 2 KB.
MESSAGE_MAX_BYTES = 16 * 1024
# A float32 latent of an 81-frame 1080p Wan video is 44 MB. The body is kept in the pieces it arrives in, and joined
# and decoded in a thread: a copy of 64 MB takes tens of milliseconds, which the event loop should not wait for.
DRAFT_MAX_BYTES = 64 * 1024 * 1024
CLAIM_REQUEST = '{"job_id": str, "participant": str, "seeds": [int, ...]}'
HEARTBEAT_REQUEST = '{"job_id": str, "participant": str, "token": str}'
REFUSAL_STATUS = {"invalid": 400, "forbidden": 403, "conflict": 409, "gone": 410, "full": 429}


def _refusal(error: MessageRefused) -> RouteRefused:
    return RouteRefused(REFUSAL_STATUS[error.reason], str(error), keep_going=error.keep_going)


def _sender(job_id, participant) -> tuple[str, str]:
    job_id = name(job_id, "job_id", "the multi_job_id ComfyUI-Distributed gave this run")
    participant = name(participant, "participant", "this worker's id in ComfyUI-Distributed")
    if participant == MASTER:
        raise RouteRefused(400, f"participant: got {shown(participant)}; the master drafts its own seeds, so use "
                                "this worker's id")
    return job_id, participant


def _claimed_seeds(seeds) -> list:
    if not isinstance(seeds, list) or not 0 < len(seeds) <= MAX_SEEDS_PER_JOB:
        raise RouteRefused(400, f"seeds: got {shown(seeds)}; use a list of the 1 to {MAX_SEEDS_PER_JOB} seeds "
                                "this worker drafts")
    for seed in seeds:
        whole_number(seed, "seeds", 0, MAX_SEED, "seeds, each a whole number")
    return seeds


def _from_inbox(message_call, *arguments):
    """The inbox's answer to a worker's message; its refusal is the route's."""
    try:
        return message_call(*arguments)
    except MessageRefused as error:
        raise _refusal(error) from None


def register_server_hooks(routes: ExtensionRoutes) -> None:
    """The distributed routes and the on-prompt handler, on a running ComfyUI server."""
    routes.server.add_on_prompt_handler(attach_distributed_setup)
    inbox = server_inbox(routes.server)

    @routes.post(f"{ROUTE}/claim")
    async def receive_claim(request):
        body = await read_json_object(request, MESSAGE_MAX_BYTES, CLAIM_REQUEST)
        check_fields(body, ("job_id", "participant", "seeds"), (), CLAIM_REQUEST)
        job_id, participant = _sender(body["job_id"], body["participant"])
        token = _from_inbox(inbox.claim, job_id, participant, _claimed_seeds(body["seeds"]))
        return json_answer({"token": token, "keep_going": True})

    @routes.post(f"{ROUTE}/heartbeat")
    async def receive_heartbeat(request):
        body = await read_json_object(request, MESSAGE_MAX_BYTES, HEARTBEAT_REQUEST)
        check_fields(body, ("job_id", "participant", "token"), (), HEARTBEAT_REQUEST)
        job_id, participant = _sender(body["job_id"], body["participant"])
        token = name(body["token"], "token", "the token this worker's claim was answered with")
        _from_inbox(inbox.heartbeat, job_id, participant, token)
        return json_answer({"keep_going": True})

    @routes.post(f"{ROUTE}/draft")
    async def receive_draft(request):
        chunks = await read_chunks(request, DRAFT_MAX_BYTES)
        try:
            message = await asyncio.get_running_loop().run_in_executor(None, lambda: decode_draft(b"".join(chunks)))
        except ValueError as error:
            raise RouteRefused(400, str(error)) from None
        _sender(message.job_id, message.participant)
        _from_inbox(inbox.deliver, message)
        return json_answer({"keep_going": True})

    @routes.get(f"{ROUTE}/jobs")
    async def job_status(request):
        no_query(request)
        return json_answer(inbox.status())
