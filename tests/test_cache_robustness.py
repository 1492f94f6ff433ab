"""Models the cache cannot serve run uncached, say why once, and never crash (in process, CPU)."""

import logging
import uuid

import pytest
import torch

from cachedsearch_core.cache_statistics import INACTIVE_PREFIX
from scripts.tiny_models import WAN21_T2V_FILE

LATENT = dict(width=32, height=32, length=5, batch_size=1)
CACHE = dict(mode="adaptive", tau=0.5, warmup_steps=2, cooldown_steps=2, static_interval=2)


class ForwardWithoutWrappers(torch.nn.Module):
    """A diffusion model whose forward skips ComfyUI's DIFFUSION_MODEL wrapper, as some model code does."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        return self.inner._forward(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:  # dtype, patch sizes and the rest stay the wrapped model's
            return getattr(self.inner, name)


@pytest.fixture(scope="module")
def wan(engine):
    model = engine.one("UNETLoader", unet_name=WAN21_T2V_FILE, weight_dtype="default")
    positive = engine.one("CachedSearchTestConditioning", text_seed=1, tokens=6, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=6, pooled=False)
    latent = engine.one("EmptyHunyuanLatentVideo", **LATENT)
    return model, positive, negative, latent


def ksampler(engine, model, positive, negative, latent, seed):
    return engine.one("KSampler", model=model, seed=seed, steps=8, cfg=5.0, sampler_name="euler",
                      scheduler="simple", positive=positive, negative=negative, latent_image=latent,
                      denoise=1.0)["samples"]


@pytest.mark.slow
def test_model_that_never_calls_the_wrapper_is_reported_in_the_search_and_runs_uncached(engine, wan, caplog):
    model, positive, negative, latent = wan
    bypassing = model.clone()
    bypassing.add_object_patch("diffusion_model", ForwardWithoutWrappers(model.model.diffusion_model))
    cached = engine.one("CachedSearchApplyCache", model=bypassing, **CACHE)
    with caplog.at_level(logging.WARNING, logger="CachedSearch"):
        drafts, candidates, report = engine.run(
            "CachedSearchSampler", model=cached, positive=positive, negative=negative, latent_image=latent, seed=3,
            num_candidates=2, steps=8, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0,
        )
    reasons = {draft.cache_inactive_reason for draft in candidates.drafts}
    (reason,) = reasons  # the same for every draft: the module that bypasses ComfyUI's wrapper
    assert "ForwardWithoutWrappers" in reason and "wrapper" in reason
    assert report.splitlines().count(f"{INACTIVE_PREFIX}{reason}") == 1  # the report says it once
    assert sum(reason in record.getMessage() for record in caplog.records) == 2  # logged once per run
    # uncached drafts are the full rollouts of their seeds
    for index, seed in enumerate(candidates.seeds):
        assert torch.equal(drafts["samples"][index : index + 1], ksampler(engine, model, positive, negative, latent, seed))


def test_nested_latent_runs_uncached_with_the_reason_logged_once(engine, caplog):
    import comfy.nested_tensor

    patch = engine.extension.nodes.cache_patch
    cache_core = engine.extension.cachedsearch_core
    cache = cache_core.TransformationVectorCache(cache_core.StepCacheConfig(**CACHE), [1.0, 0.5, 0.0])
    nested = comfy.nested_tensor.NestedTensor([torch.ones(1, 4, 2, 2, 2), torch.ones(1, 8, 3)])
    options = {patch.RUN_OPTION: patch._CacheRun(cache, 4), "cond_or_uncond": [0], "uuids": [uuid.uuid4()],
               "sigmas": torch.tensor([1.0])}
    computed = []

    def executor(x, timestep, context, transformer_options):
        computed.append(x)
        return x

    with caplog.at_level(logging.WARNING, logger="CachedSearch"):
        for _ in range(3):
            assert patch._diffusion_model_wrapper(executor, nested, None, None, options) is nested
    assert len(computed) == 3
    assert "NestedTensor" in cache.statistics.inactive_reason
    assert cache.statistics.calls_computed == 3 and cache.statistics.calls_skipped == 0
    assert sum("NestedTensor" in record.getMessage() for record in caplog.records) == 1


@pytest.mark.parametrize("position", ["keyword", "last", "before_another_argument"])
def test_transformer_options_are_found_wherever_the_model_passes_them(engine, position):
    patch = engine.extension.nodes.cache_patch
    cache_core = engine.extension.cachedsearch_core
    cache = cache_core.TransformationVectorCache(cache_core.StepCacheConfig(mode="off"), [1.0, 0.5, 0.0])
    options = {patch.RUN_OPTION: patch._CacheRun(cache, 2), "cond_or_uncond": [0, 1], "uuids": ["a", "b"],
               "sigmas": torch.tensor([1.0])}
    x = torch.ones(2, 2, 1, 2, 2)
    args, kwargs = {
        "keyword": ((x, None), {"transformer_options": options}),
        "last": ((x, None, options), {}),
        # LTX-Video: (x, timestep, context, attention_mask, frame_rate, transformer_options, keyframe_idxs)
        "before_another_argument": ((x, None, None, None, 25, options, None), {}),
    }[position]
    assert torch.equal(patch._diffusion_model_wrapper(lambda *a, **k: 2 * a[0], *args, **kwargs), 2 * x)
    assert cache.statistics.computed_by_branch == {"cond": 1, "uncond": 1}
