"""Thin ComfyUI adapters over cachedsearch_core."""

import weakref

from comfy_api.latest import ComfyExtension, io

from .apply_cache_nodes import ApplyStepCache
from .budget_nodes import SearchBudget
from .calibrate_nodes import Calibrate, CalibrateExperts
from .calibration_cost import register_calibration_cost_route
from .combine_nodes import CombineScores, CombineVerifiers
from .docs_route import register_docs_route
from .distributed_nodes import DistributedSearchSampler
from .distributed_routes import register_server_hooks
from .node_ids import warn_about_clashes
from .pick import register_pick_routes
from .prompt_server import prompt_server
from .pruning_nodes import PruningPlanNode
from .route_checks import ExtensionRoutes
from .saved_work_routes import register_saved_work_routes
from .schedule_route import register_schedule_route
from .search_nodes import RankingFromScores, Recommit, SearchSampler, SearchSamplerAdvanced, SearchSamplerExperts
from .verifier_loader_nodes import LoadClipVerifier, LoadImageReward, LoadVideoScore
from .verifier_models import register_model_folders
from .verifier_nodes import ScoreCandidates, ScoreVideos

NODE_CLASSES = (
    ApplyStepCache, SearchSampler, SearchSamplerAdvanced, LoadImageReward, LoadClipVerifier, ScoreCandidates,
    RankingFromScores, Recommit, SearchSamplerExperts, DistributedSearchSampler,
    LoadVideoScore, ScoreVideos, CombineScores, PruningPlanNode, SearchBudget, Calibrate,
    CalibrateExperts, CombineVerifiers,
)

# The servers this extension's routes and on-prompt handler went on: a server's route table takes each route once,
# and the servers are ComfyUI's (weakly held, so a server that is gone is forgotten).
_SERVERS_WITH_ROUTES = weakref.WeakSet()


def load_extension() -> None:
    """The extension's load step, once per server however often it is asked: the verifiers' model folders (setting
    them again changes nothing) and, on a running server, the routes and the on-prompt handler."""
    register_model_folders()
    server = prompt_server()
    if server is None or server in _SERVERS_WITH_ROUTES:
        return
    routes = ExtensionRoutes(server)
    register_server_hooks(routes)
    register_pick_routes(routes)
    register_saved_work_routes(routes)
    register_calibration_cost_route(routes, (Calibrate, CalibrateExperts))
    register_schedule_route(routes)
    register_docs_route(routes)
    _SERVERS_WITH_ROUTES.add(server)


class CachedSearchExtension(ComfyExtension):
    async def on_load(self) -> None:
        load_extension()

    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        # ComfyUI 0.33 awaits on_load before this; 0.3.75 never calls on_load, so the load step runs here too
        # (it does its work once).
        load_extension()
        node_classes = list(NODE_CLASSES)
        warn_about_clashes(node_classes)
        return node_classes
