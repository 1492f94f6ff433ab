"""Thin ComfyUI adapters over cachedsearch_core."""

from comfy_api.latest import ComfyExtension, io

from .apply_cache import ApplyStepCache


class CachedSearchExtension(ComfyExtension):
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        return [ApplyStepCache]
