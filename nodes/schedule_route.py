"""POST /cachedsearch/pruning_schedule: whether the Pruning Plan would accept a schedule, said on the canvas while it
is typed (web/js/cachedsearch_plan_title.js asks whenever the widget changes), by the node's own check
(``pruning_schedule``)."""

from __future__ import annotations

from .pruning_schedule import schedule_message, schedule_rounds
from .route_checks import ExtensionRoutes, RouteRefused, check_fields, json_answer, read_json_object, text

SCHEDULE_ROUTE = "/cachedsearch/pruning_schedule"
# Parsing is linear in the text; a schedule is a few dozen characters, so 16 KB bounds a request's time on the loop.
SCHEDULE_MAX_BYTES = 16 * 1024
SCHEDULE_REQUEST = '{"schedule": the text of the Pruning Plan\'s schedule widget}'


def register_schedule_route(routes: ExtensionRoutes) -> None:
    """POST /cachedsearch/pruning_schedule on a running ComfyUI server: {"schedule": text} -> {"rounds": how many
    rounds it prunes in (0: empty, one prune as the other widgets say)}, or a 400 with {"error": the node's own
    message}."""

    @routes.post(SCHEDULE_ROUTE)
    async def pruning_schedule(request):
        body = await read_json_object(request, SCHEDULE_MAX_BYTES, SCHEDULE_REQUEST)
        check_fields(body, ("schedule",), (), SCHEDULE_REQUEST)
        schedule = text(body["schedule"], "schedule", "the widget's text")
        message = schedule_message(schedule)
        if message is not True:
            raise RouteRefused(400, message)
        return json_answer({"rounds": schedule_rounds(schedule)})
