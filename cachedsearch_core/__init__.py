"""Framework-free core of CachedSearch: the step cache, search bookkeeping and
cost model. Imports torch and the standard library only, never ComfyUI."""

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
    "BranchState",
    "CacheMode",
    "CacheStatistics",
    "StepCacheConfig",
    "TransformationVectorCache",
    "in_always_compute_window",
    "static_schedule_skips",
]
