"""The saved drafts in the artist's hands (``saved_drafts``, in the store Calibrate's rollouts share): what is kept,
where and under which cap, the cap ComfyUI's setting sets, and clearing the drafts (all, or one model's).

GET  /cachedsearch/saved_work        {"folder", "bytes", "max_bytes", "default_max_bytes",
                                      "drafts": [{"model", "drafts", "bytes"}, ...]}
POST /cachedsearch/saved_work/cap    {"gigabytes": 4}: the cap of every store opened on the folder from now on, in
                                     this server and in any other process sharing the folder
POST /cachedsearch/saved_work/clear  {} or {"model": "<file>"}: {"removed", "freed_bytes"}

The store's work (a lock, files) runs off the event loop.
"""

from __future__ import annotations

import asyncio

from ..cachedsearch_core.draft_store import DraftStore
from ..cachedsearch_core.saved_work import DEFAULT_MAX_BYTES, write_cap
from .route_checks import (
    ExtensionRoutes,
    RouteRefused,
    check_fields,
    json_answer,
    name,
    no_query,
    number,
    read_json_object,
)
from .saved_drafts import saved_folder

ROUTE = "/cachedsearch/saved_work"
GIGABYTE = 1024**3
MIN_GIGABYTES = 1e-6  # about 1 KB: the setting offers 0.01 GB and up, a script may go lower
MAX_GIGABYTES = 100_000  # 100 TB: more than any disk; a larger number is a typo
BODY_MAX_BYTES = 4096
CAP_REQUEST = '{"gigabytes": 4}'
CLEAR_REQUEST = '{} (every saved draft) or {"model": "<model file>"} (one model\'s drafts)'


def listing() -> dict:
    store = DraftStore(saved_folder())
    drafts = [{"model": model, "drafts": count, "bytes": size}
              for model, (count, size) in sorted(store.by_model().items(), key=lambda item: item[0] or "")]
    return {"folder": str(store.folder), "bytes": store.size, "max_bytes": store.work.max_bytes,
            "default_max_bytes": DEFAULT_MAX_BYTES, "drafts": drafts}


def register_saved_work_routes(routes: ExtensionRoutes) -> None:
    """The saved-work routes on a running ComfyUI server."""

    @routes.get(ROUTE)
    async def get_saved_work(request):
        no_query(request)
        return json_answer(await _off_the_loop(listing))

    @routes.post(f"{ROUTE}/cap")
    async def set_cap(request):
        body = await read_json_object(request, BODY_MAX_BYTES, CAP_REQUEST)
        check_fields(body, ("gigabytes",), (), CAP_REQUEST)
        gigabytes = number(body["gigabytes"], "gigabytes", MIN_GIGABYTES, MAX_GIGABYTES, "the cap in GB (1 GB = 1024³ bytes)")
        await _off_the_loop(write_cap, saved_folder(), round(gigabytes * GIGABYTE))
        return json_answer(await _off_the_loop(listing))

    @routes.post(f"{ROUTE}/clear")
    async def clear(request):
        body = await read_json_object(request, BODY_MAX_BYTES, CLEAR_REQUEST)
        check_fields(body, (), ("model",), CLEAR_REQUEST)
        model = None if body.get("model") is None else name(body["model"], "model", "a model file GET "
                                                                                    f"{ROUTE} lists")
        removed, freed = await _off_the_loop(lambda: DraftStore(saved_folder()).clear(model))
        return json_answer({"removed": removed, "freed_bytes": freed})


async def _off_the_loop(work, *args):
    try:
        return await asyncio.to_thread(work, *args)
    except OSError as error:  # a read-only folder, a full disk, a lock held too long
        raise RouteRefused(503, f"the saved drafts' folder {saved_folder()}: {error}") from None
