"""POST /cachedsearch/calibration_cost: what a Calibrate node's widgets will cost, said on the canvas before it runs
(web/js/cachedsearch_calibrate.js asks whenever a widget changes), from the very plans the node runs."""

from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core.calibration import RolloutCount, prompt_lines
from .calibration_rollouts import planned_preview_cost, with_preview_cost
from .route_checks import (
    ExtensionRoutes, RouteRefused, check_fields, flag, json_answer, number, read_json_object, shown, text,
    whole_number,
)

COST_ROUTE = "/cachedsearch/calibration_cost"
# A thousand prompts of 250 characters. Everything the route does is linear in the body (reading the JSON, splitting
# the prompt lines and finding a repeated one), so the limit bounds how long one request holds ComfyUI's event loop:
# tests/test_routes.py measures it.
COST_MAX_BYTES = 256 * 1024
COST_REQUEST = ('{"node": "CachedSearchCalibrate" or "CachedSearchCalibrateExperts", "inputs": {widget: value}, '
                '"clip": true or false}')
# The widgets the cost depends on (the frontend sends these; any other widget value is ignored).
COST_INPUTS = ("prompt", "seeds", "first_seed", "capture_target", "taus", "easycache_thresholds",
               "lazycache_thresholds", "taus_high", "taus_low")
# The widgets the node's own check of its cache windows reads (a window that leaves nothing to skip is refused).
WINDOW_INPUTS = ("steps", "split_step", "warmup_steps", "cooldown_steps", "warmup_steps_high", "cooldown_steps_high",
                 "warmup_steps_low", "cooldown_steps_low")


def cost_widgets(node) -> dict[str, io.Input]:
    """The widgets a calibrating node's cost and window check depend on, as its schema declares them."""
    return {widget.id: widget for widget in node.define_schema().inputs if widget.id in COST_INPUTS + WINDOW_INPUTS}


def checked_widgets(widgets_by_node: dict[str, dict[str, io.Input]], node_type, inputs: dict) -> dict:
    """The values of the widgets the cost of node ``node_type`` depends on, each of the type and within the range
    the node declares (one not sent takes its default); raises RouteRefused naming the widget."""
    widgets = widgets_by_node.get(node_type) if isinstance(node_type, str) else None
    if widgets is None:
        raise RouteRefused(400, f"node: got {shown(node_type)}; use {' or '.join(widgets_by_node)}")
    values = {}
    for name, widget in widgets.items():
        value = inputs.get(name, widget.default)
        if isinstance(widget, io.Int.Input):
            whole_number(value, name, widget.min, widget.max)
        elif isinstance(widget, io.Float.Input):
            number(value, name, widget.min, widget.max)
        else:
            text(value, name, "text, as the widget holds it")
        values[name] = value
    return values


def planned_cost(node, inputs: dict, clip_connected: bool) -> RolloutCount:
    """What the calibration a node's widget values (checked by ``checked_widgets``) describe will run, from the very
    plans it runs (raises ValueError naming the input, also for a cache window the node refuses). With a text encoder
    on clip every line of prompt is a prompt; otherwise there is one."""
    windows = node.validate_inputs(**{name: value for name, value in inputs.items() if name in WINDOW_INPUTS})
    if windows is not True:
        raise ValueError(windows)
    return node.planned_rollouts(inputs, len(prompt_lines(inputs["prompt"])) if clip_connected else 1)


def register_calibration_cost_route(routes: ExtensionRoutes, calibrating_nodes) -> None:
    """POST /cachedsearch/calibration_cost on a running ComfyUI server, for ``calibrating_nodes`` (the Calibrate
    node classes, handed in so that no route imports a node module): {"node": its id, "inputs": its widget values,
    "clip": whether a text encoder is connected} -> the cost (``RolloutCount.as_dict``), or a 4xx with {"error": the
    message naming the input}."""
    nodes = {node.define_schema().node_id: node for node in calibrating_nodes}
    widgets_by_node = {node_id: cost_widgets(node) for node_id, node in nodes.items()}

    @routes.post(COST_ROUTE)
    async def calibration_cost(request):
        body = await read_json_object(request, COST_MAX_BYTES, COST_REQUEST)
        check_fields(body, ("node", "inputs"), ("clip",), COST_REQUEST)
        if not isinstance(body["inputs"], dict):
            raise RouteRefused(400, f"inputs: got {shown(body['inputs'])}; use an object of the node's widget values "
                                    "by name")
        clip = flag(body.get("clip", False), "clip", "whether a text encoder is connected to the node's clip")
        inputs = checked_widgets(widgets_by_node, body["node"], body["inputs"])
        try:
            cost = planned_cost(nodes[body["node"]], inputs, clip)
        except ValueError as error:  # the node's own message for a value it would refuse
            raise RouteRefused(400, str(error)) from None
        # What recording previews adds (Calibrate scores each cached rollout's previews), said in the same line.
        prompts = len(prompt_lines(inputs["prompt"])) if clip else 1
        return json_answer(with_preview_cost(cost, planned_preview_cost(inputs, prompts)))
