"""The Apply Cache node on ComfyUI's real loaders, samplers and model code (in process, CPU)."""

import pytest
import torch

from scripts.tiny_models import HUNYUAN_T2V_FILE, WAN21_T2V_FILE

LATENT = dict(width=64, height=64, length=9, batch_size=1)  # latent [1, 16, 3, 8, 8]
CACHE = dict(mode="adaptive", tau=0.2, warmup_steps=3, cooldown_steps=3, static_interval=2)


@pytest.fixture(scope="module")
def wan(engine):
    model = engine.one("UNETLoader", unet_name=WAN21_T2V_FILE, weight_dtype="default")
    model = engine.one("ModelSamplingSD3", model=model, shift=8.0)
    positive = engine.one("CachedSearchTestConditioning", text_seed=1, tokens=8, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=8, pooled=False)
    return model, positive, negative


@pytest.fixture(scope="module")
def hunyuan(engine):
    model = engine.one("UNETLoader", unet_name=HUNYUAN_T2V_FILE, weight_dtype="default")
    positive = engine.one("CachedSearchTestConditioning", text_seed=3, tokens=8, pooled=True)
    positive = engine.one("FluxGuidance", conditioning=positive, guidance=6.0)
    negative = engine.one("CachedSearchTestConditioning", text_seed=4, tokens=8, pooled=True)
    return model, positive, negative


def ksampler(engine, model, positive, negative, seed=7, steps=16, cfg=5.0, sampler="euler", latent=None):
    latent = latent or engine.one("EmptyHunyuanLatentVideo", **LATENT)
    out = engine.one(
        "KSampler", model=model, seed=seed, steps=steps, cfg=cfg, sampler_name=sampler, scheduler="simple",
        positive=positive, negative=negative, latent_image=latent, denoise=1.0,
    )
    return out["samples"]


def apply_cache(engine, model, **overrides):
    return engine.one("CachedSearchApplyCache", model=model, **(CACHE | overrides))


def collect_statistics(engine, model):
    """A clone of ``model`` whose cache runs append their statistics to the returned list."""
    sink = []
    observed = model.clone()
    observed.model_options["transformer_options"][engine.extension.nodes.cache_patch.STATISTICS_CALLBACK_OPTION] = sink.append
    return observed, sink


@pytest.mark.slow
@pytest.mark.parametrize("family, cfg", [("wan", 5.0), ("hunyuan", 1.0), ("hunyuan", 4.0)])
@pytest.mark.parametrize("settings", [dict(mode="off"), dict(mode="adaptive", tau=0.0)])
def test_cache_that_skips_nothing_is_bit_identical_to_plain_ksampler(engine, request, family, cfg, settings):
    model, positive, negative = request.getfixturevalue(family)
    reference = ksampler(engine, model, positive, negative, cfg=cfg)
    cached = ksampler(engine, apply_cache(engine, model, **settings), positive, negative, cfg=cfg)
    assert torch.equal(cached, reference)
    # the comparison can fail: a skipping cache changes the result
    skipping = ksampler(engine, apply_cache(engine, model, tau=1.0), positive, negative, cfg=cfg)
    assert not torch.equal(skipping, reference)


@pytest.mark.parametrize("family, cfg, branches", [("wan", 5.0, {"cond", "uncond"}), ("hunyuan", 1.0, {"cond"})])
def test_adaptive_cache_skips_and_counts_each_branch(engine, request, family, cfg, branches):
    model, positive, negative = request.getfixturevalue(family)
    observed, sink = collect_statistics(engine, apply_cache(engine, model, tau=0.5))
    ksampler(engine, observed, positive, negative, cfg=cfg)
    (statistics,) = sink
    assert statistics.total_steps == 16
    assert statistics.calls_skipped > 0
    assert statistics.calls == 16  # cond and uncond share one batched call per step
    assert set(statistics.computed_by_branch) == branches
    assert not statistics.steps_skipped & {0, 1, 2, 13, 14, 15}  # warmup and cooldown


@pytest.mark.slow
def test_separate_branch_calls_keep_separate_state(engine, wan):
    model, positive, _ = wan
    # 8 vs 7 tokens cannot be padded into one batch, so cond and uncond arrive in separate calls
    negative = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=7, pooled=False)
    observed, sink = collect_statistics(engine, apply_cache(engine, model, tau=0.5))
    ksampler(engine, observed, positive, negative)
    (statistics,) = sink
    assert statistics.calls == 32
    assert statistics.computed_by_branch["cond"] + statistics.skipped_by_branch["cond"] == 16
    assert statistics.computed_by_branch["uncond"] + statistics.skipped_by_branch["uncond"] == 16
    reference = ksampler(engine, apply_cache(engine, model, mode="off"), positive, negative)
    assert torch.equal(ksampler(engine, apply_cache(engine, model, tau=0.0), positive, negative), reference)


@pytest.mark.slow
@pytest.mark.parametrize("sampler, calls", [("heun", 31), ("dpmpp_2s_ancestral", 31), ("uni_pc", 16)])
def test_multi_call_samplers_are_counted_per_step(engine, wan, sampler, calls):
    model, positive, negative = wan
    observed, sink = collect_statistics(engine, apply_cache(engine, model, tau=0.3))
    result = ksampler(engine, observed, positive, negative, sampler=sampler)
    (statistics,) = sink
    assert statistics.calls == calls
    assert statistics.steps_seen == set(range(16))
    assert statistics.total_steps == 16
    assert torch.isfinite(result).all()


def test_cached_sampling_is_deterministic_and_leaves_the_input_model_untouched(engine, wan):
    model, positive, negative = wan
    before = ksampler(engine, model, positive, negative, seed=11)
    wrappers_before = {kind: dict(keys) for kind, keys in model.wrappers.items()}
    options_before = set(model.model_options["transformer_options"])
    cached_model = apply_cache(engine, model, tau=0.5)
    first = ksampler(engine, cached_model, positive, negative, seed=11)
    second = ksampler(engine, cached_model, positive, negative, seed=11)
    assert torch.equal(first, second)
    assert not torch.equal(first, before)
    assert {kind: dict(keys) for kind, keys in model.wrappers.items()} == wrappers_before
    assert set(model.model_options["transformer_options"]) == options_before
    assert torch.equal(ksampler(engine, model, positive, negative, seed=11), before)


def test_applying_twice_leaves_one_cache_with_the_newer_settings(engine, wan):
    model, positive, negative = wan
    patch = engine.extension.nodes.cache_patch
    twice = apply_cache(engine, apply_cache(engine, model, tau=0.05), tau=0.5)
    for wrapper_type in ("outer_sample", "diffusion_model"):
        assert len(twice.get_wrappers(wrapper_type, patch.WRAPPER_KEY)) == 1
    assert patch.step_cache_config(twice).tau == 0.5
    once = apply_cache(engine, model, tau=0.5)
    assert torch.equal(ksampler(engine, twice, positive, negative), ksampler(engine, once, positive, negative))


def test_runs_do_not_share_state(engine, wan):
    model, positive, negative = wan
    cached_model = apply_cache(engine, model, tau=0.5)
    small = dict(LATENT)
    large = dict(LATENT, width=80, length=13)
    alone_a = ksampler(engine, apply_cache(engine, model, tau=0.5), positive, negative, seed=1,
                       latent=engine.one("EmptyHunyuanLatentVideo", **small))
    alone_b = ksampler(engine, apply_cache(engine, model, tau=0.5), positive, negative, seed=2,
                       latent=engine.one("EmptyHunyuanLatentVideo", **large))
    after_a = ksampler(engine, cached_model, positive, negative, seed=1, latent=engine.one("EmptyHunyuanLatentVideo", **small))
    after_b = ksampler(engine, cached_model, positive, negative, seed=2, latent=engine.one("EmptyHunyuanLatentVideo", **large))
    assert torch.equal(after_a, alone_a)
    assert torch.equal(after_b, alone_b)


def test_run_interrupted_mid_sampling_leaves_nothing_behind(engine, wan):
    import comfy.model_management
    import comfy.sample

    model, positive, negative = wan
    cached_model = apply_cache(engine, model, tau=0.5)
    clean = ksampler(engine, cached_model, positive, negative, seed=5)

    def interrupt_at_step_8(step, *_):
        if step == 8:
            raise comfy.model_management.InterruptProcessingException()

    latent = engine.one("EmptyHunyuanLatentVideo", **LATENT)["samples"]
    noise = comfy.sample.prepare_noise(latent, 5)
    with pytest.raises(comfy.model_management.InterruptProcessingException), torch.inference_mode():
        comfy.sample.sample(cached_model, noise, 16, 5.0, "euler", "simple", positive, negative, latent,
                            callback=interrupt_at_step_8, disable_pbar=True, seed=5)
    patch = engine.extension.nodes.cache_patch
    assert patch.RUN_OPTION not in cached_model.model_options["transformer_options"]
    assert torch.equal(ksampler(engine, cached_model, positive, negative, seed=5), clean)


def test_each_stage_of_a_two_stage_graph_gets_fresh_state(engine, wan):
    """Wan 2.2 style: KSamplerAdvanced steps 0-8 on one model, 8-16 on another (here the same weights)."""
    model, positive, negative = wan
    high, sink = collect_statistics(engine, apply_cache(engine, model, tau=0.5))
    low = apply_cache(engine, model, tau=0.5)
    latent = engine.one("EmptyHunyuanLatentVideo", **LATENT)

    def stage(stage_model, latent_in, start, end, add_noise):
        return engine.one(
            "KSamplerAdvanced", model=stage_model, add_noise=add_noise, noise_seed=3, steps=16, cfg=5.0,
            sampler_name="euler", scheduler="simple", positive=positive, negative=negative, latent_image=latent_in,
            start_at_step=start, end_at_step=end, return_with_leftover_noise="enable" if end < 16 else "disable",
        )

    halfway = stage(high, latent, 0, 8, "enable")
    final = stage(high, halfway, 8, 16, "disable")
    assert [s.total_steps for s in sink] == [8, 8]
    assert all(s.calls_skipped > 0 for s in sink)
    # the second stage behaves exactly as on a model that never ran the first stage
    assert torch.equal(final["samples"], stage(low, halfway, 8, 16, "disable")["samples"])


def test_cache_composes_with_lora_and_model_sampling_shift(engine, wan):
    from scripts.tiny_models import WAN21_LORA_FILE

    model, positive, negative = wan  # already shifted by ModelSamplingSD3
    with_lora = engine.one("LoraLoaderModelOnly", model=model, lora_name=WAN21_LORA_FILE, strength_model=1.0)
    plain_lora = ksampler(engine, with_lora, positive, negative)
    assert not torch.equal(plain_lora, ksampler(engine, model, positive, negative))  # the LoRA takes effect
    assert torch.equal(ksampler(engine, apply_cache(engine, with_lora, mode="off"), positive, negative), plain_lora)
    observed, sink = collect_statistics(engine, apply_cache(engine, with_lora, tau=0.5))
    cached_lora = ksampler(engine, observed, positive, negative)
    assert sink[0].calls_skipped > 0 and not torch.equal(cached_lora, plain_lora)
    # a LoRA applied after the cache keeps both
    lora_after = engine.one("LoraLoaderModelOnly", model=apply_cache(engine, model, tau=0.5), lora_name=WAN21_LORA_FILE,
                            strength_model=1.0)
    assert torch.equal(ksampler(engine, lora_after, positive, negative), cached_lora)
