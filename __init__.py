"""CachedSearch for ComfyUI: cheap best-of-N seed search for video diffusion.

ComfyUI loads this folder as a custom-node pack. The nodes are imported only
when ComfyUI is importable, so ``cachedsearch_core`` stays usable on its own.
"""

import importlib.util

WEB_DIRECTORY = "./web"

if importlib.util.find_spec("comfy_api") is not None:
    from .nodes import CachedSearchExtension

    async def comfy_entrypoint() -> CachedSearchExtension:
        return CachedSearchExtension()
