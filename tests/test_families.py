"""Every native video family through ComfyUI's real loaders (UNETLoader), with tiny checkpoints.

For each family on each runtime that has it: the checkpoint is detected as that family, the cache skips,
mode off is bit-exact to no cache, and search + recommit deliver what the stock KSampler gives for the
winning seed. ``scripts/works_with.py`` turns a run of this module into the "works with" table of docs/works-with.md.

Families are listed per file format: the fp8-scaled rows load files in the layout of ComfyUI's official
``*_fp8_scaled`` checkpoints (scripts/tiny_models.py), and detection also checks that the blocks' linear layers
stay fp8 on the loaded model (0.3.x: fp8 weights with scale_weight; 0.33: ``comfy_quant`` layers). The GGUF rows
load community-style quantizations through city96's ComfyUI-GGUF (``Unet Loader (GGUF)``, a GGUFModelPatcher),
and detection checks that the blocks' linear layers keep their quantized weights; they skip only when the
ComfyUI-GGUF snapshot is absent.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import pytest
import torch

from scripts import node_packs, tiny_models

STEPS = 8
CACHE = dict(mode="adaptive", tau=0.5, warmup_steps=2, cooldown_steps=2, static_interval=2)
VIDEO = dict(width=32, height=32, length=5, batch_size=1)


@dataclasses.dataclass(frozen=True)
class Family:
    """One model family: its checkpoint, the supported-model class detection must pick, and its graph."""

    label: str
    checkpoint: str
    detected_as: str
    cfg: float
    conditioning: dict
    # (engine, positive, negative) -> (positive, negative, latent), with the family's own nodes
    prepare: Callable
    file_format: str = "fp16 / bf16"
    loader: str = "UNETLoader"


def _empty_video(engine, positive, negative):
    return positive, negative, engine.one("EmptyHunyuanLatentVideo", **VIDEO)


def _start_image():
    return torch.linspace(0.0, 1.0, VIDEO["height"] * VIDEO["width"] * 3).reshape(1, VIDEO["height"], VIDEO["width"], 3)


def _wan_vae(engine):
    return engine.one("VAELoader", vae_name=tiny_models.WAN21_VAE_FILE)


def _wan_i2v(engine, positive, negative):
    return engine.run("WanImageToVideo", positive=positive, negative=negative, vae=_wan_vae(engine),
                      start_image=_start_image(), **VIDEO)


def _wan_vace(engine, positive, negative):
    positive, negative, latent, _ = engine.run("WanVaceToVideo", positive=positive, negative=negative,
                                               vae=_wan_vae(engine), strength=1.0, **VIDEO)
    return positive, negative, latent


def _wan22_ti2v(engine, positive, negative):
    # Without a start image the node never touches its VAE (the real one cannot be made tiny).
    return positive, negative, engine.one("Wan22ImageToVideoLatent", vae=None, **VIDEO)


def _hunyuan_t2v(engine, positive, negative):
    return engine.one("FluxGuidance", conditioning=positive, guidance=6.0), negative, _empty_video(engine, 0, 0)[2]


def _hunyuan_i2v(engine, positive, negative):
    # The tiny Wan 2.1 VAE stands in for HunyuanVideo's (same 16-channel latent layout).
    positive, latent = engine.run("HunyuanImageToVideo", positive=positive, vae=_wan_vae(engine),
                                  guidance_type="v1 (concat)", start_image=_start_image(), **VIDEO)
    return positive, negative, latent


def _hunyuan15_t2v(engine, positive, negative):
    return positive, negative, engine.one("EmptyHunyuanVideo15Latent", **VIDEO)


def _ltxv(engine, positive, negative):
    positive, negative = engine.run("LTXVConditioning", positive=positive, negative=negative, frame_rate=25.0)
    return positive, negative, engine.one("EmptyLTXVLatentVideo", width=64, height=64, length=9, batch_size=1)


FAMILIES = {
    "wan21_t2v": Family("Wan 2.1 T2V", tiny_models.WAN21_T2V_FILE, "WAN21_T2V", 5.0, {}, _empty_video),
    "wan21_i2v": Family("Wan 2.1 I2V", tiny_models.WAN21_I2V_FILE, "WAN21_I2V", 5.0, {}, _wan_i2v),
    "wan21_vace": Family("Wan 2.1 VACE", tiny_models.WAN21_VACE_FILE, "WAN21_Vace", 5.0, {}, _wan_vace),
    "wan22_ti2v": Family("Wan 2.2 TI2V 5B", tiny_models.WAN22_TI2V_FILE, "WAN22_T2V", 5.0, {}, _wan22_ti2v),
    "hunyuan_t2v": Family("HunyuanVideo T2V", tiny_models.HUNYUAN_T2V_FILE, "HunyuanVideo", 1.0, dict(pooled=True),
                          _hunyuan_t2v),
    "hunyuan_i2v": Family("HunyuanVideo I2V", tiny_models.HUNYUAN_I2V_FILE, "HunyuanVideoI2V", 1.0,
                          dict(pooled=True), _hunyuan_i2v),
    "hunyuan15_t2v": Family("HunyuanVideo 1.5 T2V", tiny_models.HUNYUAN15_T2V_FILE, "HunyuanVideo15", 6.0,
                            dict(width=tiny_models.QWEN_VL_WIDTH, byt5_tokens=4, pooled=True), _hunyuan15_t2v),
    "ltxv": Family("LTX-Video", tiny_models.LTXV_FILE, "LTXV", 3.0, dict(attention_mask=True), _ltxv),
    "kandinsky5_t2v": Family("Kandinsky 5 T2V", tiny_models.KANDINSKY5_T2V_FILE, "Kandinsky5", 5.0,
                             dict(width=tiny_models.QWEN_VL_WIDTH, pooled=True), _empty_video),
}
FP8_SCALED = "fp8-scaled"
FAMILIES |= {
    "wan21_t2v_fp8": Family("Wan 2.1 T2V", tiny_models.WAN21_T2V_FP8_FILE, "WAN21_T2V", 5.0, {}, _empty_video,
                            FP8_SCALED),
    "wan22_a14b_t2v_high_fp8": Family("Wan 2.2 A14B T2V high-noise expert", tiny_models.WAN22_A14B_FILES["t2v"][0],
                                      "WAN21_T2V", 3.5, {}, _empty_video, FP8_SCALED),
    "wan22_a14b_t2v_low_fp8": Family("Wan 2.2 A14B T2V low-noise expert", tiny_models.WAN22_A14B_FILES["t2v"][1],
                                     "WAN21_T2V", 3.5, {}, _empty_video, FP8_SCALED),
    "hunyuan15_t2v_fp8": Family("HunyuanVideo 1.5 T2V", tiny_models.HUNYUAN15_T2V_FP8_FILE, "HunyuanVideo15", 6.0,
                                dict(width=tiny_models.QWEN_VL_WIDTH, byt5_tokens=4, pooled=True), _hunyuan15_t2v,
                                FP8_SCALED),
}

GGUF = "GGUF"
FAMILIES |= {
    f"wan21_t2v_gguf_{quantization.lower()}": Family("Wan 2.1 T2V", file_name, "WAN21_T2V", 5.0, {}, _empty_video,
                                                     f"{GGUF} {quantization}", "UnetLoaderGGUF")
    for quantization, file_name in tiny_models.WAN21_T2V_GGUF_FILES.items()
}
FAMILIES |= {
    f"wan22_a14b_t2v_{expert}_gguf": Family(f"Wan 2.2 A14B T2V {expert}-noise expert", file_name, "WAN21_T2V", 3.5,
                                            {}, _empty_video, f"{GGUF} Q4_K_M", "UnetLoaderGGUF")
    for expert, file_name in zip(("high", "low"), tiny_models.WAN22_A14B_GGUF_FILES["t2v"])
}


def load_model(engine, spec: Family):
    if spec.loader == "UnetLoaderGGUF":
        if node_packs.GGUF.find_archive() is None:
            pytest.skip(f"{spec.label} ({spec.file_format}): {node_packs.GGUF.absent_reason()}")
        return engine.one("UnetLoaderGGUF", unet_name=spec.checkpoint)
    return engine.one("UNETLoader", unet_name=spec.checkpoint, weight_dtype="default")


@pytest.fixture(scope="module", autouse=True)
def record_comfyui_version(record_testsuite_property, engine):
    """The JUnit report names the runtime, for scripts/works_with.py."""
    import comfyui_version

    record_testsuite_property("comfyui_version", comfyui_version.__version__)


@pytest.fixture(scope="module", params=sorted(FAMILIES), ids=str)
def family(request, engine):
    """(family, model, positive, negative, latent) loaded through UNETLoader; skipped where the runtime lacks it."""
    import comfy.supported_models

    spec = FAMILIES[request.param]
    if not hasattr(comfy.supported_models, spec.detected_as):
        pytest.skip(f"{spec.label}: this ComfyUI has no {spec.detected_as} model (added in a later version)")
    return (spec, *graph_inputs(engine, spec))


def graph_inputs(engine, spec: Family):
    """(model, positive, negative, latent) of the family's tiny graph, the model through its loader."""
    model = load_model(engine, spec)
    conditioning = dict(tokens=6, pooled=False) | spec.conditioning
    positive = engine.one("CachedSearchTestConditioning", text_seed=1, **conditioning)
    negative = engine.one("CachedSearchTestConditioning", text_seed=2, **conditioning)
    return (model, *spec.prepare(engine, positive, negative))


def ksampler(engine, family_case, model=None, seed=7):
    spec, base_model, positive, negative, latent = family_case
    return engine.one(
        "KSampler", model=model or base_model, seed=seed, steps=STEPS, cfg=spec.cfg, sampler_name="euler",
        scheduler="simple", positive=positive, negative=negative, latent_image=latent, denoise=1.0,
    )["samples"]


def apply_cache(engine, model, **overrides):
    return engine.one("CachedSearchApplyCache", model=model, **(CACHE | overrides))


def stored_as_fp8(linear) -> bool:
    """Whether a loaded linear layer keeps float8_e4m3fn weights: as the weight's dtype (ComfyUI 0.3.x's scaled-fp8
    ops) or as its ``comfy_quant`` format (0.33's per-layer quantization)."""
    state = linear.state_dict()
    if "comfy_quant" in state:
        return json.loads(bytes(state["comfy_quant"].tolist()))["format"] == "float8_e4m3fn"
    return state["weight"].dtype == torch.float8_e4m3fn


def block_linears(diffusion_model) -> list:
    """The linear layers inside transformer blocks (those fp8-scaled files quantize), whatever ops class built them."""
    return [module for name, module in diffusion_model.named_modules()
            if type(module).__name__ == "Linear" and any(prefix in name for prefix in tiny_models.FP8_BLOCK_PREFIXES)]


def test_checkpoint_is_detected_as_its_family(family):
    spec, model, *_ = family
    assert type(model.model.model_config).__name__ == spec.detected_as
    linears = block_linears(model.model.diffusion_model)
    if spec.file_format.startswith(GGUF):
        quantization = spec.file_format.removeprefix(f"{GGUF} ")
        assert type(model).__name__ == "GGUFModelPatcher"
        assert linears and {linear.weight.tensor_type.name for linear in linears} == {
            tiny_models.GGUF_QUANTIZATIONS[quantization][0]}
    elif spec.file_format == FP8_SCALED:
        assert linears and all(stored_as_fp8(linear) for linear in linears)
    else:
        assert not any(stored_as_fp8(linear) for linear in linears)


def test_cache_skips(engine, family):
    spec, model, *_ = family
    statistics = []
    observed = apply_cache(engine, model)
    observed.model_options["transformer_options"][engine.extension.nodes.cache_patch.STATISTICS_CALLBACK_OPTION] = (
        statistics.append)
    cached = ksampler(engine, family, observed)
    (run,) = statistics
    assert run.inactive_reason is None
    assert run.calls_skipped > 0
    assert torch.isfinite(cached).all()
    assert not torch.equal(cached, ksampler(engine, family))


def test_mode_off_is_bit_exact(engine, family):
    _, model, *_ = family
    assert torch.equal(ksampler(engine, family, apply_cache(engine, model, mode="off")), ksampler(engine, family))


def test_search_and_recommit_equal_the_stock_sampler_for_the_winner(engine, family):
    spec, model, positive, negative, latent = family
    drafts, candidates, _ = engine.run(
        "CachedSearchSampler", model=apply_cache(engine, model), positive=positive, negative=negative,
        latent_image=latent, seed=20, num_candidates=2, steps=STEPS, cfg=spec.cfg, sampler_name="euler",
        scheduler="simple", denoise=1.0,
    )
    assert all(draft.calls_skipped > 0 and draft.cache_inactive_reason is None for draft in candidates.drafts)
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0.1, 0.9")
    delivered, seed, report = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    assert seed == 21
    stock = ksampler(engine, family, seed=21)
    assert torch.equal(delivered["samples"], stock)
    assert not torch.equal(drafts["samples"][1:], stock)  # the draft was cached, the delivery is not
