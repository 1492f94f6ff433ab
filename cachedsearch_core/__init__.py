"""Framework-free core of CachedSearch, never importing ComfyUI: the step cache, the search's bookkeeping and cost,
pruning and budget plans, calibration, the pick, the verifiers and the distributed search's wire format.

This top level re-exports the step cache, the search bookkeeping and the search's cost model, which need torch and
the standard library only; the other modules are imported by name and may need numpy, safetensors (the draft
exchange) or transformers (the verifiers, imported when a verifier is built)."""

from .cost import SearchCost
from .records import MAX_CANDIDATES, Draft, Ranking, StageCalls, candidate_seeds, parse_scores
from .search_report import search_cost, search_report
from .step_cache import (
    BranchState,
    CacheMode,
    CacheStatistics,
    StepCacheConfig,
    TransformationVectorCache,
    in_always_compute_window,
    static_schedule_skips,
)

__all__ = [
    "MAX_CANDIDATES",
    "Draft",
    "Ranking",
    "SearchCost",
    "StageCalls",
    "candidate_seeds",
    "parse_scores",
    "search_cost",
    "search_report",
    "BranchState",
    "CacheMode",
    "CacheStatistics",
    "StepCacheConfig",
    "TransformationVectorCache",
    "in_always_compute_window",
    "static_schedule_skips",
]
