"""LTX-2.3's two-stage text-to-video pipeline as the official template runs it (``templates/video_ltx2_3_t2v.json`` of
the workflow templates ComfyUI 0.33.0 installs), with the search on the first stage only (#50 item 3): the
Sampler (Advanced) drafts the first stage (8 sigmas, CFG 1), the Verifier ranks the drafts' pictures, and only the
Recommit's output goes through the latent upsampler and the refine pass (LTXVCropGuides, 3 sigmas from 0.85, its
own fixed noise seed), whose picture and sound equal the stock pipeline's run for the winning seed, bit for bit.
Tiny stand-ins: the tiny LTX-2 transformer without the distilled LoRA, synthetic conditioning for Gemma, the tiny
spatial upscaler (scripts/tiny_ltx2.py); T2V's bypassed image-to-video nodes left out. ComfyUI 0.3.75 has no
LTX-2: the tiny_ltx2 fixture skips there."""

from __future__ import annotations

import json

import pytest
import torch
from report_text import line_of, numbers
from test_browser import ARTIFACTS
from test_ltx2 import apply_cache, observed, sound_and_picture

from scripts.tiny_ltx2 import LTX2_CHECKPOINT_FILE, LTX2_UPSAMPLER_FILE
from scripts.comfy_runtime import REPO_ROOT
# The official template's sigmas: the distilled first stage, then the refine pass after the x2 upsampling.
from scripts.ltx_workflow import FIRST_STAGE_SIGMAS, REFINE_SIGMAS

pytestmark = pytest.mark.slow  # in process, a minute of sampling and decoding

REFINE_NOISE_SEED = 42  # the template's second RandomNoise, fixed
CFG = 1.0
CANDIDATES = 3
SEED = 60


def refined(engine, stage_one: dict, loaded: dict, refine_calls: list) -> tuple:
    """The template's second stage on a first-stage latent: the video part upsampled x2 and packed again with the
    first stage's audio, refined over REFINE_SIGMAS with the guides cropped, then separated and decoded."""
    video, audio = engine.run("LTXVSeparateAVLatent", av_latent=stage_one)
    upsampled = engine.one("LTXVLatentUpsampler", samples=video, upscale_model=loaded["upscaler"], vae=loaded["vae"])
    positive, negative, _ = engine.run("LTXVCropGuides", positive=loaded["positive"], negative=loaded["negative"],
                                       latent=video)
    # The refine pass on a model that counts its transformer calls (Apply Cache off: bit-identical to none).
    model = observed(engine, apply_cache(engine, loaded["model"], mode="off"), refine_calls)
    guider = engine.one("CFGGuider", model=model, positive=positive, negative=negative, cfg=CFG)
    latent = engine.one("LTXVConcatAVLatent", video_latent=upsampled, audio_latent=audio)
    output = engine.run("SamplerCustomAdvanced", noise=engine.one("RandomNoise", noise_seed=REFINE_NOISE_SEED),
                        guider=guider, sampler=loaded["sampler"], sigmas=engine.one("ManualSigmas",
                                                                                    sigmas=REFINE_SIGMAS),
                        latent_image=latent)[0]
    return sound_and_picture(engine, output, loaded["vae"], loaded["audio_vae"])


@pytest.fixture(scope="module")
def loaded(engine, tiny_ltx2) -> dict:
    model, positive, negative, latent = tiny_ltx2
    _, _, vae = engine.run("CheckpointLoaderSimple", ckpt_name=LTX2_CHECKPOINT_FILE)
    return {"model": model, "positive": positive, "negative": negative, "latent": latent, "vae": vae,
            "audio_vae": engine.one("LTXVAudioVAELoader", ckpt_name=LTX2_CHECKPOINT_FILE),
            "upscaler": engine.one("LatentUpscaleModelLoader", model_name=LTX2_UPSAMPLER_FILE),
            "sampler": engine.one("KSamplerSelect", sampler_name="euler"),
            "sigmas": engine.one("ManualSigmas", sigmas=FIRST_STAGE_SIGMAS)}


def test_only_the_winner_is_upsampled_and_refined_and_it_is_the_stock_pipelines_video_and_sound(engine, loaded):
    cached = apply_cache(engine, loaded["model"], warmup_steps=2, cooldown_steps=2)
    guider = engine.one("CFGGuider", model=cached, positive=loaded["positive"], negative=loaded["negative"], cfg=CFG)
    drafts, candidates, _ = engine.run("CachedSearchSamplerAdvanced", guider=guider, sampler=loaded["sampler"],
                                       sigmas=loaded["sigmas"], latent_image=loaded["latent"], seed=SEED,
                                       num_candidates=CANDIDATES)
    assert [draft.calls for draft in candidates.drafts] == [8] * CANDIDATES  # CFG 1: one call a sigma step
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    images = engine.one("VAEDecode", samples=engine.run("LTXVSeparateAVLatent", av_latent=drafts)[0],
                        vae=loaded["vae"])
    verifier = engine.one("CachedSearchLoadClipVerifier", model_folder="tiny-clip", dtype="fp32")
    ranking, _ = engine.run("CachedSearchVerifier", images=images, candidates=candidates, prompt="a drum",
                            verifier=verifier, frames_per_candidate=4)
    delivered, seed, report, delivery = recommit_in(workflow_15(), engine, candidates, ranking)
    assert seed == SEED + ranking.winner
    refine_calls = []
    picture, sound = refined(engine, delivered, loaded, refine_calls)
    (refine_run,) = refine_calls
    assert refine_run.calls_computed == 3  # the upsampler and the refine pass ran once, for the winner

    stock_guider = engine.one("CFGGuider", model=loaded["model"], positive=loaded["positive"],
                              negative=loaded["negative"], cfg=CFG)
    stock_stage_one = engine.run("SamplerCustomAdvanced", noise=engine.one("RandomNoise", noise_seed=seed),
                                 guider=stock_guider, sampler=loaded["sampler"], sigmas=loaded["sigmas"],
                                 latent_image=loaded["latent"])[0]
    stock_picture, stock_sound = refined(engine, stock_stage_one, loaded, [])
    assert picture.shape == (9, 128, 128, 3) and torch.equal(picture, stock_picture)
    assert torch.equal(sound["waveform"], stock_sound["waveform"])
    assert sound["sample_rate"] == stock_sound["sample_rate"]

    # What the search cost in the stages' transformer calls, against the whole pipeline run for every seed: the
    # Recommit plans the second stage from workflow 15's graph, and that is what the refine pass computed.
    first_stage = candidates.drafts[ranking.winner].calls
    search = {"drafts": sum(draft.calls_computed for draft in candidates.drafts), "commit": first_stage,
              "refine": refine_run.calls_computed}
    full = {"first stages": CANDIDATES * first_stage, "refines": CANDIDATES * refine_run.calls_computed}
    cost = delivery["cost"]
    assert cost["second_stage_calls"] == search["refine"]
    assert (cost["pipeline_calls"], cost["full_pipeline_calls"]) == (sum(search.values()), sum(full.values()))
    assert cost["pipeline_ratio"] == sum(search.values()) / sum(full.values())
    second_stage = numbers(line_of(report, "second stage"))
    assert second_stage[:6] == [search["refine"], sum(search.values()), sum(full.values()), CANDIDATES, first_stage,
                                search["refine"]]  # the whole pipeline's calls as N x (first stage + second stage)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "ltx2_two_stage_calls.json").write_text(json.dumps({"candidates": CANDIDATES, "search": search,
                                                                    "full_pipeline_runs": full}))


def workflow_15() -> dict:
    """The API prompt of the shipped workflow, as the frontend queues it."""
    return json.loads((REPO_ROOT / "workflows" / "api" / "15 LTX-2.3 search + upscale.json").read_text())


def recommit_in(prompt: dict, engine, candidates, ranking) -> tuple:
    """The Recommit run as the server runs it inside ``prompt`` (its hidden inputs: the prompt and its own id):
    the delivered latent, seed, report and the panel's delivery payload."""
    from comfy_api.latest import io

    (key,) = [key for key, node in prompt.items() if node["class_type"] == "CachedSearchRecommit"]
    hidden = {"hidden_inputs": {io.Hidden.prompt: prompt, io.Hidden.unique_id: key}}
    with torch.inference_mode():
        output = engine.nodes["CachedSearchRecommit"].PREPARE_CLASS_CLONE(hidden).execute(
            candidates=candidates, ranking=ranking, mode="commit")
    (delivery,) = output.ui["cachedsearch_delivery"]
    return (*output.result, delivery)


def test_the_second_stage_is_what_the_recommits_latent_feeds(engine):
    """Workflow 15's second stage is its refine pass (3 sigma steps of euler); a stock KSampler given the Recommit's
    seed (to reproduce a draft) is a pipeline of its own and not counted; a refine whose sampler evaluates the model
    twice a step leaves the second stage uncounted rather than miscounted."""
    if "ManualSigmas" not in engine.nodes:
        pytest.skip("this ComfyUI has no ManualSigmas (LTX-2.3's templates came with 0.33)")
    second_stage_calls = engine.extension.nodes.second_stage.second_stage_calls
    prompt = workflow_15()
    (recommit,) = [key for key, node in prompt.items() if node["class_type"] == "CachedSearchRecommit"]
    assert second_stage_calls(prompt, recommit) == len(REFINE_SIGMAS.split(",")) - 1
    by_seed = {"class_type": "KSampler", "inputs": {"seed": [recommit, 1], "steps": 20, "sampler_name": "euler"}}
    assert second_stage_calls(prompt | {"reproduce": by_seed}, recommit) == len(REFINE_SIGMAS.split(",")) - 1
    heun = {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "heun"}}
    refine = next(key for key, node in prompt.items() if node["class_type"] == "SamplerCustomAdvanced")
    prompt[refine]["inputs"]["sampler"] = ["heun", 0]
    assert second_stage_calls(prompt | {"heun": heun}, recommit) is None
