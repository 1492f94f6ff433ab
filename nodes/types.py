"""The custom socket types the nodes connect with, and the schema options that differ between ComfyUI versions."""

from __future__ import annotations

import dataclasses
import inspect

from comfy_api.latest import io

Candidates = io.Custom("CACHEDSEARCH_CANDIDATES")
RankingType = io.Custom("CACHEDSEARCH_RANKING")
PruningPlanType = io.Custom("CACHEDSEARCH_PRUNING_PLAN")
BudgetType = io.Custom("CACHEDSEARCH_BUDGET")
Verifier = io.Custom("CACHEDSEARCH_VERIFIER")
VideoVerifier = io.Custom("CACHEDSEARCH_VIDEO_VERIFIER")
CombinedVerifier = io.Custom("CACHEDSEARCH_COMBINED_VERIFIER")

# When a re-queued graph reuses a node's cached result, ComfyUI sends that node no "executed" event. ComfyUI
# 0.33 resends the cached results of nodes flagged has_intermediate_output; an io.Schema without that field
# (0.3.75) cannot ask for it, and the frontend script then finds the results in the server's history.
SHOW_RESULTS_WHEN_CACHED = (
    {"has_intermediate_output": True}
    if "has_intermediate_output" in {field.name for field in dataclasses.fields(io.Schema)}
    else {}
)

# ComfyUI 0.33 can fold inputs marked advanced away on the node; 0.3.75's inputs have no such field.
ADVANCED_INPUT = {"advanced": True} if "advanced" in inspect.signature(io.Int.Input.__init__).parameters else {}
