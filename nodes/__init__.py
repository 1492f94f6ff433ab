"""Thin ComfyUI adapters over cachedsearch_core."""

from comfy_api.latest import ComfyExtension, io

from .apply_cache_nodes import ApplyStepCache
from .budget_nodes import SearchBudget
from .calibrate_nodes import Calibrate, CalibrateExperts
from .calibration_cost import register_calibration_cost_route
from .distributed_nodes import DistributedSearchSampler
from .distributed_routes import register_server_hooks
from .node_ids import warn_about_clashes
from .pick import register_pick_routes
from .pruning_nodes import PruningPlanNode
from .search_nodes import RankingFromScores, Recommit, SearchSampler, SearchSamplerAdvanced, SearchSamplerExperts
from .verifier_nodes import (
    CombineScores, CombineVerifiers, LoadClipVerifier, LoadImageReward, LoadVideoScore, ScoreCandidates, ScoreVideos,
    register_model_folders,
)

register_model_folders()
register_server_hooks()
register_pick_routes()
register_calibration_cost_route()


class CachedSearchExtension(ComfyExtension):
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        node_classes = [
            ApplyStepCache, SearchSampler, SearchSamplerAdvanced, LoadImageReward, LoadClipVerifier, ScoreCandidates,
            RankingFromScores, Recommit, SearchSamplerExperts, DistributedSearchSampler,
            LoadVideoScore, ScoreVideos, CombineScores, PruningPlanNode, SearchBudget, Calibrate,
            CalibrateExperts, CombineVerifiers,
        ]
        warn_about_clashes(node_classes)
        return node_classes
