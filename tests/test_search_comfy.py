"""Sampler, Sampler (Advanced) and Recommit on ComfyUI's real samplers (in process, CPU)."""

import pytest
import torch

from cachedsearch_core.search_report import DELIVERED_BY, WINNER_LINE_PREFIX
from report_text import numbers, refusal
from scripts.tiny_models import HUNYUAN_T2V_FILE, WAN21_I2V_FILE, WAN21_T2V_FILE, WAN21_VAE_FILE

LATENT = dict(width=64, height=64, length=9, batch_size=1)
SETTINGS = dict(steps=12, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
SKIPPING = dict(mode="adaptive", tau=0.5, warmup_steps=2, cooldown_steps=2, static_interval=2)
OFF = dict(SKIPPING, mode="off")
SEED = 40
# The same checks on a second family: a few seconds each, so in the full run only (Wan runs them in the fast tier).
HUNYUAN_SLOW = pytest.param("hunyuan", marks=pytest.mark.slow)


@pytest.fixture(scope="module")
def families(engine):
    wan = engine.one("ModelSamplingSD3", model=engine.one("UNETLoader", unet_name=WAN21_T2V_FILE,
                                                           weight_dtype="default"), shift=8.0)
    hunyuan = engine.one("UNETLoader", unet_name=HUNYUAN_T2V_FILE, weight_dtype="default")
    wan_pos = engine.one("CachedSearchTestConditioning", text_seed=1, tokens=8, pooled=False)
    wan_neg = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=8, pooled=False)
    hy_pos = engine.one("FluxGuidance", guidance=6.0,
                        conditioning=engine.one("CachedSearchTestConditioning", text_seed=3, tokens=8, pooled=True))
    hy_neg = engine.one("CachedSearchTestConditioning", text_seed=4, tokens=8, pooled=True)
    return {"wan": (wan, wan_pos, wan_neg, 5.0), "hunyuan": (hunyuan, hy_pos, hy_neg, 1.0)}


def empty_latent(engine, **overrides):
    return engine.one("EmptyHunyuanLatentVideo", **(LATENT | overrides))


def search(engine, model, positive, negative, latent, seed=SEED, n=3, **settings):
    return engine.run("CachedSearchSampler", model=model, positive=positive, negative=negative, latent_image=latent,
                      seed=seed, num_candidates=n, **(SETTINGS | settings))


def ksampler(engine, model, positive, negative, latent, seed, **settings):
    return engine.one("KSampler", model=model, positive=positive, negative=negative, latent_image=latent, seed=seed,
                      **(SETTINGS | settings))["samples"]


def ranking(engine, candidates, scores):
    return engine.one("CachedSearchRankingFromScores", candidates=candidates, scores=scores)


def custom_parts(engine, model, positive, negative, cfg):
    guider = engine.one("CFGGuider", model=model, positive=positive, negative=negative, cfg=cfg)
    sampler = engine.one("KSamplerSelect", sampler_name="euler")
    sigmas = engine.one("BasicScheduler", model=model, scheduler="simple", steps=SETTINGS["steps"], denoise=1.0)
    return guider, sampler, sigmas


def custom_advanced(engine, parts, latent, seed):
    guider, sampler, sigmas = parts
    noise = engine.one("RandomNoise", noise_seed=seed)
    return engine.run("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas,
                      latent_image=latent)[0]["samples"]


@pytest.mark.parametrize("family", ["wan", HUNYUAN_SLOW])
def test_uncached_drafts_equal_stock_ksampler_for_each_seed(engine, families, family):
    model, positive, negative, cfg = families[family]
    latent = empty_latent(engine)
    off_model = engine.one("CachedSearchApplyCache", model=model, **OFF)
    drafts, candidates, _ = search(engine, off_model, positive, negative, latent, cfg=cfg)
    assert candidates.seeds == [SEED, SEED + 1, SEED + 2]
    assert drafts["samples"].shape[0] == 3
    for index in range(3):
        reference = ksampler(engine, model, positive, negative, latent, SEED + index, cfg=cfg)
        assert torch.equal(drafts["samples"][index : index + 1], reference)
    assert not torch.equal(drafts["samples"][0], drafts["samples"][1])


@pytest.mark.parametrize("family", ["wan", HUNYUAN_SLOW])
def test_uncached_advanced_drafts_equal_stock_sampler_custom_advanced(engine, families, family):
    model, positive, negative, cfg = families[family]
    latent = empty_latent(engine)
    parts = custom_parts(engine, engine.one("CachedSearchApplyCache", model=model, **OFF), positive, negative, cfg)
    drafts, candidates, _ = engine.run("CachedSearchSamplerAdvanced", guider=parts[0], sampler=parts[1],
                                       sigmas=parts[2], latent_image=latent, seed=SEED, num_candidates=3)
    stock_parts = custom_parts(engine, model, positive, negative, cfg)
    for index in range(3):
        assert torch.equal(drafts["samples"][index : index + 1],
                           custom_advanced(engine, stock_parts, latent, SEED + index))


@pytest.mark.parametrize("family", ["wan", HUNYUAN_SLOW])
def test_commit_equals_stock_ksampler_with_the_winning_seed(engine, families, family):
    model, positive, negative, cfg = families[family]
    latent = empty_latent(engine)
    cached = engine.one("CachedSearchApplyCache", model=model, **SKIPPING)
    drafts, candidates, _ = search(engine, cached, positive, negative, latent, cfg=cfg)
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    delivered, seed, report = engine.run("CachedSearchRecommit", candidates=candidates,
                                         ranking=ranking(engine, candidates, "0.1 0.3 0.2"), mode="commit")
    assert seed == SEED + 1
    reference = ksampler(engine, model, positive, negative, latent, SEED + 1, cfg=cfg)
    assert torch.equal(delivered["samples"], reference)
    assert not torch.equal(drafts["samples"][1:2], reference)  # the draft itself was lossy
    (winner,) = [line for line in report.splitlines() if line.startswith(WINNER_LINE_PREFIX)]
    assert numbers(winner) == [2, 41] and winner.endswith(DELIVERED_BY["commit"])  # candidate 2, seed 41
    # the model passed explicitly (still carrying the cache) gives the same full-compute result
    delivered_again, _, _ = engine.run("CachedSearchRecommit", candidates=candidates, model=cached,
                                       ranking=ranking(engine, candidates, "0.1 0.3 0.2"), mode="commit")
    assert torch.equal(delivered_again["samples"], reference)


def test_advanced_commit_equals_stock_sampler_custom_advanced(engine, families):
    model, positive, negative, cfg = families["wan"]
    latent = empty_latent(engine)
    cached = engine.one("CachedSearchApplyCache", model=model, **SKIPPING)
    parts = custom_parts(engine, cached, positive, negative, cfg)
    _, candidates, _ = engine.run("CachedSearchSamplerAdvanced", guider=parts[0], sampler=parts[1], sigmas=parts[2],
                                  latent_image=latent, seed=SEED, num_candidates=3)
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates,
                                    ranking=ranking(engine, candidates, "5 1 2"), mode="commit")
    assert seed == SEED
    assert torch.equal(delivered["samples"],
                       custom_advanced(engine, custom_parts(engine, model, positive, negative, cfg), latent, SEED))
    # the guider node's own object still carries the cache
    assert parts[0].model_patcher is cached


def test_draft_is_the_same_alone_or_within_a_search(engine, families):
    model, positive, negative, cfg = families["wan"]
    latent = empty_latent(engine)
    cached = engine.one("CachedSearchApplyCache", model=model, **SKIPPING)
    drafts, _, _ = search(engine, cached, positive, negative, latent, n=4)
    alone, _, _ = search(engine, cached, positive, negative, latent, seed=SEED + 2, n=1)
    assert torch.equal(drafts["samples"][2:3], alone["samples"])


def test_keep_returns_exactly_the_winners_draft(engine, families):
    model, positive, negative, _ = families["wan"]
    latent = empty_latent(engine)
    cached = engine.one("CachedSearchApplyCache", model=model, **SKIPPING)
    drafts, candidates, _ = search(engine, cached, positive, negative, latent)
    delivered, seed, report = engine.run("CachedSearchRecommit", candidates=candidates,
                                         ranking=ranking(engine, candidates, "0 0 1"), mode="keep")
    assert seed == SEED + 2
    assert torch.equal(delivered["samples"], drafts["samples"][2:3])
    assert any(line.endswith(DELIVERED_BY["keep"]) for line in report.splitlines())



@pytest.mark.slow
def test_panel_rows_cost_and_preview_vae_frames_over_a_real_search(engine, families, vae_decodes):
    """Without preview_vae nothing is decoded; with it every draft is decoded once and its row shows at most 8 small
    frames equal to VAEDecode of that draft. The cost's calls are the transformer calls the search computed."""
    model, positive, negative, _ = families["wan"]
    latent = empty_latent(engine)
    counted, calls = engine.counting_transformer_calls(engine.one("CachedSearchApplyCache", model=model, **SKIPPING))
    inputs = dict(model=counted, positive=positive, negative=negative, latent_image=latent, seed=SEED,
                  num_candidates=3, **SETTINGS)
    plain = engine.output("CachedSearchSampler", **inputs)
    assert vae_decodes == []
    rows = plain.ui["cachedsearch_drafts"]
    assert [(row["candidate"], row["seed"]) for row in rows] == [(1, SEED), (2, SEED + 1), (3, SEED + 2)]
    assert all("frames" not in row and "preview_score" not in row for row in rows)
    stock, stock_calls = engine.counting_transformer_calls(model)
    ksampler(engine, stock, positive, negative, latent, SEED)
    (cost,) = plain.ui["cachedsearch_cost"]
    assert 0 < cost["search_calls"] == len(calls) == sum(d.calls_computed for d in plain.result[1].drafts)
    assert cost["full_calls"] == 3 * len(stock_calls) and cost["calls_ratio"] == len(calls) / (3 * len(stock_calls))
    assert cost["calls_ratio"] < 1
    # Seconds against full best-of-N once a full rollout's are measured: here only by a draft that skipped nothing.
    assert (cost["seconds_ratio"] is None) is all(d.calls_skipped > 0 for d in plain.result[1].drafts)
    assert f"the drafts computed {len(calls)} of the {3 * len(stock_calls)}" in plain.result[2]

    vae = engine.one("VAELoader", vae_name=WAN21_VAE_FILE)
    watched = engine.output("CachedSearchSampler", **inputs, preview_vae=vae)
    drafts = watched.result[0]
    assert vae_decodes == [(1, 16, 3, 8, 8)] * 3  # one decode per draft, nothing else
    for index, row in enumerate(watched.ui["cachedsearch_drafts"]):
        frames = engine.read_panel_frames(row["frames"])
        decoded = engine.one("VAEDecode", vae=vae, samples={"samples": drafts["samples"][index : index + 1]})
        assert decoded.shape[0] == 9 and len(frames) == 8  # 8 of 9, evenly spaced, first and last included
        assert all(max(frame.shape[:2]) <= 256 for frame in frames)
        expected = engine.as_saved(decoded[[0, 1, 2, 3, 5, 6, 7, 8]])
        assert all((frame == reference).all() for frame, reference in zip(frames, expected))
    assert watched.ui["cachedsearch_drafts"][0]["frames"] != watched.ui["cachedsearch_drafts"][1]["frames"]


def test_cancel_during_a_draft_then_the_same_search_is_clean(engine, families):
    import comfy.model_management
    import comfy.utils

    model, positive, negative, _ = families["wan"]
    latent = empty_latent(engine)
    cached = engine.one("CachedSearchApplyCache", model=model, **SKIPPING)
    clean_drafts, clean_candidates, _ = search(engine, cached, positive, negative, latent)
    pressing, counts = engine.press_cancel_at(cached, run=2, call=3)
    progress_seen = []
    # ComfyUI 0.33 throttles progress events, so the hook sees some steps only; 0.3.75 sees every step
    comfy.utils.set_progress_bar_global_hook(lambda value, total, *_, **__: progress_seen.append((value, total)))
    try:
        with pytest.raises(comfy.model_management.InterruptProcessingException):
            search(engine, pressing, positive, negative, latent)
    finally:
        comfy.utils.set_progress_bar_global_hook(None)
        comfy.model_management.interrupt_current_processing(False)
    assert counts["runs"] == 2  # stopped inside the second draft; the third never started
    assert progress_seen and {total for _, total in progress_seen} == {3 * SETTINGS["steps"]}  # one bar, N x steps
    assert max(value for value, _ in progress_seen) < 2 * SETTINGS["steps"]
    drafts, candidates, _ = search(engine, cached, positive, negative, latent)
    assert torch.equal(drafts["samples"], clean_drafts["samples"])
    assert [d.calls_skipped for d in candidates.drafts] == [d.calls_skipped for d in clean_candidates.drafts]


def test_noise_mask_latent_is_searched_like_ksampler(engine, families):
    model, positive, negative, _ = families["wan"]
    latent = empty_latent(engine)
    latent = dict(latent, samples=torch.randn(latent["samples"].shape, generator=torch.Generator().manual_seed(0)))
    mask = torch.zeros((1, 64, 64))
    mask[:, 16:48, 16:48] = 1.0
    masked = engine.one("SetLatentNoiseMask", samples=latent, mask=mask)
    off_model = engine.one("CachedSearchApplyCache", model=model, **OFF)
    drafts, _, _ = search(engine, off_model, positive, negative, masked, n=2, denoise=0.8)
    for index in range(2):
        assert torch.equal(drafts["samples"][index : index + 1],
                           ksampler(engine, model, positive, negative, masked, SEED + index, denoise=0.8))


@pytest.mark.slow
def test_image_to_video_conditioning_is_searched_and_committed_exactly(engine):
    model = engine.one("UNETLoader", unet_name=WAN21_I2V_FILE, weight_dtype="default")
    vae = engine.one("VAELoader", vae_name=WAN21_VAE_FILE)
    positive = engine.one("CachedSearchTestConditioning", text_seed=5, tokens=8, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=6, tokens=8, pooled=False)
    start_image = torch.rand((1, 64, 64, 3), generator=torch.Generator().manual_seed(1))
    positive, negative, latent = engine.run("WanImageToVideo", positive=positive, negative=negative, vae=vae,
                                            width=64, height=64, length=9, batch_size=1, start_image=start_image)
    off_drafts, _, _ = search(engine, engine.one("CachedSearchApplyCache", model=model, **OFF),
                              positive, negative, latent, n=2)
    assert torch.equal(off_drafts["samples"][1:2], ksampler(engine, model, positive, negative, latent, SEED + 1))
    cached = engine.one("CachedSearchApplyCache", model=model, **SKIPPING)
    _, candidates, _ = search(engine, cached, positive, negative, latent, n=2)
    assert candidates.drafts[0].calls_skipped > 0  # the cache works on the 36-channel input
    delivered, _, _ = engine.run("CachedSearchRecommit", candidates=candidates,
                                 ranking=ranking(engine, candidates, "0 1"), mode="commit")
    assert torch.equal(delivered["samples"], ksampler(engine, model, positive, negative, latent, SEED + 1))


def test_model_without_cache_is_allowed_and_the_report_says_so(engine, families):
    model, positive, negative, _ = families["wan"]
    drafts, candidates, report = search(engine, model, positive, negative, empty_latent(engine), n=2)
    no_cache = engine.extension.nodes.candidates.NO_CACHE_DESCRIPTION
    assert candidates.cache_description == no_cache and no_cache in report.splitlines()[0]
    # Counted all the same, by the extension's own meter: every draft computed every call.
    cost = candidates.cost().as_dict()
    assert cost["search_calls"] == cost["full_calls"] == 2 * SETTINGS["steps"] and cost["calls_ratio"] == 1.0
    assert all(d.calls_skipped == 0 for d in candidates.drafts)


def test_latent_batch_above_one_is_rejected_with_advice(engine, families):
    model, positive, negative, _ = families["wan"]
    with pytest.raises(ValueError, match=refusal("latent_image", 2, "num_candidates")):  # set that instead
        search(engine, model, positive, negative, empty_latent(engine, batch_size=2))


@pytest.mark.slow
def test_ranking_must_match_the_candidates(engine, families):
    model, positive, negative, _ = families["wan"]
    _, candidates, _ = search(engine, model, positive, negative, empty_latent(engine), n=2)
    with pytest.raises(ValueError, match=refusal("ranking", 3, 2)):
        ranking(engine, candidates, "1 2 3")
    other_candidates = search(engine, model, positive, negative, empty_latent(engine), n=3)[1]
    wrong = ranking(engine, other_candidates, "1 2 3")
    with pytest.raises(ValueError, match=refusal("ranking", 3, 2)):
        engine.run("CachedSearchRecommit", candidates=candidates, ranking=wrong, mode="commit")


@pytest.mark.parametrize("inputs, message", [
    (dict(denoise=0.0), "denoise: got 0.0"),
    (dict(num_candidates=0), "num_candidates: got 0"),
    (dict(num_candidates=65), "num_candidates: got 65"),
    (dict(seed=0xFFFF_FFFF_FFFF_FFFF), "seed: got 18446744073709551615"),
])
def test_sampler_validation_names_the_input(engine, inputs, message):
    node = engine.nodes["CachedSearchSampler"]
    arguments = dict(seed=0, num_candidates=8, denoise=1.0) | inputs
    assert message in node.validate_inputs(**arguments)
    assert node.validate_inputs(seed=0, num_candidates=8, denoise=1.0) is True
