"""LTX-2 (ComfyUI 0.33's LTXAV): one transformer denoises a video and an audio latent together, packed by
LTXVConcatAVLatent; the transformer gets and returns the list [video, audio].

The tiny transformer (scripts/tiny_ltx2.py) loads through UNETLoader and is detected as LTXAV; the tiny official
checkpoint holds it and the audio VAE, which LTXVAudioVAELoader reads. The cache keeps a
state per part of every branch and skips the whole call or none of it. The tests named as test_families.py's are the
LTX-2 row of docs/works-with.md (``scripts/works_with.py`` reads this module's JUnit report beside that one's).
ComfyUI 0.3.75 has no LTX-2: the tiny_ltx2 fixture skips there, naming what the runtime lacks.
"""

from __future__ import annotations

import pytest
import torch

from scripts.tiny_ltx2 import LTX2_CHECKPOINT_FILE, LTX2_DISTILLED_LORA_FILE, LTX2_FILE, LTX2_TINY_CONFIG
from test_families import Family

STEPS = 8
CFG = 3.0
CACHE = dict(mode="adaptive", tau=0.5, warmup_steps=2, cooldown_steps=2, static_interval=2)
# The LTX-2 row of the works-with table (scripts/works_with.py reads labels and file formats from here).
FAMILIES = {"ltx2": Family("LTX-2.3 (video + audio)", LTX2_FILE, "LTXAV", CFG,
                           dict(width=2 * LTX2_TINY_CONFIG["caption_channels"]), prepare=None)}
ROW = pytest.mark.parametrize("family", ["ltx2"])
SETUP = "tiny LTX-2 search"  # the drafts' setup where a test keeps them (``saving_drafts_in``)


@pytest.fixture(scope="module", autouse=True)
def record_comfyui_version(record_testsuite_property, engine):
    """The JUnit report names the runtime, for scripts/works_with.py."""
    import comfyui_version

    record_testsuite_property("comfyui_version", comfyui_version.__version__)


def ksampler(engine, ltx2, model=None, seed=7):
    """The stock KSampler's packed latent, as its [video, audio] parts."""
    base, positive, negative, latent = ltx2
    samples = engine.one("KSampler", model=model or base, seed=seed, steps=STEPS, cfg=CFG, sampler_name="euler",
                         scheduler="simple", positive=positive, negative=negative, latent_image=latent,
                         denoise=1.0)["samples"]
    return samples.unbind()


def apply_cache(engine, model, **overrides):
    return engine.one("CachedSearchApplyCache", model=model, **(CACHE | overrides))


def observed(engine, model, statistics: list):
    """``model`` whose cache hands each run's statistics to ``statistics``."""
    option = engine.extension.nodes.cache_patch.STATISTICS_CALLBACK_OPTION
    model.model_options["transformer_options"][option] = statistics.append
    return model


@ROW
def test_checkpoint_is_detected_as_its_family(tiny_ltx2, family):
    model = tiny_ltx2[0]
    assert type(model.model.model_config).__name__ == "LTXAV"
    diffusion_model = model.model.diffusion_model
    assert type(diffusion_model).__name__ == "LTXAVModel"
    # The widths came from the file's metadata, as the official files carry them.
    assert diffusion_model.audio_num_attention_heads == LTX2_TINY_CONFIG["audio_num_attention_heads"]
    video, audio = tiny_ltx2[3]["samples"].unbind()
    assert video.shape == (1, 128, 2, 2, 2) and audio.shape == (1, 8, 9, 16)


@ROW
def test_cache_skips(engine, tiny_ltx2, family):
    statistics = []
    cached = ksampler(engine, tiny_ltx2, observed(engine, apply_cache(engine, tiny_ltx2[0]), statistics))
    (run,) = statistics
    assert run.inactive_reason is None
    # cond and uncond batched: one call a step, each skipped call counted once (not once per part)
    assert run.calls == STEPS and run.calls_skipped > 0
    assert run.skipped_by_branch == {"cond": run.calls_skipped, "uncond": run.calls_skipped}
    stock = ksampler(engine, tiny_ltx2)
    for cached_part, stock_part in zip(cached, stock, strict=True):
        assert torch.isfinite(cached_part).all()
        assert not torch.equal(cached_part, stock_part)  # both parts came from the cached transformer


@ROW
def test_mode_off_is_bit_exact(engine, tiny_ltx2, family):
    statistics = []
    off = ksampler(engine, tiny_ltx2, observed(engine, apply_cache(engine, tiny_ltx2[0], mode="off"), statistics))
    assert statistics[0].calls_computed == STEPS and statistics[0].inactive_reason is None
    for off_part, stock_part in zip(off, ksampler(engine, tiny_ltx2), strict=True):
        assert torch.equal(off_part, stock_part)


def saving_drafts_in(engine, monkeypatch, folder):
    """The search nodes keep their drafts in ``folder`` under one setup (outside a server run no prompt keys them),
    as a re-queued server run finds them."""
    saved_drafts = engine.extension.nodes.saved_drafts
    store_type = engine.extension.cachedsearch_core.draft_store.DraftStore
    monkeypatch.setattr(saved_drafts.SavedDrafts, "for_node",
                        classmethod(lambda cls, *_, **__: cls(store_type(folder), SETUP)))
    return store_type(folder)


def search(engine, model, tiny_ltx2, seed=20, num_candidates=2):
    _, positive, negative, latent = tiny_ltx2
    return engine.run("CachedSearchSampler", model=model, positive=positive, negative=negative, latent_image=latent,
                      seed=seed, num_candidates=num_candidates, steps=STEPS, cfg=CFG, sampler_name="euler",
                      scheduler="simple", denoise=1.0)


def assert_parts_equal(latent, expected_parts):
    """``latent`` (a packed LTX-2 latent) holds exactly ``expected_parts``, video and audio, bit for bit."""
    for part, expected in zip(latent.unbind(), expected_parts, strict=True):
        assert part.shape == expected.shape and torch.equal(part, expected)


@ROW
def test_search_and_recommit_equal_the_stock_sampler_for_the_winner(engine, tiny_ltx2, family, monkeypatch,
                                                                      tmp_path):
    """A cached search's drafts are the stock KSampler's on the cached model, video and audio; the Recommit's commit
    is the stock KSampler's on the bare model for the winning seed; a re-queued search reads every draft back, both
    parts, and delivers the same."""
    store = saving_drafts_in(engine, monkeypatch, tmp_path / "drafts")
    cached = apply_cache(engine, tiny_ltx2[0])
    drafts, candidates, _ = search(engine, cached, tiny_ltx2)
    for index, seed in enumerate((20, 21)):
        assert_parts_equal(drafts["samples"][index : index + 1], ksampler(engine, tiny_ltx2, cached, seed=seed))
        assert not candidates.drafts[index].skipped_nothing  # the cache skipped: the commit must sample again
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0.1, 0.9")
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    assert seed == 21
    assert_parts_equal(delivered["samples"], ksampler(engine, tiny_ltx2, seed=21))
    # Each saved draft holds both parts, the packing recorded.
    key = engine.extension.cachedsearch_core.saved_keys.draft_key(SETUP, 21)
    assert store.get(key).latent_parts == 2
    assert_parts_equal(engine.extension.nodes.packed_latent.packed(store.latent(key)),
                       ksampler(engine, tiny_ltx2, cached, seed=21))

    again, requeued, _ = search(engine, cached, tiny_ltx2)
    assert [draft.reused for draft in requeued.drafts] == [True, True]
    for part, before in zip(again["samples"].unbind(), drafts["samples"].unbind(), strict=True):
        assert torch.equal(part, before)
    delivered_again, _, _ = engine.run("CachedSearchRecommit", candidates=requeued, ranking=ranking, mode="commit")
    assert_parts_equal(delivered_again["samples"], delivered["samples"].unbind())


@ROW
def test_a_search_without_cache_delivers_its_winners_draft_as_the_stock_sampler_samples_it(engine, tiny_ltx2,
                                                                                           family):
    """Uncached drafts are the stock KSampler's for each seed, both parts; the commit is free and the same. The
    preview_vae (the checkpoint's video VAE) shows each draft's picture on the panel, as VAE Decode of its video."""
    model, positive, negative, latent = tiny_ltx2
    _, _, vae = engine.run("CheckpointLoaderSimple", ckpt_name=LTX2_CHECKPOINT_FILE)
    watched = engine.output("CachedSearchSampler", model=model, positive=positive, negative=negative,
                            latent_image=latent, seed=30, num_candidates=2, steps=STEPS, cfg=CFG, sampler_name="euler",
                            scheduler="simple", denoise=1.0, preview_vae=vae)
    drafts, candidates, _ = watched.result
    for index, row in enumerate(watched.ui["cachedsearch_drafts"]):
        video = drafts["samples"].unbind()[0][index : index + 1]
        decoded = engine.one("VAEDecode", vae=vae, samples={"samples": video})
        frames = engine.read_panel_frames(row["frames"])
        assert len(frames) == 8 and all((frame == reference).all() for frame, reference
                                        in zip(frames, engine.as_saved(decoded[[0, 1, 2, 3, 5, 6, 7, 8]])))
    stock = [ksampler(engine, tiny_ltx2, seed=seed) for seed in (30, 31)]
    for index, parts in enumerate(stock):
        assert_parts_equal(drafts["samples"][index : index + 1], parts)
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0.9, 0.1")
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    assert seed == 30
    assert_parts_equal(delivered["samples"], stock[0])


@ROW
def test_easycache_in_front_drafts_cached_and_the_commit_is_the_stock_sampler(engine, tiny_ltx2, family):
    """ComfyUI's EasyCache in front of the Sampler and the Sampler (Advanced) on LTX-2: the drafts skip calls, and
    the Recommit (its model unconnected, the cache detached) commits the stock sampler's video and audio."""
    model, positive, negative, latent = tiny_ltx2
    easycache = engine.one("EasyCache", model=model, reuse_threshold=2.0, start_percent=0.0, end_percent=1.0,
                           verbose=False)
    _, candidates, report = search(engine, easycache, tiny_ltx2, seed=40)
    assert "EasyCache (reuse_threshold 2)" in report.splitlines()[0]
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0.1, 0.9")
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    assert seed == 41
    assert_parts_equal(delivered["samples"], ksampler(engine, tiny_ltx2, seed=41))

    sampler = engine.one("KSamplerSelect", sampler_name="euler")
    sigmas = engine.one("BasicScheduler", model=model, scheduler="simple", steps=STEPS, denoise=1.0)
    guider = engine.one("CFGGuider", model=easycache, positive=positive, negative=negative, cfg=CFG)
    _, candidates, _ = engine.run("CachedSearchSamplerAdvanced", guider=guider, sampler=sampler, sigmas=sigmas,
                                  latent_image=latent, seed=40, num_candidates=2)
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    stock_guider = engine.one("CFGGuider", model=model, positive=positive, negative=negative, cfg=CFG)
    stock = engine.run("SamplerCustomAdvanced", noise=engine.one("RandomNoise", noise_seed=41), guider=stock_guider,
                       sampler=sampler, sigmas=sigmas, latent_image=latent)[0]["samples"]
    assert seed == 41
    assert_parts_equal(delivered["samples"], stock.unbind())


@ROW
def test_a_saved_drafts_key_sees_the_audio_of_a_packed_latent(engine, tiny_ltx2, family):
    """The drafts' setup fingerprints what a packed latent holds, so another audio latent never reuses them."""
    fingerprint = engine.extension.cachedsearch_core.saved_keys.fingerprint
    packed = engine.extension.nodes.packed_latent.packed
    video, audio = tiny_ltx2[3]["samples"].unbind()
    assert fingerprint(packed((video, audio))) == fingerprint(packed((video.clone(), audio.clone())))
    assert fingerprint(packed((video, audio))) != fingerprint(packed((video, audio + 1)))


def test_the_checkpoints_audio_vae_decodes_the_sampled_sound(engine, tiny_ltx2):
    """The tiny checkpoint holds LTX-2's audio VAE as the official one does: LTXVAudioVAELoader reads it, and
    LTXVAudioVAEDecode turns the audio part of a sampled latent into 16 kHz stereo."""
    _, audio_part = ksampler(engine, tiny_ltx2)
    audio_vae = engine.one("LTXVAudioVAELoader", ckpt_name=LTX2_CHECKPOINT_FILE)
    sound = engine.one("LTXVAudioVAEDecode", samples={"samples": audio_part, "type": "audio"}, audio_vae=audio_vae)
    assert sound["sample_rate"] == 16000
    waveform = sound["waveform"]
    assert waveform.shape[:2] == (1, 2) and waveform.shape[2] > 0 and torch.isfinite(waveform).all()


def test_the_checkpoint_loads_as_the_templates_load_it_and_its_video_vae_decodes_the_picture(engine, tiny_ltx2):
    """CheckpointLoaderSimple on the tiny official checkpoint: the same LTX-2 transformer (the same sampling) and
    LTX-2's video VAE, which decodes the video part of a sampled latent into frames."""
    model, clip, vae = engine.run("CheckpointLoaderSimple", ckpt_name=LTX2_CHECKPOINT_FILE)
    assert clip is None  # the templates load the Gemma text encoder beside it
    for from_checkpoint, from_unet_loader in zip(ksampler(engine, tiny_ltx2, model), ksampler(engine, tiny_ltx2),
                                                 strict=True):
        assert torch.equal(from_checkpoint, from_unet_loader)
    video_part, _ = ksampler(engine, tiny_ltx2)
    frames = engine.one("VAEDecode", samples={"samples": video_part}, vae=vae)
    assert tuple(frames.shape) == (9, 64, 64, 3) and torch.isfinite(frames).all()


def test_the_distilled_lora_patches_every_layer_it_names_at_the_templates_strength(engine, tiny_ltx2):
    """The tiny distilled LoRA has the official file's key names (``diffusion_model.<layer>.lora_A/B``, video, audio
    and cross-modal layers): LoraLoaderModelOnly finds a weight for every layer, and the LoRA changes the sampling."""
    from safetensors import safe_open

    import folder_paths
    from scripts.ltx_workflow import DISTILLED_LORA_STRENGTH

    path = folder_paths.get_full_path("loras", LTX2_DISTILLED_LORA_FILE)
    with safe_open(path, "pt") as lora:
        layers = {key.removeprefix("diffusion_model.").removesuffix(".lora_A.weight") + ".weight"
                  for key in lora.keys() if key.endswith(".lora_A.weight")}
    assert any("audio_attn1" in layer for layer in layers) and any("video_to_audio" in layer for layer in layers)
    patched = engine.one("LoraLoaderModelOnly", model=tiny_ltx2[0], lora_name=LTX2_DISTILLED_LORA_FILE,
                         strength_model=DISTILLED_LORA_STRENGTH)
    assert {key.removeprefix("diffusion_model.") for key in patched.patches} == layers
    with_lora, without = ksampler(engine, tiny_ltx2, patched), ksampler(engine, tiny_ltx2)
    assert all(torch.isfinite(part).all() for part in with_lora)
    assert not any(torch.equal(a, b) for a, b in zip(with_lora, without, strict=True))


def test_a_call_skips_only_when_video_and_audio_both_may(engine, tiny_ltx2):
    """The audio alone drifting past tau makes the whole call compute, though the video barely moved."""
    import comfy.patcher_extension

    calls = []

    def audio_jolt(executor, x, *args, **kwargs):
        # From step 4 on, the audio input the cache sees flips sign every call: a relative drift of 2 each.
        video, audio = x
        calls.append(1)
        return executor([video, -audio if len(calls) > 4 and len(calls) % 2 else audio], *args, **kwargs)

    statistics = []
    cached = apply_cache(engine, tiny_ltx2[0])
    jolted = cached.clone()
    # Added after the cache's wrapper: runs outside it, so the cache sees the jolted audio.
    jolted.model_options["transformer_options"].setdefault("wrappers", {}).setdefault(
        comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, {})["test_audio_jolt"] = [audio_jolt]
    ksampler(engine, tiny_ltx2, observed(engine, jolted, statistics))
    plain = []
    ksampler(engine, tiny_ltx2, observed(engine, cached.clone(), plain))
    assert any(step >= 4 for step in plain[0].steps_skipped)  # without the jolt the video and audio skip there
    # Steps 4 and 5 (before cooldown) could skip on the video, not on the audio.
    assert sorted(statistics[0].steps_skipped) == sorted(step for step in plain[0].steps_skipped if step < 4)


def sound_and_picture(engine, latent, vae, audio_vae):
    """An LTX-2 latent as the official graph delivers it: LTXVSeparateAVLatent, then the video part through VAE
    Decode and the audio part through the audio VAE's decode."""
    video, audio = engine.run("LTXVSeparateAVLatent", av_latent=latent)
    return engine.one("VAEDecode", samples=video, vae=vae), engine.one("LTXVAudioVAEDecode", samples=audio,
                                                                         audio_vae=audio_vae)


def test_the_verifier_judges_the_pictures_and_the_delivered_result_keeps_its_sound(engine, tiny_ltx2):
    """The search in the official graph's shape (Sampler (Advanced) on a cached model): the Verifier ranks the
    drafts' decoded video and its panel says the sound is not judged; the Recommit's packed latent, separated and
    decoded, is the stock SamplerCustomAdvanced pipeline's picture and sound for the winning seed, bit for bit."""
    model, positive, negative, latent = tiny_ltx2
    _, _, vae = engine.run("CheckpointLoaderSimple", ckpt_name=LTX2_CHECKPOINT_FILE)
    audio_vae = engine.one("LTXVAudioVAELoader", ckpt_name=LTX2_CHECKPOINT_FILE)
    sampler = engine.one("KSamplerSelect", sampler_name="euler")
    sigmas = engine.one("BasicScheduler", model=model, scheduler="simple", steps=STEPS, denoise=1.0)
    guider = engine.one("CFGGuider", model=apply_cache(engine, model), positive=positive, negative=negative, cfg=CFG)
    drafts, candidates, _ = engine.run("CachedSearchSamplerAdvanced", guider=guider, sampler=sampler, sigmas=sigmas,
                                       latent_image=latent, seed=50, num_candidates=2)
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    images = engine.one("VAEDecode", samples=engine.run("LTXVSeparateAVLatent", av_latent=drafts)[0], vae=vae)
    verifier = engine.one("CachedSearchLoadClipVerifier", model_folder="tiny-clip", dtype="fp32")
    verified = engine.output("CachedSearchVerifier", images=images, candidates=candidates, prompt="a drum",
                             verifier=verifier, frames_per_candidate=4)
    assert verified.ui["cachedsearch_verifier"][0]["sound_not_judged"] is True
    ranking = verified.result[0]
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    assert seed == 50 + ranking.winner
    picture, sound = sound_and_picture(engine, delivered, vae, audio_vae)

    stock_guider = engine.one("CFGGuider", model=model, positive=positive, negative=negative, cfg=CFG)
    stock = engine.run("SamplerCustomAdvanced", noise=engine.one("RandomNoise", noise_seed=seed), guider=stock_guider,
                       sampler=sampler, sigmas=sigmas, latent_image=latent)[0]
    stock_picture, stock_sound = sound_and_picture(engine, stock, vae, audio_vae)
    assert picture.shape == (9, 64, 64, 3) and torch.equal(picture, stock_picture)
    assert sound["sample_rate"] == stock_sound["sample_rate"]
    assert sound["waveform"].shape[1] == 2 and torch.equal(sound["waveform"], stock_sound["waveform"])
