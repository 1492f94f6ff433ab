"""A node's inputs in the server's API prompt as the graph makes them: what saved work is keyed by (a search's drafts,
``saved_drafts``; a calibration's rollouts, ``calibration_rollouts``), so that the same graph gives the same key
whether the frontend or an API client queued it."""

from __future__ import annotations

import nodes as comfy_nodes


def upstream(prompt: dict, value):
    """An input of the API prompt as the graph makes it: a link replaced by the node it comes from (its class and
    inputs, upstream links followed), a plain value as it is."""
    if not (isinstance(value, list) and len(value) == 2 and str(value[0]) in prompt):
        return value
    node = prompt[str(value[0])]
    return {"class_type": node.get("class_type"), "output": value[1],
            "inputs": {name: upstream(prompt, inner) for name, inner in sorted(node.get("inputs", {}).items())}}


def with_defaults(node):
    """``upstream``'s graph with every input a node leaves out at its default (the frontend writes each widget's
    value, an API prompt may leave an optional one out: the same graph either way)."""
    if not (isinstance(node, dict) and "class_type" in node):
        return node
    inputs = {name: with_defaults(value) for name, value in node["inputs"].items()}
    node_class = comfy_nodes.NODE_CLASS_MAPPINGS.get(node["class_type"])
    try:
        declared = node_class.INPUT_TYPES() if node_class is not None else {}
    except Exception:  # a node pack's INPUT_TYPES that fails here: its inputs as given
        declared = {}
    for section in ("required", "optional"):
        for name, spec in (declared.get(section) or {}).items():
            options = spec[1] if isinstance(spec, (list, tuple)) and len(spec) > 1 else None
            if name not in inputs and isinstance(options, dict) and "default" in options:
                inputs[name] = options["default"]
    return {**node, "inputs": dict(sorted(inputs.items()))}
