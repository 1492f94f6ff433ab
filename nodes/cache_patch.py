"""Attach the step cache to a ComfyUI ModelPatcher through keyed wrappers.

OUTER_SAMPLE creates a fresh TransformationVectorCache for every sampling run
(each KSampler call, each stage of a two-stage Wan 2.2 graph) and drops it in a
``finally``; DIFFUSION_MODEL routes every transformer call through it.

A model that denoises several latents together (LTX-2 on ComfyUI 0.33: the
transformer gets and returns the list [video, audio]) is cached part by part.
Models the cache cannot serve (inputs that are neither a latent tensor nor a
list of them, a model whose forward never calls the DIFFUSION_MODEL wrapper)
run uncached, with one log line and the reason in the run's statistics, which
the search report shows.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import comfy.model_patcher
import comfy.patcher_extension
import torch

from ..cachedsearch_core import StepCacheConfig, TransformationVectorCache

WRAPPER_KEY = "cachedsearch_step_cache"
CONFIG_OPTION = "cachedsearch_step_cache_config"
RUN_OPTION = "cachedsearch_step_cache_run"
# Optional callable in transformer_options that receives each run's CacheStatistics.
STATISTICS_CALLBACK_OPTION = "cachedsearch_step_cache_on_statistics"
# Optional (steps before this run, steps of the whole trajectory) in transformer_options, for a run that is one part
# of a trajectory paused in between (a pruned search): the cache's warmup and cooldown count in the whole.
TRAJECTORY_POSITION_OPTION = "cachedsearch_step_cache_trajectory_position"

_WRAPPER_TYPES = (comfy.patcher_extension.WrappersMP.OUTER_SAMPLE, comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL)
# ComfyUI marks each batch chunk 0 for the positive (cond) and 1 for the negative (uncond) prompt.
_BRANCH_LABELS = ("cond", "uncond")

log = logging.getLogger("CachedSearch")


class _CacheRun(NamedTuple):
    cache: TransformationVectorCache
    # The transformer's input may carry extra channels (image-to-video concat); the cache sees the latent part.
    latent_channels: int


def attach_step_cache(model, config: StepCacheConfig):
    """A clone of ``model`` with the cache; an earlier cache on it is replaced."""
    patched = detach_step_cache(model)
    patched.model_options["transformer_options"][CONFIG_OPTION] = config
    patched.add_wrapper_with_key(_WRAPPER_TYPES[0], WRAPPER_KEY, _outer_sample_wrapper)
    patched.add_wrapper_with_key(_WRAPPER_TYPES[1], WRAPPER_KEY, _diffusion_model_wrapper)
    return patched


def detach_step_cache(model):
    """A clone of ``model`` without the cache; ``model`` itself is not modified."""
    patched = model.clone()
    for wrapper_type in _WRAPPER_TYPES:
        patched.remove_wrappers_with_key(wrapper_type, WRAPPER_KEY)
    patched.model_options.setdefault("transformer_options", {}).pop(CONFIG_OPTION, None)
    return patched


def step_cache_config(model) -> StepCacheConfig | None:
    """The cache settings attached to ``model``, or None when it has no cache."""
    if not model.get_wrappers(_WRAPPER_TYPES[1], WRAPPER_KEY):
        return None
    return model.model_options.get("transformer_options", {}).get(CONFIG_OPTION)


def _deactivate(cache: TransformationVectorCache, reason: str) -> None:
    if cache.deactivate(reason):
        log.warning("CachedSearch: cache inactive on this model: %s; this run computes every step", reason)


def _outer_sample_wrapper(executor, noise, latent_image, sampler, sigmas, *args, **kwargs):
    guider = executor.class_obj
    shared_options = guider.model_options
    config = shared_options["transformer_options"][CONFIG_OPTION]
    steps_before, trajectory_steps = shared_options["transformer_options"].get(TRAJECTORY_POSITION_OPTION, (0, None))
    cache = TransformationVectorCache(config, sigmas.tolist(), steps_before, trajectory_steps)
    # The run's cache lives in a per-run copy of the options, so nothing outlives the run.
    guider.model_options = comfy.model_patcher.create_model_options_clone(shared_options)
    latent_channels = guider.model_patcher.model.latent_format.latent_channels
    guider.model_options["transformer_options"][RUN_OPTION] = _CacheRun(cache, latent_channels)
    try:
        samples = executor(noise, latent_image, sampler, sigmas, *args, **kwargs)
        if cache.statistics.calls == 0:
            model_class = type(guider.model_patcher.model.diffusion_model).__name__
            _deactivate(cache, f"{model_class}'s forward does not call ComfyUI's diffusion-model wrapper, so the "
                        "cache never saw a transformer call")
        return samples
    finally:
        guider.model_options = shared_options
        statistics = cache.statistics
        cache.reset()
        log.info("CachedSearch cache (%s, tau %g): %s", config.mode.value, config.tau, statistics.summary())
        report = shared_options["transformer_options"].get(STATISTICS_CALLBACK_OPTION)
        if report is not None:
            report(statistics)


class _Route(NamedTuple):
    cache: TransformationVectorCache
    x: torch.Tensor | list[torch.Tensor] | None
    sigma: torch.Tensor
    labels: list[str]
    branch_keys: list | None  # None: run this call uncached


def call_options(args, kwargs, key: str) -> dict | None:
    """A diffusion-model call's ``transformer_options``, known by holding ``key``, wherever the model passes them:
    most pass them last, LTX-Video before ``keyframe_idxs``, others by keyword."""
    options = kwargs.get("transformer_options")
    if isinstance(options, dict) and key in options:
        return options
    return next((a for a in reversed(args) if isinstance(a, dict) and key in a), None)


@torch.compiler.disable
def _route(args, kwargs) -> _Route | None:
    """Where this transformer call goes: None when its run has no cache."""
    options = call_options(args, kwargs, RUN_OPTION)
    if options is None:
        return None
    run: _CacheRun = options[RUN_OPTION]
    x = args[0] if args else kwargs.get("x")
    labels = [_BRANCH_LABELS[index] for index in options["cond_or_uncond"]]
    sigma = options["sigmas"][0]
    parts = _latent_parts(x, run.latent_channels)
    if parts is None:
        _deactivate(run.cache, f"its latent input is a {type(x).__name__} (several latents in one, e.g. video with "
                    "audio), not one tensor nor a list of them")
    if not run.cache.active:
        return _Route(run.cache, None, sigma, labels, None)
    # Keyed by device (conds that run on several devices in threads) and by context window (ComfyUI's context
    # window nodes call the model once per window): each gets its own state.
    window = options.get("context_window")
    window_frames = tuple(window.index_list) if window is not None else None
    device = (parts if isinstance(parts, torch.Tensor) else parts[0]).device
    branch_keys = [(label, (uuid, device, window_frames)) for label, uuid in zip(labels, options["uuids"])]
    return _Route(run.cache, parts, sigma, labels, branch_keys)


def _latent_parts(x, latent_channels: int) -> torch.Tensor | list[torch.Tensor] | None:
    """What the cache sees of a transformer's latent input: the latent channels of one tensor (the input may carry
    image-to-video concat channels after them), a list of latents as they are (LTX-2's [video, audio], nothing
    concatenated), None for anything else (ComfyUI's NestedTensor is not a torch tensor). LTX-2 given a video
    latent alone gets a list of one and returns the tensor: the cache sees the tensor."""
    if isinstance(x, list) and len(x) == 1:
        x = x[0]
    if isinstance(x, torch.Tensor) and not x.is_nested:
        return x[:, :latent_channels]
    if isinstance(x, list) and x and all(isinstance(part, torch.Tensor) and not part.is_nested for part in x):
        return x
    return None


# Under torch.compile (TorchCompileModel) this frame and the cache's decisions run eagerly: traced, they would be
# baked into graphs whose guards on transformer_options ComfyUI filters out. The transformer itself is compiled.
@torch.compiler.disable(recursive=False)
def _diffusion_model_wrapper(executor, *args, **kwargs):
    route = _route(args, kwargs)
    if route is None:
        return executor(*args, **kwargs)
    if route.branch_keys is None:
        return route.cache.compute_uncached(lambda: executor(*args, **kwargs), route.sigma, route.labels)
    return route.cache(lambda: executor(*args, **kwargs), route.x, route.sigma, route.branch_keys)
