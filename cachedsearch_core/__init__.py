"""Framework-free core of CachedSearch: the step cache, search bookkeeping and
cost model. Imports torch and the standard library only, never ComfyUI."""

from .search import (
    MAX_CANDIDATES,
    Draft,
    Ranking,
    SearchCost,
    StageCalls,
    candidate_seeds,
    parse_scores,
    search_report,
)
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
    "search_report",
    "BranchState",
    "CacheMode",
    "CacheStatistics",
    "StepCacheConfig",
    "TransformationVectorCache",
    "in_always_compute_window",
    "static_schedule_skips",
]
