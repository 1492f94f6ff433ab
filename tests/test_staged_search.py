"""The staged search on Wan 2.2 A14B's two experts, against the official two-KSamplerAdvanced graph (in process)."""

import re

import pytest
import torch

from cachedsearch_core.search_report import DELIVERED_BY, WINNER_LINE_PREFIX
from report_text import numbers, refusal
from scripts.tiny_models import WAN21_VAE_FILE, WAN22_A14B_FILES, WAN22_A14B_LORA_FILES, WAN22_TI2V_FILE

pytestmark = pytest.mark.slow  # in process, but several seconds a test: not in the fast tier

LATENT = dict(width=32, height=32, length=5, batch_size=1)
SEED = 70
OFF = dict(mode="off", tau=0.5, warmup_steps=0, cooldown_steps=0, static_interval=2)
SKIPPING = dict(mode="adaptive", tau=2.0, warmup_steps=1, cooldown_steps=1, static_interval=2)
# The official graph's settings, and its 4-step LoRA path (4 steps split 2, cfg 1).
FULL = dict(steps=8, split_step=4, cfg=3.5)
FOUR_STEP = dict(steps=4, split_step=2, cfg=1.0)


def expert(engine, file_name, lora_name=None):
    model = engine.one("UNETLoader", unet_name=file_name, weight_dtype="default")
    if lora_name is not None:
        model = engine.one("LoraLoaderModelOnly", model=model, lora_name=lora_name, strength_model=1.0)
    return engine.one("ModelSamplingSD3", model=model, shift=5.0)


def graph_inputs(engine, task, lora):
    """High and low experts, conditioning and latent as the official T2V / I2V template builds them."""
    loras = WAN22_A14B_LORA_FILES[task] if lora else (None, None)
    high, low = (expert(engine, name, lora_name) for name, lora_name in zip(WAN22_A14B_FILES[task], loras))
    positive = engine.one("CachedSearchTestConditioning", text_seed=11, tokens=8, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=12, tokens=8, pooled=False)
    if task == "t2v":
        return high, low, positive, negative, engine.one("EmptyHunyuanLatentVideo", **LATENT)
    start_image = torch.rand((1, 32, 32, 3), generator=torch.Generator().manual_seed(3))
    positive, negative, latent = engine.run(
        "WanImageToVideo", positive=positive, negative=negative, vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE),
        start_image=start_image, **LATENT)
    return high, low, positive, negative, latent


def search(engine, high, low, positive, negative, latent, n=2, seed=SEED, **settings):
    return engine.run("CachedSearchSamplerExperts", model_high=high, model_low=low, positive=positive,
                      negative=negative, latent_image=latent, seed=seed, num_candidates=n, sampler_name="euler",
                      scheduler="simple", **(FULL | settings))


def cached(engine, model, **settings):
    return engine.one("CachedSearchApplyCache", model=model, **settings)


def recommit(engine, candidates, scores, mode="commit", **inputs):
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores=scores)
    return engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode=mode, **inputs)


@pytest.mark.parametrize("task, lora", [("t2v", False), ("i2v", False), ("t2v", True), ("i2v", True)])
def test_drafts_and_commit_equal_the_official_two_expert_graph(engine, task, lora):
    high, low, positive, negative, latent = graph_inputs(engine, task, lora)
    settings = FOUR_STEP if lora else FULL
    drafts, _, _ = search(engine, cached(engine, high, **OFF), cached(engine, low, **OFF), positive, negative,
                          latent, **settings)
    references = [engine.two_expert_graph(high, low, positive, negative, latent, SEED + index, **settings)
                  for index in range(2)]
    for index, reference in enumerate(references):
        assert torch.equal(drafts["samples"][index : index + 1], reference["samples"])
    assert not torch.equal(references[0]["samples"], references[1]["samples"])

    warmup = dict(warmup_steps=0, cooldown_steps=0) if lora else {}
    skipping_drafts, candidates, _ = search(engine, cached(engine, high, **(SKIPPING | warmup)),
                                            cached(engine, low, **(SKIPPING | warmup)), positive, negative, latent,
                                            **settings)
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    assert not torch.equal(skipping_drafts["samples"][1:2], references[1]["samples"])  # the drafts were lossy
    delivered, seed, report = recommit(engine, candidates, "0.2 0.7")
    assert seed == SEED + 1
    assert delivered.keys() == references[1].keys()
    assert torch.equal(delivered["samples"], references[1]["samples"])
    (winner,) = [line for line in report.splitlines() if line.startswith(WINNER_LINE_PREFIX)]
    assert numbers(winner) == [2, 71] and winner.endswith(DELIVERED_BY["commit"])  # candidate 2, seed 71
    kept, _, _ = recommit(engine, candidates, "0.2 0.7", mode="keep")
    assert torch.equal(kept["samples"], skipping_drafts["samples"][1:2])


def test_each_expert_runs_a_fresh_cache_with_its_own_warmup_and_cooldown(engine):
    high, low, positive, negative, latent = graph_inputs(engine, "t2v", lora=False)
    # 12 steps split 6: each expert sees steps 0..5 of its own run.
    high_cache = cached(engine, high, **dict(OFF, mode="static", warmup_steps=1, cooldown_steps=1))
    low_cache = cached(engine, low, **dict(OFF, mode="static", warmup_steps=1, cooldown_steps=0))
    _, candidates, report = search(engine, high_cache, low_cache, positive, negative, latent, steps=12, split_step=6)
    for draft in candidates.drafts:
        high_calls, low_calls = draft.stage_calls
        calls_per_step = (high_calls.computed + high_calls.skipped) // 6
        assert calls_per_step > 0 and high_calls.computed + high_calls.skipped == 6 * calls_per_step
        # high: warmup step 0, cooldown step 5, every 2nd from step 1 -> steps 2 and 4 skipped.
        assert high_calls.skipped == 2 * calls_per_step
        # low: warmup step 0, no cooldown, every 2nd from step 1 -> 2 and 4 skipped (not 6, 8 and 10 as it would be
        # if the expert's steps were counted from the start of the whole trajectory).
        assert low_calls.skipped == 2 * calls_per_step
        assert (draft.calls_computed, draft.calls_skipped) == (high_calls.computed + low_calls.computed,
                                                               high_calls.skipped + low_calls.skipped)
    assert "high noise: cache static every 2 steps (warmup 1, cooldown 1); low noise: cache static" in report
    # the high-noise stage's skipped calls of its calls over all drafts, and their share
    assert [4 * calls_per_step, 12 * calls_per_step, 33] in [numbers(line) for line in report.splitlines()
                                                             if line.startswith("high noise: ")]

    _, candidates, report = search(engine, high_cache, low, positive, negative, latent, steps=12, split_step=6)
    assert all(draft.stage_calls[0].skipped > 0 and draft.stage_calls[1].skipped == 0 for draft in candidates.drafts)
    assert "low noise: no cache" in report


def test_the_panel_shows_each_experts_skipped_calls_and_the_counted_cost(engine):
    high, low, positive, negative, latent = graph_inputs(engine, "t2v", lora=False)
    high, high_calls = engine.counting_transformer_calls(cached(engine, high, **SKIPPING))
    low, low_calls = engine.counting_transformer_calls(cached(engine, low, **dict(SKIPPING, mode="off")))
    output = engine.output("CachedSearchSamplerExperts", model_high=high, model_low=low, positive=positive,
                           negative=negative, latent_image=latent, seed=SEED, num_candidates=2, sampler_name="euler",
                           scheduler="simple", **FULL)
    candidates = output.result[1]
    rows = output.ui["cachedsearch_drafts"]
    assert [row["candidate"] for row in rows] == [1, 2]
    for row, draft in zip(rows, candidates.drafts):
        assert [(stage["stage"], stage["skipped"], stage["calls"]) for stage in row["stages"]] == [
            (name, calls.skipped, calls.computed + calls.skipped)
            for name, calls in zip(("high noise", "low noise"), draft.stage_calls)]
        assert row["stages"][0]["skipped"] > 0 and row["stages"][1]["skipped"] == 0  # only the high expert caches
        assert row["stages"][0]["calls"] == row["stages"][1]["calls"] == 4  # 4 steps each, one call per step
    (cost,) = output.ui["cachedsearch_cost"]
    assert cost["search_calls"] == len(high_calls) + len(low_calls) and cost["full_calls"] == 2 * 8
    assert cost["calls_ratio"] == (len(high_calls) + len(low_calls)) / 16


def test_cancel_inside_the_low_noise_stage_then_the_same_search_is_clean(engine):
    import comfy.model_management
    import comfy.utils

    high, low, positive, negative, latent = graph_inputs(engine, "t2v", lora=False)
    high, low = cached(engine, high, **SKIPPING), cached(engine, low, **SKIPPING)
    clean_drafts, clean_candidates, _ = search(engine, high, low, positive, negative, latent, n=3)
    # Stage by stage: all 3 high-noise runs (4 steps each), then the low-noise runs; cancel in the second one.
    cancel_after = 3 * 4 + 4
    progress_seen = []

    def press_cancel(value, total, preview, node_id=None):
        progress_seen.append((value, total))
        if value > cancel_after:
            raise comfy.model_management.InterruptProcessingException()

    comfy.utils.set_progress_bar_global_hook(press_cancel)
    try:
        with pytest.raises(comfy.model_management.InterruptProcessingException):
            search(engine, high, low, positive, negative, latent, n=3)
        assert comfy.utils.PROGRESS_BAR_HOOK is press_cancel  # the search put the server's hook back
    finally:
        comfy.utils.set_progress_bar_global_hook(None)
    assert {total for _, total in progress_seen} == {3 * FULL["steps"]}  # one bar over N x all steps
    assert cancel_after < progress_seen[-1][0] < cancel_after + 4
    drafts, candidates, _ = search(engine, high, low, positive, negative, latent, n=3)
    assert torch.equal(drafts["samples"], clean_drafts["samples"])
    assert [d.stage_calls for d in candidates.drafts] == [d.stage_calls for d in clean_candidates.drafts]


@pytest.mark.parametrize("settings, message", [  # the value got, the steps, the range of split steps
    (dict(split_step=0), refusal("split_step", 0, 8, 1, 7)),
    (dict(split_step=8), refusal("split_step", 8, 8, 1, 7)),
    (dict(num_candidates=0), refusal("num_candidates", 0)),
])
def test_split_step_and_width_are_validated_naming_the_input(engine, settings, message):
    node = engine.nodes["CachedSearchSamplerExperts"]
    arguments = dict(seed=0, num_candidates=2, steps=8, split_step=4) | settings
    assert re.match(message, node.validate_inputs(**arguments))
    assert node.validate_inputs(seed=0, num_candidates=2, steps=8, split_step=4) is True


def test_bad_inputs_get_errors_naming_the_input(engine):
    high, low, positive, negative, latent = graph_inputs(engine, "t2v", lora=False)
    with pytest.raises(ValueError, match=refusal("split_step", 9, 8)):
        search(engine, high, low, positive, negative, latent, split_step=9)
    ti2v = engine.one("UNETLoader", unet_name=WAN22_TI2V_FILE, weight_dtype="default")
    with pytest.raises(ValueError, match=refusal("model_low", "Wan22", "model_high", "Wan21")):
        search(engine, high, ti2v, positive, negative, latent)
    batch_of_two = engine.one("EmptyHunyuanLatentVideo", **(LATENT | dict(batch_size=2)))
    with pytest.raises(ValueError, match=refusal("latent_image", 2)):
        search(engine, high, low, positive, negative, batch_of_two)
    _, candidates, _ = search(engine, high, low, positive, negative, latent)
    # 2 stages on the high- and low-noise experts: connect those inputs instead
    with pytest.raises(ValueError, match=refusal("model", 2, "high noise", "low noise", "model_high", "model_low")):
        recommit(engine, candidates, "1 0", model=high)


@pytest.mark.parametrize("latent_node, latent_inputs", [
    ("EmptyHunyuanLatentVideo", LATENT),
    ("EmptyLatentImage", dict(width=64, height=64, batch_size=1)),
    ("Wan22ImageToVideoLatent", dict(width=32, height=32, length=5, batch_size=1)),
])
def test_wan22_5b_latents_are_prepared_by_the_stock_sampler(engine, latent_node, latent_inputs):
    """Wan 2.2 5B samples 48-channel latents at 16x downscale; ComfyUI adapts other nodes' empty latents
    (where they carry a downscale ratio, it also rescales them): the search inherits that preparation."""
    model = engine.one("ModelSamplingSD3", shift=8.0,
                       model=engine.one("UNETLoader", unet_name=WAN22_TI2V_FILE, weight_dtype="default"))
    if latent_node == "Wan22ImageToVideoLatent":
        latent_inputs = dict(latent_inputs, vae=engine.one("VAELoader", vae_name="wan2.2_vae.safetensors"))
    latent = engine.one(latent_node, **latent_inputs)
    positive = engine.one("CachedSearchTestConditioning", text_seed=13, tokens=8, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=14, tokens=8, pooled=False)
    settings = dict(steps=6, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
    skipping = cached(engine, model, **SKIPPING)
    drafts, candidates, _ = engine.run("CachedSearchSampler", model=skipping, positive=positive, negative=negative,
                                       latent_image=latent, seed=SEED, num_candidates=2, **settings)
    delivered, _, _ = recommit(engine, candidates, "0 1")
    reference = engine.one("KSampler", model=model, positive=positive, negative=negative, latent_image=latent,
                           seed=SEED + 1, **settings)
    assert delivered["samples"].shape[1] == 48
    assert delivered.keys() == reference.keys()
    assert torch.equal(delivered["samples"], reference["samples"])
    assert drafts["samples"].shape[1:] == reference["samples"].shape[1:]
    if "downscale_ratio_spacial" in latent:  # the runtime rescales a latent made for another downscale ratio
        ratio = latent["downscale_ratio_spacial"] / 16
        assert delivered["samples"].shape[-1] == round(latent["samples"].shape[-1] * ratio)
