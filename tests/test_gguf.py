"""GGUF quantizations with LoRAs through city96's ComfyUI-GGUF (in process): the real ``Unet Loader (GGUF)`` node
gives a GGUFModelPatcher whose ops dequantize on the fly and apply LoRA patches to the quantized weights.

On such a model the cache skips, mode ``off`` is bit-exact, and search + recommit deliver what the stock graph
gives on the same GGUF model: KSampler for Wan 2.1, the official two-KSamplerAdvanced graph for the Wan 2.2 A14B
experts. The LoRA-free rows per family and quantization are in tests/test_families.py.
"""

import pytest
import torch

from scripts import node_packs
from scripts.tiny_models import (
    QK_K,
    WAN21_LORA_FILE,
    WAN21_T2V_GGUF_FILES,
    WAN22_A14B_GGUF_FILES,
    WAN22_A14B_LORA_FILES,
)

needs_gguf_pack = pytest.mark.skipif(node_packs.GGUF.find_archive() is None, reason=node_packs.GGUF.absent_reason())

SKIPPING = dict(mode="adaptive", tau=0.5, warmup_steps=2, cooldown_steps=2, static_interval=2)
OFF = SKIPPING | dict(mode="off")
SEED = 20
EXPERT_SKIPPING = dict(mode="adaptive", tau=2.0, warmup_steps=1, cooldown_steps=1, static_interval=2)
# The official A14B graph's settings, and its 4-step LoRA path (4 steps split 2, cfg 1, nothing to warm up).
FULL = dict(steps=8, split_step=4, cfg=3.5)
FOUR_STEP = dict(steps=4, split_step=2, cfg=1.0)


def gguf_model(engine, file_name, lora_name=None, shift=5.0):
    model = engine.one("UnetLoaderGGUF", unet_name=file_name)
    if lora_name is not None:
        model = engine.one("LoraLoaderModelOnly", model=model, lora_name=lora_name, strength_model=1.0)
    return engine.one("ModelSamplingSD3", model=model, shift=shift)


def prompts_and_latent(engine):
    positive = engine.one("CachedSearchTestConditioning", text_seed=1, tokens=8, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=8, pooled=False)
    return positive, negative, engine.one("EmptyHunyuanLatentVideo", width=32, height=32, length=5, batch_size=1)


def cached(engine, model, **settings):
    return engine.one("CachedSearchApplyCache", model=model, **settings)


def recommit_second(engine, candidates):
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0.1, 0.9")
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    return delivered, seed


def test_the_q4_k_blocks_read_back_as_the_weights_within_their_rounding():
    """gguf-py cannot write K-quants; our blocks must decode, by gguf-py's own dequantizer, to the weights."""
    import gguf
    import numpy

    from scripts.tiny_models import quantize_q4_k

    weights = numpy.random.default_rng(0).standard_normal((8, 2 * QK_K)).astype(numpy.float32) / 16
    weights[0, :32] = 0.0  # an all-zero sub-block (scale and min 0) stays zero
    blocks = quantize_q4_k(weights)
    assert blocks.shape == (8, 2 * 144) and blocks.dtype == numpy.uint8
    decoded = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q4_K)
    sub_block_range = numpy.ptp(weights.reshape(-1, 32), axis=1).max()
    assert numpy.abs(decoded - weights).max() < sub_block_range / 15  # within one 4-bit step (plus scale rounding)
    assert numpy.abs(decoded - weights).mean() < 0.25 * sub_block_range / 15
    assert not decoded[0, :32].any()


@needs_gguf_pack
def test_the_snapshot_is_unpacked_only_when_its_sha256_matches(tmp_path):
    import dataclasses

    archive = node_packs.GGUF.find_archive()
    package = node_packs.GGUF.install(tmp_path, archive)
    assert package == tmp_path / "ComfyUI-GGUF" and (package / "nodes.py").is_file()
    assert [path.name for path in tmp_path.iterdir()] == ["ComfyUI-GGUF"]  # no staging folder left behind
    altered = dataclasses.replace(node_packs.GGUF, sha256="0" * 64)
    with pytest.raises(RuntimeError, match="ComfyUI-GGUF-795e451.tar.xz: sha256 659251ff.*replace it"):
        altered.install(tmp_path / "elsewhere", archive)
    assert not (tmp_path / "elsewhere").exists()


@needs_gguf_pack
def test_wan21_gguf_with_a_lora_caches_and_recommits_exactly(engine):
    model = gguf_model(engine, WAN21_T2V_GGUF_FILES["Q8_0"], WAN21_LORA_FILE)
    positive, negative, latent = prompts_and_latent(engine)

    def ksampler(sampled, seed):
        return engine.one("KSampler", model=sampled, seed=seed, steps=8, cfg=5.0, sampler_name="euler",
                          scheduler="simple", positive=positive, negative=negative, latent_image=latent,
                          denoise=1.0)["samples"]

    stock = ksampler(model, SEED + 1)
    without_lora = ksampler(gguf_model(engine, WAN21_T2V_GGUF_FILES["Q8_0"]), SEED + 1)
    assert not torch.equal(stock, without_lora)  # the LoRA is applied on top of the quantized weights

    import comfy.patcher_extension

    cache = cached(engine, model, **SKIPPING)
    assert type(cache).__name__ == "GGUFModelPatcher"  # a clone of the GGUF patcher with the cache, the input untouched
    wrapper = (comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, engine.extension.nodes.cache_patch.WRAPPER_KEY)
    assert cache.get_wrappers(*wrapper) and not model.get_wrappers(*wrapper)
    assert torch.equal(ksampler(cached(engine, model, **OFF), SEED + 1), stock)

    drafts, candidates, _ = engine.run(
        "CachedSearchSampler", model=cache, positive=positive, negative=negative, latent_image=latent, seed=SEED,
        num_candidates=2, steps=8, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
    assert all(draft.calls_skipped > 0 and draft.cache_inactive_reason is None for draft in candidates.drafts)
    delivered, seed = recommit_second(engine, candidates)
    assert seed == SEED + 1
    assert torch.equal(delivered["samples"], stock)
    assert not torch.equal(drafts["samples"][1:], stock)  # the draft was cached, the delivery is not


@needs_gguf_pack
@pytest.mark.parametrize("lora", [False, True], ids=["no_lora", "lightx2v_4step"])
def test_a14b_gguf_experts_search_and_recommit_equal_the_official_two_expert_graph(engine, lora):
    loras = WAN22_A14B_LORA_FILES["t2v"] if lora else (None, None)
    high, low = (gguf_model(engine, name, lora_name) for name, lora_name in zip(WAN22_A14B_GGUF_FILES["t2v"], loras))
    positive, negative, latent = prompts_and_latent(engine)
    settings = FOUR_STEP if lora else FULL
    references = [engine.two_expert_graph(high, low, positive, negative, latent, SEED + index, **settings)["samples"]
                  for index in range(2)]
    assert not torch.equal(references[0], references[1])

    def search(expert_cache):
        return engine.run("CachedSearchSamplerExperts", model_high=cached(engine, high, **expert_cache),
                          model_low=cached(engine, low, **expert_cache), positive=positive, negative=negative,
                          latent_image=latent, seed=SEED, num_candidates=2, sampler_name="euler", scheduler="simple",
                          **settings)

    off_drafts, _, _ = search(dict(EXPERT_SKIPPING, mode="off"))
    assert torch.equal(off_drafts["samples"], torch.cat(references))

    no_warmup = dict(warmup_steps=0, cooldown_steps=0) if lora else {}
    drafts, candidates, _ = search(EXPERT_SKIPPING | no_warmup)
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    assert not torch.equal(drafts["samples"][1:], references[1])
    delivered, seed = recommit_second(engine, candidates)
    assert seed == SEED + 1
    assert torch.equal(delivered["samples"], references[1])
