"""Convert between ComfyUI's API graph format and its GUI (LiteGraph) workflow format.

The GUI format stores widget values positionally, in the order of the node's
inputs in ``/object_info``, with one extra value after any input that has a
control-after-generate widget (seeds). Frontend-only nodes (notes) have no
``/object_info`` entry and no API counterpart. A bypassed node (mode 4) is
left out of the API graph, its consumers fed by its input of the same type,
as the frontend queues it.
"""

from __future__ import annotations

WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
FRONTEND_ONLY_NODES = {"Note", "MarkdownNote"}
BYPASSED_MODE = 4


def _ordered_inputs(info: dict) -> list[tuple[str, list]]:
    ordered = []
    for section in ("required", "optional"):
        specs = info["input"].get(section, {})
        for name in info.get("input_order", {}).get(section, list(specs)):
            ordered.append((name, specs[name]))
    return ordered


def is_widget(spec: list) -> bool:
    kind = spec[0]
    options = spec[1] if len(spec) > 1 else {}
    if options.get("forceInput"):
        return False
    return isinstance(kind, list) or kind in WIDGET_TYPES


def widget_slots(info: dict) -> list[tuple[str | None, list | None]]:
    """(input name, spec) per widget value, with (None, None) for a control-after-generate value."""
    slots = []
    for name, spec in _ordered_inputs(info):
        if is_widget(spec):
            slots.append((name, spec))
            if len(spec) > 1 and spec[1].get("control_after_generate"):
                slots.append((None, None))
    return slots


def api_to_gui(api: dict, object_info: dict, layout: dict, titles: dict | None = None, notes=(), groups=(),
               bypassed=()) -> dict:
    """A GUI workflow for ``api``. ``layout`` maps node id -> (x, y, width, height); the nodes in ``bypassed``
    are present but bypassed."""
    titles = titles or {}
    ids = {key: index + 1 for index, key in enumerate(api)}
    nodes, links = [], []
    outgoing: dict[tuple[str, int], list[int]] = {}
    for key, node in api.items():
        for name, value in node["inputs"].items():
            if isinstance(value, list):
                source, slot = value
                link_id = len(links) + 1
                output_type = object_info[api[source]["class_type"]]["output"][slot]
                links.append([link_id, ids[source], slot, ids[key], None, output_type, name])
                outgoing.setdefault((source, slot), []).append(link_id)
    for order, (key, node) in enumerate(api.items()):
        info = object_info[node["class_type"]]
        inputs, widgets_values = [], []
        for name, spec in _ordered_inputs(info):
            value = node["inputs"].get(name)
            linked = isinstance(value, list)
            if is_widget(spec):
                default = spec[1].get("default") if len(spec) > 1 else None
                widgets_values.append(default if linked or value is None else value)
                if len(spec) > 1 and spec[1].get("control_after_generate"):
                    widgets_values.append("fixed")
            if linked or not is_widget(spec):
                entry = {"name": name, "type": _socket_type(spec), "link": None}
                if is_widget(spec):
                    entry["widget"] = {"name": name}
                if linked:
                    link = next(link for link in links if link[3] == ids[key] and link[6] == name)
                    link[4] = len(inputs)
                    entry["link"] = link[0]
                inputs.append(entry)
        outputs = [
            {"name": out_name, "type": out_type, "links": outgoing.get((key, slot), []), "slot_index": slot}
            for slot, (out_name, out_type) in enumerate(zip(info["output_name"], info["output"]))
        ]
        x, y, width, height = layout[key]
        gui_node = {
            "id": ids[key], "type": node["class_type"], "pos": [x, y], "size": [width, height], "flags": {},
            "order": order, "mode": BYPASSED_MODE if key in bypassed else 0, "inputs": inputs, "outputs": outputs,
            "properties": {"Node name for S&R": node["class_type"]}, "widgets_values": widgets_values,
        }
        if key in titles:
            gui_node["title"] = titles[key]
        nodes.append(gui_node)
    next_id = len(nodes) + 1
    for index, (text, (x, y, width, height)) in enumerate(notes):
        nodes.append({"id": next_id + index, "type": "MarkdownNote", "pos": [x, y], "size": [width, height],
                      "flags": {}, "order": len(nodes), "mode": 0, "inputs": [], "outputs": [],
                      "properties": {}, "widgets_values": [text], "title": "About this workflow"})
    return {
        "last_node_id": len(nodes), "last_link_id": len(links),
        "nodes": nodes,
        "links": [link[:6] for link in links],
        "groups": [{"title": title, "bounding": list(box), "color": color, "font_size": 24, "flags": {}}
                   for title, box, color in groups],
        "config": {}, "extra": {"ds": {"scale": 0.6, "offset": [40, 40]}}, "version": 0.4,
    }


def _socket_type(spec: list) -> str:
    return "COMBO" if isinstance(spec[0], list) else spec[0]


def gui_to_api(gui: dict, object_info: dict) -> dict:
    """The API graph a GUI workflow queues (node ids as strings, notes and bypassed nodes dropped)."""
    links = {link[0]: link for link in gui["links"]}
    by_id = {node["id"]: node for node in gui["nodes"]}

    def upstream(source: int, slot: int) -> tuple[int, int]:
        node = by_id[source]
        if node.get("mode") != BYPASSED_MODE:
            return source, slot
        kind = node["outputs"][slot]["type"]
        entry = next(entry for entry in node["inputs"] if entry["type"] == kind and entry.get("link") is not None)
        _, passed_source, passed_slot, *_ = links[entry["link"]]
        return upstream(passed_source, passed_slot)

    api = {}
    for node in gui["nodes"]:
        if node["type"] in FRONTEND_ONLY_NODES or node.get("mode") == BYPASSED_MODE:
            continue
        info = object_info[node["type"]]
        inputs = {}
        values = iter(node.get("widgets_values", []))
        for name, _spec in widget_slots(info):
            value = next(values)
            if name is not None:
                inputs[name] = value
        for entry in node.get("inputs", []):
            if entry.get("link") is not None:
                source, slot = upstream(*links[entry["link"]][1:3])
                inputs[entry["name"]] = [str(source), slot]
        api[str(node["id"])] = {"class_type": node["type"], "inputs": inputs}
    return api
