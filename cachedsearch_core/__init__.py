"""Framework-free core of CachedSearch, never importing ComfyUI: the step cache, the search's records and cost,
pruning and budget plans, calibration, the pick, the verifiers and the distributed search's wire format.

Layers, each importing only the ones below it (type-only imports included), from the bottom:

1. records and leaves: ``records`` (drafts, stage calls, rankings, seeds), ``step_cache`` (with its
   ``step_cache_config`` and ``cache_statistics``), ``work_count``,
   ``fidelity``, ``safe_files``, ``jsonl_store``, ``saved_work`` (the one store of saved drafts and rollouts),
   ``image_reward``
2. the cost model, on records only: ``cost_formulas`` (the shared formulas in plain numbers; pruning and budget hand
   the model their extra work as ``cost_formulas.ExtraWork``) and ``cost`` (a search's cost, ``SearchCost``); the
   verifiers and the judge: ``clip_score``, ``video_score``, ``judge`` (the one frame rule), ``combine``; what
   stores and ships records: ``seed_slices``, ``draft_exchange``, ``audit``, ``saved_rollouts``, ``draft_store``,
   ``calibration_memory``
3. plans with their own formulas: ``pruning`` (the pruned search's steps), ``budget``, ``pruned_budget``,
   ``search_policy`` (search policies replayed on recorded rollouts); calibration: ``calibration``,
   ``calibration_chart``, ``calibration_results``, ``calibration_experts``
4. reports: ``search_report`` (the search's report and its cost), ``panels``, ``pick``, ``search_audit``,
   ``policy_chooser`` (the search policy a budget buys, from recorded rollouts)

This top level re-exports the step cache, the records, the search's cost model and report, which need torch and
the standard library only; the other modules are imported by name and may need numpy, safetensors (the draft
exchange) or transformers (the verifiers, imported when a verifier is built)."""

from .cost import SearchCost
from .records import MAX_CANDIDATES, Draft, Ranking, StageCalls, candidate_seeds, parse_scores
from .search_report import search_cost, search_report
from .cache_statistics import CacheStatistics
from .step_cache import BranchState, TransformationVectorCache
from .step_cache_config import CacheMode, StepCacheConfig, in_always_compute_window, static_schedule_skips

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
