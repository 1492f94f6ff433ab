"""The cache composed with what artists chain onto a MODEL: context windows and torch.compile (in process, CPU).

LoRA stacks and ModelSamplingSD3 are covered in test_apply_cache_comfy.py.
"""

import inspect
import os

import pytest
import torch

from scripts.tiny_models import WAN21_T2V_FILE

STEPS = 8
CACHE = dict(mode="adaptive", tau=0.5, warmup_steps=2, cooldown_steps=2, static_interval=2)
# 13 frames -> 4 latent frames; windows of 2 with overlap 1 -> 3 windows
VIDEO = dict(width=32, height=32, length=13, batch_size=1)


@pytest.fixture(scope="module")
def wan(engine):
    model = engine.one("UNETLoader", unet_name=WAN21_T2V_FILE, weight_dtype="default")
    positive = engine.one("CachedSearchTestConditioning", text_seed=1, tokens=6, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=6, pooled=False)
    return model, positive, negative, engine.one("EmptyHunyuanLatentVideo", **VIDEO)


def ksampler(engine, model, wan, seed=7):
    _, positive, negative, latent = wan
    return engine.one("KSampler", model=model, seed=seed, steps=STEPS, cfg=5.0, sampler_name="euler",
                      scheduler="simple", positive=positive, negative=negative, latent_image=latent,
                      denoise=1.0)["samples"]


def observed_cache(engine, model, **overrides):
    cached = engine.one("CachedSearchApplyCache", model=model, **(CACHE | overrides))
    sink = []
    cached.model_options["transformer_options"][engine.extension.nodes.cache_patch.STATISTICS_CALLBACK_OPTION] = (
        sink.append)
    return cached, sink


def context_windows(engine, model):
    """ComfyUI's Context Windows (Manual) over the latent's frame axis; 0.33 added inputs (freenoise, ...)."""
    import comfy.context_windows

    node = engine.nodes["ContextWindowsManual"]
    settings = dict(model=model, context_length=2, context_overlap=1,
                    context_schedule=comfy.context_windows.ContextSchedules.STATIC_STANDARD, context_stride=1,
                    closed_loop=False, fuse_method=comfy.context_windows.ContextFuseMethods.PYRAMID, dim=2,
                    freenoise=False)
    accepted = inspect.signature(node.execute).parameters
    return engine.one("ContextWindowsManual", **{name: value for name, value in settings.items() if name in accepted})


@pytest.mark.parametrize("cache_first", [True, False], ids=["cache_then_windows", "windows_then_cache"])
def test_context_windows_get_state_per_window(engine, wan, cache_first):
    model = wan[0]
    windowed = context_windows(engine, model)
    reference = ksampler(engine, windowed, wan)
    assert not torch.equal(reference, ksampler(engine, model, wan))  # the windows take effect

    def compose(**cache_settings):
        if cache_first:
            cached, sink = observed_cache(engine, model, **cache_settings)
            return context_windows(engine, cached), sink
        return observed_cache(engine, windowed, **cache_settings)

    exact, _ = compose(tau=0.0)
    assert torch.equal(ksampler(engine, exact, wan), reference)
    skipping, sink = compose()
    result = ksampler(engine, skipping, wan)
    (statistics,) = sink
    assert statistics.calls == STEPS * 3  # one call per window per step
    assert statistics.calls_skipped > 0 and statistics.inactive_reason is None
    assert torch.isfinite(result).all() and not torch.equal(result, reference)


def test_each_window_is_a_separate_branch_state(engine):
    import comfy.context_windows

    patch = engine.extension.nodes.cache_patch
    core = engine.extension.cachedsearch_core
    cache = core.TransformationVectorCache(core.StepCacheConfig(**CACHE), [1.0, 0.5, 0.0])
    options = {patch.RUN_OPTION: patch._CacheRun(cache, 2), "cond_or_uncond": [0, 1], "uuids": ["a", "b"],
               "sigmas": torch.tensor([1.0])}
    x = torch.ones(2, 2, 2, 2, 2)
    # 0.33 added total_frames (required in practice: it divides by it)
    sizing = {"total_frames": 3} if "total_frames" in inspect.signature(
        comfy.context_windows.IndexListContextWindow).parameters else {}
    for frames in ([0, 1], [1, 2], [0, 1]):
        window = comfy.context_windows.IndexListContextWindow(frames, dim=2, **sizing)
        patch._diffusion_model_wrapper(lambda *a: 2 * a[0], x, None, options | {"context_window": window})
    assert len(cache.branches) == 4  # cond and uncond for each of the two windows


@pytest.mark.skipif(not os.environ.get("CACHEDSEARCH_COMPILE_TESTS"),
                    reason="inductor compiles for minutes on a small CPU; set CACHEDSEARCH_COMPILE_TESTS=1 to run")
def test_torch_compile_model_node_keeps_the_cache_decisions(engine, wan):
    model = wan[0]
    compiled = engine.one("TorchCompileModel", model=model, backend="inductor")
    for seed in (1, 2):
        eager, eager_sink = observed_cache(engine, model)
        expected = ksampler(engine, eager, wan, seed)
        cached, sink = observed_cache(engine, compiled)
        result = ksampler(engine, cached, wan, seed)
        assert sink[0].as_dict()["skipped_steps"] == eager_sink[0].as_dict()["skipped_steps"] != []
        torch.testing.assert_close(result, expected, rtol=1e-4, atol=1e-4)  # inductor reorders float math
