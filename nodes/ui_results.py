"""Schema options for the nodes whose results the frontend shows (web/js/cachedsearch_results.js)."""

from __future__ import annotations

import dataclasses

from comfy_api.latest import io

# When a re-queued graph reuses a node's cached result, ComfyUI sends that node no "executed" event. ComfyUI
# 0.33 resends the cached results of nodes flagged has_intermediate_output; an io.Schema without that field
# (0.3.75) cannot ask for it, and the frontend script then finds the results in the server's history.
SHOW_RESULTS_WHEN_CACHED = (
    {"has_intermediate_output": True}
    if "has_intermediate_output" in {field.name for field in dataclasses.fields(io.Schema)}
    else {}
)
