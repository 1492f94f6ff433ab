"""Convert between ComfyUI's API graph format and its GUI (LiteGraph) workflow format.

The GUI format stores widget values positionally, in the order of the node's
inputs in ``/object_info``, with one extra value after any input that has a
control-after-generate widget (seeds). A dynamic combo (``COMFY_DYNAMICCOMBO_V3``,
e.g. SaveVideo's ``format`` on ComfyUI 0.33) is a widget followed by the widgets
of its selected option, named ``parent.child`` in the API graph. The frontend
gives widgets missing from ``widgets_values`` their defaults and ignores surplus
values, so one file serves runtimes whose nodes gained inputs. Frontend-only
nodes (notes) have no ``/object_info`` entry and no API counterpart. A bypassed
node (mode 4) is left out of the API graph, its consumers fed by its input of
the same type, as the frontend queues it. A workflow in the shape of ComfyUI's official templates holds its
pipeline in a subgraph (``definitions.subgraphs``; a subgraph node's ``type`` is its subgraph's id): its links
from the subgraph's input node (id -10) come from the subgraph node's inputs, its links to the output node
(id -20) feed the subgraph node's outputs, and an input left unlinked on the subgraph node carries the value of
the inner widget it promotes (``proxyWidgets`` in the node's properties lists the inner widgets it shows).
"""

from __future__ import annotations

WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
DYNAMIC_COMBO = "COMFY_DYNAMICCOMBO_V3"
FRONTEND_ONLY_NODES = {"Note", "MarkdownNote"}
# Queueing a shipped workflow again searches a fresh seed range (a fixed seed would repeat the search).
SEED_CONTROL = "randomize"
BYPASSED_MODE = 4
# The saved format's ids of a subgraph's input and output nodes, in its links.
SUBGRAPH_INPUT_NODE, SUBGRAPH_OUTPUT_NODE = -10, -20


def _ordered_inputs(info: dict) -> list[tuple[str, list]]:
    ordered = []
    for section in ("required", "optional"):
        specs = info["input"].get(section, {})
        for name in info.get("input_order", {}).get(section, list(specs)):
            ordered.append((name, specs[name]))
    return ordered


def _options(spec: list) -> dict:
    return spec[1] if len(spec) > 1 else {}


def is_widget(spec: list) -> bool:
    if _options(spec).get("forceInput"):
        return False
    # "FLOAT,INT" inputs (LTX-2's frame rates) name the widget they show in widgetType, as the frontend reads them
    return isinstance(spec[0], list) or spec[0] in WIDGET_TYPES or spec[0] == DYNAMIC_COMBO or \
        _options(spec).get("widgetType") in WIDGET_TYPES


def default_value(spec: list):
    """The value a frontend gives a new widget for this input spec."""
    options = _options(spec)
    if "default" in options:
        return options["default"]
    if spec[0] == DYNAMIC_COMBO:
        return options["options"][0]["key"]
    choices = spec[0] if isinstance(spec[0], list) else options.get("options")
    return choices[0] if choices else None


def _selected_option_inputs(spec: list, selected) -> list[tuple[str, list]]:
    for option in _options(spec)["options"]:
        if option["key"] == selected:
            return [(name, nested) for section in ("required", "optional")
                    for name, nested in option["inputs"].get(section, {}).items()]
    return []


def widget_values(inputs: list[tuple[str, list]], value_of, prefix: str = "") -> list[tuple[str | None, object]]:
    """(API input name, value) per GUI widget value, in the frontend's order; the name is None for a
    control-after-generate value. ``value_of(name, spec)`` gives each value (name None: the control's); a
    dynamic combo's value selects the option whose widgets follow it."""
    slots = []
    for name, spec in inputs:
        if not is_widget(spec):
            continue
        value = value_of(prefix + name, spec)
        slots.append((prefix + name, value))
        if _options(spec).get("control_after_generate"):
            slots.append((None, value_of(None, spec)))
        if spec[0] == DYNAMIC_COMBO:
            slots += widget_values(_selected_option_inputs(spec, value), value_of, f"{prefix}{name}.")
    return slots


def _gui_widgets_values(given: dict, info: dict, seed_control: str) -> list:
    """A node's ``widgets_values``: its API values, and defaults where an input is linked or not given."""

    def value_of(name, spec):
        if name is None:
            return seed_control
        value = given.get(name)
        return default_value(spec) if value is None or isinstance(value, list) else value

    return [value for _, value in widget_values(_ordered_inputs(info), value_of)]


def api_to_gui(api: dict, object_info: dict, layout: dict, titles: dict | None = None, notes=(), groups=(),
               seed_control: str = SEED_CONTROL, bypassed=()) -> dict:
    """A GUI workflow for ``api``. ``layout`` maps node id -> (x, y, width, height); ``seed_control`` is every
    control-after-generate widget's mode; the nodes in ``bypassed`` are present but bypassed."""
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
        widgets_values = _gui_widgets_values(node["inputs"], info, seed_control)
        inputs = []
        for name, spec in _ordered_inputs(info):
            linked = isinstance(node["inputs"].get(name), list)
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


def input_order_and_type(info: dict, name: str) -> tuple[int, str]:
    """(place among the node's inputs in /object_info, socket type) of input ``name``."""
    for place, (input_name, spec) in enumerate(_ordered_inputs(info)):
        if input_name == name:
            return place, _socket_type(spec)
    raise KeyError(f"{name} is not an input of this node (its inputs: {[n for n, _ in _ordered_inputs(info)]})")


def gui_widget_slots(gui_node: dict, info: dict) -> list[tuple[str | None, object]]:
    """(API input name, value) per widget of a GUI node as the frontend reads it: missing values take their
    defaults, surplus ones are ignored; the name is None for a control-after-generate mode."""
    values = iter(gui_node.get("widgets_values", []))
    return widget_values(_ordered_inputs(info), lambda _name, spec: next(values, default_value(spec)))


class _Scope:
    """One graph of a GUI workflow as the frontend executes it: the top level, or a subgraph's inner graph entered
    through its subgraph node. ``prefix`` makes a node id its execution id ("18:12": node 12 inside node 18)."""

    def __init__(self, graph: dict, definitions: dict, prefix: str = "", parent=None, node: dict | None = None):
        self.graph, self.definitions, self.prefix, self.parent, self.node = graph, definitions, prefix, parent, node
        self.by_id = {entry["id"]: entry for entry in graph["nodes"]}
        # link id -> (origin id, origin slot, target id, target slot): lists at the top level, objects in a subgraph
        self.links = {}
        for link in graph.get("links", []):
            if isinstance(link, dict):
                self.links[link["id"]] = tuple(link[key] for key in ("origin_id", "origin_slot", "target_id",
                                                                     "target_slot"))
            else:
                self.links[link[0]] = tuple(link[1:5])

    def enter(self, node: dict) -> "_Scope":
        return _Scope(self.definitions[node["type"]], self.definitions, f"{self.prefix}{node['id']}:", self, node)

    def source(self, link_id: int):
        """What a link delivers: an API reference [execution id, slot], or a _Promoted widget's value."""
        origin, slot = self.links[link_id][:2]
        if origin == SUBGRAPH_INPUT_NODE:
            return self.parent_source(slot)
        node = self.by_id[origin]
        if node.get("mode") == BYPASSED_MODE:  # fed by its input of the same type, as the frontend queues it
            kind = node["outputs"][slot]["type"]
            entry = next(entry for entry in node["inputs"] if entry["type"] == kind and entry.get("link") is not None)
            return self.source(entry["link"])
        if node["type"] in self.definitions:
            inner = self.enter(node)
            (link_id,) = [key for key, (_, _, target, target_slot) in inner.links.items()
                          if target == SUBGRAPH_OUTPUT_NODE and target_slot == slot]
            return inner.source(link_id)
        return [f"{self.prefix}{origin}", slot]

    def parent_source(self, index: int):
        """What feeds this subgraph's input ``index``: the subgraph node's link outside, else the widget it
        promotes (the node's input without a link)."""
        name = self.graph["inputs"][index]["name"]
        entry = next((entry for entry in self.node.get("inputs", []) if entry["name"] == name), {})
        if entry.get("link") is not None:
            return self.parent.source(entry["link"])
        return _Promoted(self, index)


class _Promoted:
    """A subgraph input promoting an inner widget, unlinked outside. The frontend copies the widget of the input's
    first target onto the subgraph node when it loads the workflow (the official templates save the subgraph
    node's own widgets_values empty), so every target takes that first one's value."""

    def __init__(self, scope: _Scope, index: int):
        self.scope, self.index = scope, index

    def value(self, object_info: dict):
        first = self.scope.graph["inputs"][self.index]["linkIds"][0]
        _, _, target, slot = self.scope.links[first]
        node = self.scope.by_id[target]
        name = node["inputs"][slot]["name"]
        if node["type"] in self.scope.definitions:  # promoted again, from a subgraph inside
            inner = self.scope.enter(node)
            index = next(i for i, entry in enumerate(inner.graph["inputs"]) if entry["name"] == name)
            return _Promoted(inner, index).value(object_info)
        return dict(gui_widget_slots(node, object_info[node["type"]])).get(name)


def subgraph_definitions(gui: dict) -> dict[str, dict]:
    """Subgraph id -> its definition, at any depth (a subgraph node's ``type`` is its subgraph's id)."""
    found = {}
    for definition in gui.get("definitions", {}).get("subgraphs", []):
        found[definition["id"]] = definition
        found.update(subgraph_definitions(definition))
    return found


def nodes_by_execution_id(gui: dict) -> dict[str, dict]:
    """Execution id -> GUI node, for every node of the workflow, those inside subgraphs (any depth) included."""
    found = {}

    def walk(scope: _Scope) -> None:
        for node in scope.graph["nodes"]:
            found[f"{scope.prefix}{node['id']}"] = node
            if node["type"] in scope.definitions:
                walk(scope.enter(node))

    walk(_Scope(gui, subgraph_definitions(gui)))
    return found


def gui_to_api(gui: dict, object_info: dict) -> dict:
    """The API graph a GUI workflow queues, as the frontend's graphToPrompt builds it: node ids as strings, the
    nodes inside subgraphs (any depth) by their execution ids ("18:12"), links through subgraph inputs and outputs
    followed to the nodes that feed them, notes and bypassed nodes dropped."""
    api = {}
    _add_graph(_Scope(gui, subgraph_definitions(gui)), object_info, api)
    return api


def _add_graph(scope: _Scope, object_info: dict, api: dict) -> None:
    for node in scope.graph["nodes"]:
        if node["type"] in FRONTEND_ONLY_NODES or node.get("mode") == BYPASSED_MODE:
            continue
        if node["type"] in scope.definitions:
            _add_graph(scope.enter(node), object_info, api)
            continue
        inputs = {name: value for name, value in gui_widget_slots(node, object_info[node["type"]]) if name is not None}
        for entry in node.get("inputs", []):
            if entry.get("link") is not None:
                source = scope.source(entry["link"])
                if isinstance(source, _Promoted):
                    source = source.value(object_info)
                if source is None:  # a promoted socket (not a widget) with nothing linked outside: no input
                    inputs.pop(entry["name"], None)
                else:
                    inputs[entry["name"]] = source
        api[f"{scope.prefix}{node['id']}"] = {"class_type": node["type"], "inputs": inputs}


def widget_specs(info: dict, given: dict) -> dict[str, list]:
    """API input name -> input spec of each widget a node with the API inputs ``given`` shows (the selected
    options of dynamic combos included)."""
    specs = {}

    def value_of(name, spec):
        if name is not None:
            specs[name] = spec
        return given.get(name)

    widget_values(_ordered_inputs(info), value_of)
    return specs


def declared_inputs(api: dict, object_info: dict) -> dict:
    """``api`` with only the inputs each node declares in ``object_info`` (what that runtime reads of it)."""
    declared = {}
    for key, node in api.items():
        info = object_info[node["class_type"]]
        given = node["inputs"]
        names = {name for name, spec in _ordered_inputs(info) if not is_widget(spec)} | set(widget_specs(info, given))
        declared[key] = {"class_type": node["class_type"],
                         "inputs": {name: value for name, value in given.items() if name in names}}
    return declared


# Layout of a generated workflow. The room a node takes on the canvas differs between the classic renderer and
# Nodes 2.0 (taller widget rows and sockets there), so every estimate takes the larger of the two. A node is
# drawn as tall as its widgets; the results it shows after a run (the CachedSearch panels with N = 8 rows, video
# and image previews) get that room as free space below it, so it grows without reaching its neighbour or
# leaving its group.
TITLE_HEIGHT = 40  # above a node's position (classic title bar 30 px; Nodes 2.0 header)
NODE_GAP = 40
COLUMN_GAP = 70
GROUP_PADDING, GROUP_TITLE = 20, 50
DEFAULT_NODE_WIDTH = 340
CLASSIC_ROW, CLASSIC_WIDGET, VUE_ROW, VUE_WIDGET = 20, 24, 26, 40
MULTILINE_ROOM = 140
# class_type -> (width, height of the results shown below the widgets after a run)
RESULTS_ROOM = {
    "CachedSearchVerifier": (520, 720), "CachedSearchVideoVerifier": (640, 720),
    "CachedSearchCombineScores": (560, 460),
    "CachedSearchSampler": (400, 300), "CachedSearchSamplerAdvanced": (400, 300),
    "CachedSearchSamplerExperts": (400, 320), "CachedSearchDistributedSampler": (400, 300),
    "CachedSearchRecommit": (400, 140), "CachedSearchCalibrate": (560, 420),
    "CachedSearchCalibrateExperts": (560, 520),
    "SaveVideo": (DEFAULT_NODE_WIDTH, 360), "SaveImage": (DEFAULT_NODE_WIDTH, 360),
    "PreviewImage": (DEFAULT_NODE_WIDTH, 360), "LoadImage": (DEFAULT_NODE_WIDTH, 300),
}


def node_room(node: dict, info: dict) -> tuple[int, int, int]:
    """(width, height of its widgets, height of its results after a run) of a node of the API graph, in the
    larger of the two renderers."""
    given = node["inputs"]
    sockets, widgets, multiline = 0, 0, 0
    for name, spec in _ordered_inputs(info):
        if isinstance(given.get(name), list) or not is_widget(spec):
            sockets += 1
            continue
        widgets += 2 if _options(spec).get("control_after_generate") else 1
        multiline += bool(_options(spec).get("multiline"))
    rows = max(sockets, len(info.get("output", [])))
    body = max(CLASSIC_ROW * rows + CLASSIC_WIDGET * widgets, VUE_ROW * rows + VUE_WIDGET * widgets) + 20
    width, results = RESULTS_ROOM.get(node["class_type"], (DEFAULT_NODE_WIDTH, 0))
    return width, body + MULTILINE_ROOM * multiline, results


def column_layout(api: dict, columns: dict[str, int], object_info: dict, top: int = 120, left: int = 60):
    """Nodes stacked in their columns (a column as wide as its widest node), each followed by its results' room.
    Returns (layout: key -> (x, y, width, height), boxes: column -> (x, y, width, height) of a group around it)."""
    rooms = {key: node_room(node, object_info[node["class_type"]]) for key, node in api.items()}
    layout, boxes, x = {}, {}, left
    for column in sorted(set(columns.values())):
        keys = [key for key in api if columns[key] == column]
        width = max(rooms[key][0] for key in keys)
        y = top
        for key in keys:
            _, body, results = rooms[key]
            layout[key] = (x, y, width, body)
            y += body + results + TITLE_HEIGHT + NODE_GAP
        boxes[column] = (x - GROUP_PADDING, top - TITLE_HEIGHT - GROUP_TITLE, width + 2 * GROUP_PADDING,
                         y - NODE_GAP - (top - TITLE_HEIGHT - GROUP_TITLE) + GROUP_PADDING)
        x += width + COLUMN_GAP
    return layout, boxes
