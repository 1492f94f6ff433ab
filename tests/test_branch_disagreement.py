"""When the cond and uncond branches of ComfyUI's batched CFG call disagree (real loaders, KSampler, tiny Wan 2.1)."""

import pytest
import torch

from scripts.tiny_models import WAN21_T2V_FILE

LATENT = dict(width=64, height=64, length=9, batch_size=1)
STEPS = 16


@pytest.fixture(scope="module")
def wan(engine):
    model = engine.one("UNETLoader", unet_name=WAN21_T2V_FILE, weight_dtype="default")
    model = engine.one("ModelSamplingSD3", model=model, shift=8.0)
    negative = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=8, pooled=False)
    return model, negative


def prompt(engine, text_seed):
    return engine.one("CachedSearchTestConditioning", text_seed=text_seed, tokens=8, pooled=False)


def cached_run(engine, model, positive, negative, tau):
    """(samples, the run's CacheStatistics) of a KSampler run with the cache."""
    cached = engine.one("CachedSearchApplyCache", model=model, mode="adaptive", tau=tau, warmup_steps=2,
                        cooldown_steps=2, static_interval=2)
    observed, sink = cached.clone(), []
    observed.model_options["transformer_options"][
        engine.extension.nodes.cache_patch.STATISTICS_CALLBACK_OPTION] = sink.append
    out = engine.one("KSampler", model=observed, seed=5, steps=STEPS, cfg=5.0, sampler_name="euler",
                     scheduler="simple", positive=positive, negative=negative,
                     latent_image=engine.one("EmptyHunyuanLatentVideo", **LATENT), denoise=1.0)
    (statistics,) = sink
    return out["samples"], statistics


@pytest.mark.parametrize("tau", [0.1, 0.3])
def test_batched_cfg_branches_never_disagree(engine, wan, tau):
    """Both branches get the same latent, so the whole-call rule loses no skip: per-branch skipping would save
    nothing (bench/branch_disagreement.py measures this)."""
    model, negative = wan
    _, statistics = cached_run(engine, model, prompt(engine, 1), negative, tau)
    assert statistics.calls == STEPS  # cond and uncond batched in one call per step
    assert statistics.calls_skipped > 0
    assert statistics.skipped_by_branch == {"cond": statistics.calls_skipped, "uncond": statistics.calls_skipped}
    assert (statistics.calls_disagreeing, statistics.branch_skips_forgone) == (0, 0)


def test_prompt_switched_mid_run_disagrees_once_at_the_switch(engine, wan):
    model, negative = wan
    first_half = engine.one("ConditioningSetTimestepRange", conditioning=prompt(engine, 1), start=0.0, end=0.5)
    second_half = engine.one("ConditioningSetTimestepRange", conditioning=prompt(engine, 3), start=0.5, end=1.0)
    scheduled = engine.one("ConditioningCombine", conditioning_1=first_half, conditioning_2=second_half)
    samples, statistics = cached_run(engine, model, scheduled, negative, tau=1.0)
    # At the switch both prompts apply (ComfyUI's ranges include their boundary): that call batches the new
    # prompt's branch, which has no cache yet, with the first prompt's and uncond's, which could have skipped.
    # Computing all three re-anchors them together, so the branches agree again afterwards.
    assert statistics.computed_by_branch["cond"] == statistics.calls_computed + 1
    assert (statistics.calls_disagreeing, statistics.branch_skips_forgone) == (1, 2)
    assert statistics.calls_skipped > 0
    assert torch.isfinite(samples).all()
