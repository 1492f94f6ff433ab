"""Whether our node ids are ours alone.

ComfyUI keeps one class per node id: a pack loaded later replaces an earlier pack's node of the same id without a
word. Another pack with this method's name exists (the report authors' ComfyUI-CachedSearch), so a clash is
possible: this pack says so in one log line per clash, naming both packs, whichever loaded first.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("CachedSearch")


def _pack_of(node_class) -> str:
    return getattr(node_class, "RELATIVE_PYTHON_MODULE", None) or node_class.__module__


def clash_lines(node_classes, registered: dict) -> list[str]:
    """One line for each of ``node_classes`` whose id ``registered`` (ComfyUI's NODE_CLASS_MAPPINGS) maps to a class
    from another pack."""
    lines = []
    for node_class in node_classes:
        node_id = node_class.GET_SCHEMA().node_id
        holder = registered.get(node_id)
        if holder is not None and holder is not node_class and _pack_of(holder) != _pack_of(node_class):
            lines.append(f"CachedSearch: node id {node_id} is also registered by the pack {_pack_of(holder)}; "
                         f"ComfyUI keeps one of the two (this pack is {_pack_of(node_class)}): remove one pack, "
                         "or workflows may run the other pack's node")
    return lines


def warn_about_clashes(node_classes) -> None:
    """Log clashes with the packs loaded so far, and once loading has ended (the event loop runs again), with the
    packs loaded after this one."""
    import nodes as comfy_nodes

    for line in clash_lines(node_classes, comfy_nodes.NODE_CLASS_MAPPINGS):
        log.warning(line)

    def after_loading():
        for line in clash_lines(node_classes, comfy_nodes.NODE_CLASS_MAPPINGS):
            log.warning(line)

    try:
        asyncio.get_running_loop().call_soon(after_loading)
    except RuntimeError:  # loaded outside an event loop (a script): only the packs before this one are known
        pass
