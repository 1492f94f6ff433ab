"""The full-compute check on LTX-2: every linear layer of every block counts, the audio stream's attention and
feed-forward layers and the audio-video cross-attention as much as the video's, so a cache that skips only the
audio work shows. ComfyUI 0.3.75 has no LTX-2 (the tiny_ltx2 fixture skips there)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from report_text import refusal

from cachedsearch_core.work_count import work_layers

from test_ltx2 import STEPS, apply_cache, ksampler, observed

# Per block of LTX-2's transformer: video and audio self-attention, text cross-attention and feed-forward, and the
# cross-attention between the streams.
LTX2_BLOCK_MODULES = ("attn1", "attn2", "ff", "audio_attn1", "audio_attn2", "audio_ff", "audio_to_video_attn",
                      "video_to_audio_attn")


def metered(engine, ltx2, model):
    """The sampler run on ``model`` behind CachedSearch's call meter: (MeteredRun, [video, audio])."""
    meter = engine.extension.nodes.full_compute.CallMeter()
    model = meter.attach(model)
    with meter.counting(model):
        parts = ksampler(engine, ltx2, model)
    return meter.take(), parts


class AudioAttentionReuse:
    """A test-only cache that skips only audio work: on every other call each block's audio self-attention returns
    its output of the last computed call (its forward replaced on the instance), the rest of the model runs."""

    def __init__(self, diffusion_model):
        self.modules = [block.audio_attn1 for block in diffusion_model.transformer_blocks]
        self.stored, self.calls = {}, 0

    def __call__(self, executor, *args, **kwargs):
        reuse = self.calls % 2 == 1
        self.calls += 1
        with self._reusing() if reuse else self._recording():
            return executor(*args, **kwargs)

    @contextlib.contextmanager
    def _recording(self):
        handles = [module.register_forward_hook(lambda m, _args, out: self.stored.__setitem__(m, out))
                   for module in self.modules]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    @contextlib.contextmanager
    def _reusing(self):
        for module in self.modules:
            module.forward = (lambda output: lambda *a, **k: output)(self.stored[module])
        try:
            yield
        finally:
            for module in self.modules:
                del module.forward


def test_every_block_counts_its_video_and_audio_layers(tiny_ltx2):
    diffusion_model = tiny_ltx2[0].model.diffusion_model
    layers = [layer.name for layer, _ in work_layers(diffusion_model)]
    for block in range(len(diffusion_model.transformer_blocks)):
        for module in LTX2_BLOCK_MODULES:
            assert any(name.startswith(f"transformer_blocks.{block}.{module}.") for name in layers), (block, module)


def test_full_compute_counts_every_call_and_the_cache_its_skips(engine, tiny_ltx2):
    run, parts = metered(engine, tiny_ltx2, tiny_ltx2[0])
    assert (run.calls.computed, run.calls.skipped, run.shortfall) == (STEPS, 0, None)
    for metered_part, stock_part in zip(parts, ksampler(engine, tiny_ltx2), strict=True):
        assert torch.equal(metered_part, stock_part)  # the meter changes nothing
    statistics = []
    run, _ = metered(engine, tiny_ltx2, observed(engine, apply_cache(engine, tiny_ltx2[0]), statistics))
    assert run.calls.skipped == statistics[0].calls_skipped > 0
    assert run.calls.computed == statistics[0].calls_computed


def test_a_cache_that_skips_only_audio_attention_is_refused_naming_the_layer(engine, tiny_ltx2):
    import comfy.patcher_extension

    full_compute = engine.extension.nodes.full_compute
    model = tiny_ltx2[0].clone()
    model.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "test_audio_reuse",
                               AudioAttentionReuse(model.model.diffusion_model))
    run, _ = metered(engine, tiny_ltx2, model)
    assert run.calls.skipped == STEPS // 2
    assert run.shortfall.layer.startswith("transformer_blocks.0.audio_attn1.")
    assert run.shortfall.computed == STEPS // 2
    # the refusal's facts: the calls computed of those asked, the layer that fell short, the wrapper that skipped
    with pytest.raises(ValueError, match=refusal("model", "4 of the 8", run.shortfall.layer, "test_audio_reuse")):
        full_compute.check_full_compute(run, model, "model", "Connect the model without that cache.")


def test_easycache_in_front_skips_both_parts_and_its_full_compute_model_is_the_stock_sampler(engine, tiny_ltx2):
    """ComfyUI's EasyCache caches LTX-2's video and audio; the meter counts the calls it skips, and the model the
    commit runs on (every known cache detached) gives the stock sampler's video and audio bit for bit."""
    full_compute = engine.extension.nodes.full_compute
    easycache = engine.one("EasyCache", model=tiny_ltx2[0], reuse_threshold=2.0, start_percent=0.0, end_percent=1.0,
                           verbose=False)
    run, cached = metered(engine, tiny_ltx2, easycache)
    assert run.calls.skipped > 0 and run.calls.computed + run.calls.skipped == STEPS
    stock = ksampler(engine, tiny_ltx2)
    assert all(not torch.equal(cached_part, stock_part) for cached_part, stock_part in zip(cached, stock))
    assert [engine.name for engine in full_compute.cache_engines_on(easycache)] == ["EasyCache"]
    run, committed = metered(engine, tiny_ltx2, full_compute.full_compute_model(easycache))
    assert (run.calls.computed, run.calls.skipped, run.shortfall) == (STEPS, 0, None)
    for committed_part, stock_part in zip(committed, stock, strict=True):
        assert torch.equal(committed_part, stock_part)
