"""A built workflow in the shape of ComfyUI's official templates (comfyui-workflow-templates' Wan 2.2 and LTX-2.3
ones): the pipeline inside one subgraph (``definitions.subgraphs``), on the top level only its subgraph node, the
nodes that show the result (SaveVideo) and the notes. The inputs an artist sets on every run are promoted onto the
subgraph node: each is a subgraph input linked from the subgraph's input node (id -10) to the inner widget, left
unlinked on the subgraph node, and listed in the node's ``proxyWidgets`` so the frontend shows that widget there.
scripts/workflow_format.py's gui_to_api reads the result back as the frontend queues it."""

from __future__ import annotations

import uuid

from scripts.workflow_format import (
    COLUMN_GAP, FRONTEND_ONLY_NODES, NODE_GAP, RESULTS_ROOM, SUBGRAPH_INPUT_NODE, SUBGRAPH_OUTPUT_NODE, TITLE_HEIGHT,
    VUE_WIDGET, input_order_and_type, subgraph_definitions,
)

# Ids derived from the subgraph's name: building the same workflow again writes the same file.
ID_NAMESPACE = uuid.UUID("5f2d7c3e-8a41-4b6e-9f0d-2c1a7e9b4d60")
SUBGRAPH_NODE_WIDTH = 420
# Below its widgets a subgraph node holding a search shows what the search inside did and an "open the subgraph"
# button (web/js/cachedsearch_subgraph_view.js).
OUTSIDE_SUMMARY_ROOM = 160
IO_NODE_WIDTH = 180


def _id(name: str, *parts) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, "/".join(map(str, (name, *parts)))))


def wrap_in_subgraph(gui: dict, object_info: dict, name: str, outside: set[int],
                     promoted: list[tuple[int, str, str | None]]) -> dict:
    """``gui`` (a flat GUI workflow) with every node but the notes and those in ``outside`` moved into a subgraph
    called ``name``, whose node takes their place. ``promoted``: (inner node id, input name, label or None) of each
    widget shown on the subgraph node, in order. Only links from the pipeline out are allowed across (into
    ``outside``): the shipped pipelines start at their loaders. A subgraph node among the nodes moved makes a
    nested subgraph (its own inputs stay as they are: only widgets of ComfyUI nodes are promoted here)."""
    inside = {node["id"] for node in gui["nodes"] if node["type"] not in FRONTEND_ONLY_NODES} - outside
    by_id = {node["id"]: node for node in gui["nodes"]}
    node_id = gui["last_node_id"] + 1
    next_link = [gui["last_link_id"]]

    def new_link() -> int:
        next_link[0] += 1
        return next_link[0]

    inner_links, top_links, outputs = [], [], {}
    for link_id, origin, slot, target, target_slot, kind in gui["links"]:
        if origin in inside and target in inside:
            inner_links.append({"id": link_id, "origin_id": origin, "origin_slot": slot, "target_id": target,
                                "target_slot": target_slot, "type": kind})
        elif origin in inside:
            index = outputs.setdefault((origin, slot), len(outputs))
            top_links.append([link_id, node_id, index, target, target_slot, kind])
        elif target in inside:
            raise ValueError(f"link {link_id} enters the subgraph from node {origin}: put that node inside too")
        else:
            top_links.append([link_id, origin, slot, target, target_slot, kind])
    subgraph_outputs, node_outputs = [], []
    for (origin, slot), index in outputs.items():
        output = by_id[origin]["outputs"][slot]
        link_id = new_link()
        inner_links.append({"id": link_id, "origin_id": origin, "origin_slot": slot, "target_id": SUBGRAPH_OUTPUT_NODE,
                            "target_slot": index, "type": output["type"]})
        subgraph_outputs.append({"id": _id(name, "output", index), "name": output["name"], "type": output["type"],
                                 "linkIds": [link_id]})
        node_outputs.append({"name": output["name"], "type": output["type"],
                             "links": [link[0] for link in top_links if link[1] == node_id and link[2] == index]})
    subgraph_inputs, node_inputs, taken = [], [], {}
    for index, (target, input_name, label) in enumerate(promoted):
        link_id = new_link()
        kind = _promote_widget(by_id[target], input_name, link_id, object_info)
        # the second input promoting a `unet_name` is `unet_name_1`, as the frontend names it
        unique = input_name if input_name not in taken else f"{input_name}_{taken[input_name]}"
        taken[input_name] = taken.get(input_name, 0) + 1
        inner_links.append({"id": link_id, "origin_id": SUBGRAPH_INPUT_NODE, "origin_slot": index,
                            "target_id": target, "target_slot": None, "type": kind})
        subgraph_inputs.append({"id": _id(name, "input", index), "name": unique, "type": kind, "linkIds": [link_id],
                                **({"label": label} if label else {})})
        node_inputs.append({**({"label": label} if label else {}), "name": unique, "type": kind,
                            "widget": {"name": unique}, "link": None})
    inner_nodes = [by_id[key] for key in sorted(inside)]
    _renumber_target_slots(inner_links, by_id)
    left = min(node["pos"][0] for node in inner_nodes)
    top = min(node["pos"][1] for node in inner_nodes)
    right = max(node["pos"][0] + node["size"][0] for node in inner_nodes)
    definition = {
        "id": _id(name, "subgraph"), "version": 1, "revision": 0, "name": name, "config": {}, "extra": {},
        "state": {"lastGroupId": len(gui["groups"]), "lastNodeId": node_id, "lastLinkId": next_link[0],
                  "lastRerouteId": 0},
        "inputNode": {"id": SUBGRAPH_INPUT_NODE,
                      "bounding": [left - IO_NODE_WIDTH - COLUMN_GAP, top, IO_NODE_WIDTH, 40 + 20 * len(promoted)]},
        "outputNode": {"id": SUBGRAPH_OUTPUT_NODE, "bounding": [right + COLUMN_GAP, top, 120, 60]},
        "inputs": subgraph_inputs, "outputs": subgraph_outputs, "widgets": [], "nodes": inner_nodes,
        # the frontend keys a subgraph's groups by id
        "groups": [{**group, "id": index + 1} for index, group in enumerate(gui["groups"])], "links": inner_links,
    }
    height = VUE_WIDGET * len(promoted) + 40 + OUTSIDE_SUMMARY_ROOM
    subgraph_node = {
        "id": node_id, "type": definition["id"], "title": name, "pos": [left, top],
        "size": [SUBGRAPH_NODE_WIDTH, height], "flags": {}, "order": 0, "mode": 0, "inputs": node_inputs,
        "outputs": node_outputs, "widgets_values": [],
        "properties": {"proxyWidgets": [[str(target), input_name] for target, input_name, _ in promoted]},
    }
    beside = _stacked([node for node in gui["nodes"] if node["id"] in outside],
                      left + SUBGRAPH_NODE_WIDTH + COLUMN_GAP, top)
    bottom = max([top + height + TITLE_HEIGHT + NODE_GAP] + [node["pos"][1] + node["size"][1] + NODE_GAP
                  + RESULTS_ROOM.get(node["type"], (0, 0))[1] for node in beside])
    notes = _stacked([node for node in gui["nodes"] if node["type"] in FRONTEND_ONLY_NODES], left,
                     bottom + TITLE_HEIGHT)
    top_nodes = [subgraph_node, *beside, *notes]
    for order, node in enumerate(top_nodes):
        node["order"] = order
    return {**gui, "last_node_id": node_id, "last_link_id": next_link[0], "nodes": top_nodes, "links": top_links,
            "groups": [], "definitions": {"subgraphs": [*subgraph_definitions(gui).values(), definition]}}


def _promote_widget(node: dict, input_name: str, link_id: int, object_info: dict) -> str:
    """Gives ``node`` the socket of its widget ``input_name``, linked by ``link_id`` (in /object_info's order among
    its sockets, as the frontend lists them); returns the socket type."""
    info = object_info[node["type"]]
    place, kind = input_order_and_type(info, input_name)
    entries = node["inputs"]
    at = next((index for index, entry in enumerate(entries)
               if input_order_and_type(info, entry["name"])[0] > place), len(entries))
    entries.insert(at, {"name": input_name, "type": kind, "widget": {"name": input_name}, "link": link_id})
    return kind


def _renumber_target_slots(links: list[dict], by_id: dict) -> None:
    """Each link's target_slot: the place of the input that holds it (sockets were inserted by _promote_widget)."""
    for link in links:
        if link["target_id"] != SUBGRAPH_OUTPUT_NODE:
            entries = by_id[link["target_id"]]["inputs"]
            link["target_slot"] = next(index for index, entry in enumerate(entries) if entry["link"] == link["id"])


def _stacked(nodes: list[dict], x: int, y: int) -> list[dict]:
    """``nodes`` stacked in a column from (x, y), each followed by the room for the results it shows after a run."""
    for node in nodes:
        node["pos"] = [x, y]
        y += node["size"][1] + RESULTS_ROOM.get(node["type"], (0, 0))[1] + TITLE_HEIGHT + NODE_GAP
    return nodes


def subgraph_shape(gui: dict) -> dict | None:
    """What wrap_in_subgraph was given for a workflow it wrote, in execution ids: {"name": the subgraph's name,
    "node": its node's id, "promoted": [(inner node's execution id, input name, label or None)]}; None for a
    workflow without a subgraph."""
    definitions = subgraph_definitions(gui)
    nodes = [node for node in gui["nodes"] if node["type"] in definitions]
    if not nodes:
        return None
    (node,) = nodes
    definition = definitions[node["type"]]
    links = {link["id"]: link for link in definition["links"]}
    promoted = []
    for entry in definition["inputs"]:
        link = links[entry["linkIds"][0]]
        target = next(inner for inner in definition["nodes"] if inner["id"] == link["target_id"])
        promoted.append((f"{node['id']}:{target['id']}", target["inputs"][link["target_slot"]]["name"],
                         entry.get("label")))
    return {"name": definition["name"], "node": str(node["id"]), "promoted": promoted}
