"""CachedSearch Calibrate on the real runtime: in process on the trained ball-and-spot model (its table is
bench/audit.py's, its cost exact), on tiny Wan 2.2 A14B's two experts (exact cost, a tau per expert) and with a
combined verifier (Combine Verifiers: the table is the combined scores'), and over HTTP on tiny Wan with the tiny
ImageReward (the tau output feeds Apply Cache, Cancel mid-calibration leaves the next run clean, the result is
remembered for Apply Cache)."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from bench.audit import cache_window
from bench.train_tiny_wan import DEFAULT_OUT as WORLD_MODEL
from bench.train_tiny_wan import TRAINING_SHIFT
from report_text import line_of, numbers, refusal
from scripts import ball_spot_world, comfy_runtime
from scripts.graphs import cached_wan_sampling, calibrate_wan

pytestmark = pytest.mark.slow  # in process, but several seconds a test: not in the fast tier

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
WORLD_PROMPT = 0  # ball_spot_world.PROMPTS[0], the prompt bench/audit.py --calibration 0 runs
WORLD_RUN = {"seeds": 3, "steps": 8, "taus": (0.1, 0.3, 0.8), "cfg": 4.0, "target": 0.9}
# Fields of a row that do not depend on wall time.
MEASURED = ("tau", "skipped", "call_speedup", "calls", "computed_calls", "rho", "top1", "capture", "regret",
            "meets_target", "recommended")


def demo_node(name):
    from scripts import demo_nodes

    return demo_nodes.NODE_CLASS_MAPPINGS[name]


def world_inputs(engine):
    """The calibration inputs on the trained world model, with the demo pack's frames and verifier model."""
    import folder_paths

    from scripts.comfy_runtime import run_node

    link = pathlib.Path(folder_paths.get_folder_paths("diffusion_models")[0]) / WORLD_MODEL.name
    if not link.exists():
        os.symlink(WORLD_MODEL, link)
    model = engine.one("ModelSamplingSD3", model=engine.one("UNETLoader", unet_name=WORLD_MODEL.name,
                                                             weight_dtype="default"), shift=TRAINING_SHIFT)
    prompt = ball_spot_world.PROMPTS[WORLD_PROMPT]
    names = {"ball": ball_spot_world.COLOUR_NAMES[prompt[0]], "spot": ball_spot_world.COLOUR_NAMES[prompt[1]],
             "motion": ball_spot_world.MOTION_NAMES[prompt[2]]}
    positive, negative, text = run_node(demo_node("CachedSearchDemoBallAndSpotPrompt"), **names)
    (frames,) = run_node(demo_node("CachedSearchDemoBallAndSpotFrames"))
    (verifier,) = run_node(demo_node("CachedSearchDemoBallAndSpotVerifierModel"))
    latent = engine.one("EmptyHunyuanLatentVideo", width=8 * ball_spot_world.SIZE, height=8 * ball_spot_world.SIZE,
                        length=4 * ball_spot_world.FRAMES - 3, batch_size=1)
    window = cache_window(WORLD_RUN["steps"])
    return dict(model=model, positive=positive, negative=negative, latent_image=latent, vae=frames,
                verifier=verifier, prompt=text, first_seed=0, seeds=WORLD_RUN["seeds"], steps=WORLD_RUN["steps"],
                cfg=WORLD_RUN["cfg"], sampler_name="euler", scheduler="simple", denoise=1.0,
                taus=" ".join(map(str, WORLD_RUN["taus"])), capture_target=WORLD_RUN["target"],
                warmup_steps=window, cooldown_steps=window, frames_per_candidate=8)


@pytest.fixture(scope="module")
def world_calibration(engine):
    """One calibration on the world, counting the transformer computations it makes: (outputs, ui, computed)."""
    inputs = world_inputs(engine)
    network = inputs["model"].model.diffusion_model
    computed = []
    # The patch embedding runs once per computed transformer call; a call the cache skips never reaches it.
    handle = network.patch_embedding.register_forward_pre_hook(lambda *_: computed.append(1))
    try:
        node = engine.nodes["CachedSearchCalibrate"]
        with torch.inference_mode():
            output = node.PREPARE_CLASS_CLONE({}).execute(**inputs)
    finally:
        handle.remove()
    return output.result, output.ui, len(computed)


def test_the_table_is_bench_audits_and_so_is_the_recommendation(world_calibration, tmp_path):
    (tau, report, _, easycache, lazycache), ui, _ = world_calibration
    (shown,) = ui["cachedsearch_calibration"]
    audit = subprocess.run(
        [sys.executable, "-m", "bench.audit", "--calibration", str(WORLD_PROMPT), "--seeds", str(WORLD_RUN["seeds"]),
         "--steps", str(WORLD_RUN["steps"]), "--cfg", str(WORLD_RUN["cfg"]), "--target", str(WORLD_RUN["target"]),
         "--taus", *map(str, WORLD_RUN["taus"]), "--threads", str(torch.get_num_threads()), "--out", str(tmp_path)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-3000:]
    audited = json.loads((tmp_path / "calibration.json").read_text())
    assert [{key: row[key] for key in MEASURED} for row in shown["rows"]] == \
        [{key: row[key] for key in MEASURED} for row in audited["rows"]]
    assert tau == shown["recommended_tau"] == audited["recommended_tau"]
    # the world separates the taus: some calls are skipped and the table is not all perfect agreement
    assert all(row["computed_calls"] < row["calls"] for row in shown["rows"])
    assert f"Recommended tau: {tau:g}" in report
    assert easycache == lazycache == 0.0 and "engine_rows" not in shown  # ComfyUI's caches were not measured


def test_the_calibration_costs_exactly_its_rollouts(world_calibration):
    _, ui, computed = world_calibration
    (shown,) = ui["cachedsearch_calibration"]
    seeds, steps = WORLD_RUN["seeds"], WORLD_RUN["steps"]
    cached = sum(row["computed_calls"] for row in shown["rows"])
    assert computed == seeds * steps + cached  # euler at cfg 4: one batched cond/uncond call per step
    assert cached < len(shown["rows"]) * seeds * steps


def test_the_chart_is_drawn_at_its_size(world_calibration):
    (_, _, chart, _, _), _, _ = world_calibration
    assert tuple(chart.shape) == (1, 400, 640, 3) and chart.dtype == torch.float32
    pixels = chart[0].numpy()
    assert pixels.std() > 0.05 and (pixels < 0.95).any(axis=2).mean() > 0.01


@pytest.mark.parametrize("change, message", [
    ({"taus": ""}, "taus: the list is empty"),
    ({"taus": "0.2 0.1"}, 'taus: got "0.2 0.1", which is not strictly increasing'),
    ({"taus": "0.1 3"}, "taus: 3.0 in \"0.1 3\" is outside Apply Cache's range 0 to 2"),
    ({"seeds": 1}, "seeds: got 1; a ranking needs at least 2 seeds"),
    ({"capture_target": 0.0}, refusal("capture_target", 0.0, 0, 1)),
    # the shipped defaults on a short graph: every tau would compute every call (5 and 5 of 8 steps)
    ({"steps": 8, "warmup_steps": 5, "cooldown_steps": 5}, refusal("warmup_steps, cooldown_steps", 5, 5, 8)),
])
def test_bad_inputs_are_refused_before_anything_runs(engine, change, message):
    node = engine.nodes["CachedSearchCalibrate"]
    values = {"taus": "0.05 0.10", "seeds": 4, "first_seed": 0, "capture_target": 0.9, **change}
    assert re.search(message, node.validate_inputs(**values))


def test_an_experts_window_that_leaves_nothing_to_skip_is_refused_before_anything_runs(engine):
    node = engine.nodes["CachedSearchCalibrateExperts"]
    values = {"taus_high": "0.1", "taus_low": "0.1", "seeds": 2, "first_seed": 0, "capture_target": 0.9, "steps": 8,
              "split_step": 4, "warmup_steps_high": 2, "cooldown_steps_high": 1, "warmup_steps_low": 2,
              "cooldown_steps_low": 2}
    refused = node.validate_inputs(**values)  # the low expert's inputs, their values and its 4 steps
    assert re.match(refusal("warmup_steps_low, cooldown_steps_low", 2, 2, 4), refused)
    assert node.validate_inputs(**{**values, "cooldown_steps_low": 1}) is True


def test_a_verifier_that_cannot_read_the_vaes_frames_is_named_before_any_rollout(engine):
    from scripts.tiny_models import WAN21_VAE_FILE

    inputs = world_inputs(engine)
    calls = []
    handle = inputs["model"].model.diffusion_model.register_forward_pre_hook(lambda *_: calls.append(1))
    inputs["vae"] = engine.one("VAELoader", vae_name=WAN21_VAE_FILE)  # RGB frames, not the world's latent frames
    try:
        with pytest.raises(ValueError, match="verifier: ball-and-spot adherence could not score the frames this vae "
                           "decodes .*reads whole world clips"):
            engine.run("CachedSearchCalibrate", **inputs)
    finally:
        handle.remove()
    assert calls == []


def tiny_a14b_experts(engine):
    """The tiny Wan 2.2 A14B T2V experts (shift 5), their prompts and a small empty video latent."""
    from scripts.tiny_models import WAN22_A14B_FILES

    high, low = (engine.one("ModelSamplingSD3", model=engine.one("UNETLoader", unet_name=name, weight_dtype="default"),
                            shift=5.0) for name in WAN22_A14B_FILES["t2v"])
    positive = engine.one("CachedSearchTestConditioning", text_seed=11, tokens=8, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=12, tokens=8, pooled=False)
    latent = engine.one("EmptyHunyuanLatentVideo", width=32, height=32, length=5, batch_size=1)
    return high, low, positive, negative, latent


def tiny_verifiers(engine):
    return (engine.one("CachedSearchLoadImageReward", ckpt_name="ImageReward.pt", dtype="fp32"),
            engine.one("CachedSearchLoadClipVerifier", model_folder="tiny-clip", dtype="fp32"))


EXPERTS_RUN = {"seeds": 2, "steps": 8, "split_step": 4}


def test_two_experts_cost_exactly_their_rollouts_and_each_gets_its_tau(engine):
    """A tau so small it skips nothing keeps the full ranking, so both experts pick a tau and the picks are also
    measured together: transformer calls = S x T full + every cached rollout's computed calls."""
    from scripts.tiny_models import WAN21_VAE_FILE

    high, low, positive, negative, latent = tiny_a14b_experts(engine)
    computed = []
    handles = [model.model.diffusion_model.patch_embedding.register_forward_pre_hook(lambda *_: computed.append(1))
               for model in (high, low)]
    try:
        output = engine.output(
            "CachedSearchCalibrateExperts", model_high=high, model_low=low, positive=positive, negative=negative,
            latent_image=latent, vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE),
            verifier=tiny_verifiers(engine)[0], prompt="a red ball", first_seed=3, cfg=3.5, sampler_name="euler",
            scheduler="simple", taus_high="0.0001 2", taus_low="0.0001 2", capture_target=0.9,
            warmup_steps_high=1, cooldown_steps_high=1, warmup_steps_low=1, cooldown_steps_low=1,
            frames_per_candidate=4, **EXPERTS_RUN)
    finally:
        for handle in handles:
            handle.remove()
    tau_high, tau_low, report, chart = output.result
    (shown,) = output.ui["cachedsearch_calibration"]
    rows = shown["rows"]
    assert [(row["expert"], row["tau"]) for row in rows[:4]] == [
        ("high-noise", 0.0001), ("high-noise", 2.0), ("low-noise", 0.0001), ("low-noise", 2.0)]
    assert rows[0]["computed_calls"] == rows[2]["computed_calls"] == 2 * 8  # nothing skipped: the full ranking
    assert rows[1]["computed_calls"] < 2 * 8 and rows[3]["computed_calls"] < 2 * 8  # tau 2 skips in that expert
    assert shown["recommended_tau"] == {"high-noise": tau_high, "low-noise": tau_low} and tau_high and tau_low
    assert rows[4]["expert"] == "both" and rows[4]["tau"] == f"{tau_high:g} + {tau_low:g}"
    seeds, steps = EXPERTS_RUN["seeds"], EXPERTS_RUN["steps"]
    assert len(computed) == seeds * steps + sum(row["computed_calls"] for row in rows)
    # 2 full + 2 cached x (2 high-noise taus + 2 low-noise taus) + 2 with both picks = 12 rollouts at most
    cost = line_of(report, "cost:")
    assert numbers(cost)[:6] == [2, 2, 2, 2, 2, 12] and "at most" in cost
    assert tuple(chart.shape) == (1, 800, 640, 3) and chart[0].numpy().std() > 0.05


class RecordingVerifier:
    """A real verifier whose every candidate score (the mean the Verifier node takes) is recorded, and the prompt it
    was scored against."""

    def __init__(self, verifier):
        self.inner, self.name, self.scores, self.prompts = verifier, verifier.name, [], []

    def score(self, prompt, frames):
        values = self.inner.score(prompt, frames)
        self.scores.append(values.mean().item())
        self.prompts.append(prompt)
        return values


# The audit's first prompts (bench/audit.py draws prompt 7 i of the world).
AUDIT_PROMPTS = (0, 7, 14)


def world_prompts_inputs(engine, prompts, seeds, taus):
    """World calibration inputs on several prompts: their texts one per line, encoded by the world's text encoder."""
    from scripts.comfy_runtime import run_node

    inputs = world_inputs(engine)
    del inputs["positive"]
    (clip,) = run_node(demo_node("CachedSearchDemoBallAndSpotTextEncoder"))
    texts = [ball_spot_world.prompt_text(ball_spot_world.PROMPTS[index]) for index in prompts]
    return {**inputs, "clip": clip, "prompt": "\n".join(texts), "seeds": seeds, "taus": " ".join(map(str, taus))}


def test_several_prompts_pool_as_the_audit_pools_them(engine):
    """Three world prompts typed one per line: each rollout is scored against its own prompt, and the table is the
    audit's (``evaluate_arms`` over prompts, prompt bootstrap) of the very scores the verifier gave."""
    from cachedsearch_core.audit import FULL_ARM, ScoreStore, evaluate_arms, recommend_tau, tau_arm
    from cachedsearch_core.fidelity import PROMPT_BOOTSTRAP
    from scripts.comfy_runtime import run_node

    seeds, taus = 2, (0.3, 0.8)
    inputs = world_prompts_inputs(engine, AUDIT_PROMPTS, seeds, taus)
    recording = RecordingVerifier(run_node(demo_node("CachedSearchDemoBallAndSpotVerifierModel"))[0])
    output = engine.output("CachedSearchCalibrate", **{**inputs, "verifier": recording})
    texts = inputs["prompt"].splitlines()
    # the input latent once against the first prompt, then arm by arm, prompt by prompt, seed by seed
    arms = [FULL_ARM, *map(tau_arm, taus)]
    assert recording.prompts == [texts[0]] + [text for _ in arms for text in texts for _ in range(seeds)]
    (shown,) = output.ui["cachedsearch_calibration"]
    # the rollouts' skipped shares as the run measured them (the recommendation depends on them), in thousandths
    skipped = [0.0, *(row["skipped"] for row in shown["rows"])]
    store = ScoreStore(None)
    scores = iter(recording.scores[1:])
    for index, arm in enumerate(arms):
        for prompt in range(len(texts)):
            for seed in range(seeds):
                store.add(arm, prompt, seed, next(scores), seconds=1.0, calls=1000,
                          skipped=round(1000 * skipped[index]))
    audited = evaluate_arms(store, dict(zip(arms[1:], taus)), range(len(texts)), range(seeds))
    assert shown["prompts"] == 3 and shown["intervals"]
    for row, result in zip(shown["rows"], audited, strict=True):
        assert result.fidelity.resampled == PROMPT_BOOTSTRAP
        for name, interval in (("rho", result.fidelity.rho), ("top1", result.fidelity.top1),
                               ("capture", result.fidelity.capture_of_means), ("regret", result.fidelity.regret)):
            assert row[name] == pytest.approx([interval.value, interval.low, interval.high], nan_ok=True), name
    assert shown["recommended_tau"] == (recommend_tau(audited, WORLD_RUN["target"]) or 0.0)
    report = output.result[1]
    assert numbers(line_of(report, "Each figure rests on"))[:2] == [3, 2]  # 3 prompts x 2 seeds
    assert numbers(line_of(report, "Intervals:"))[:2] == [95, 3]  # a 95 % bootstrap over the 3 prompts
    assert numbers(line_of(report, "cost:"))[:5] == [3, 2, 2, 2, 18]  # 3 prompts x (2 full + 2 x 2 taus) = 18


def test_a_combined_verifier_drives_the_calibration_as_combine_scores_ranks(engine):
    """Calibrate with ImageReward x 1 and CLIP x 2 (z-score): its table is the one of each arm's rollouts scored by
    both and combined across the arm's seeds, as Combine Scores combines a search's drafts."""
    from cachedsearch_core.audit import FULL_ARM, ScoreStore, tau_arm
    from cachedsearch_core.calibration import CalibrationPlan
    from cachedsearch_core.calibration_results import Calibration
    from scripts.tiny_models import WAN21_VAE_FILE

    model, positive, negative, latent = engine.tiny_wan_t2v()
    recording = [RecordingVerifier(verifier) for verifier in tiny_verifiers(engine)]
    combined = engine.one("CachedSearchCombineVerifiers", verifier_1=recording[0], weight_1=1.0,
                          verifier_2=recording[1], weight_2=2.0, normalisation="z-score")
    seeds, taus = 3, (0.0001, 2.0)
    output = engine.output(
        "CachedSearchCalibrate", model=model, positive=positive, negative=negative, latent_image=latent,
        vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE), verifier=combined, prompt="a red ball", first_seed=0,
        seeds=seeds, steps=4, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0,
        taus=" ".join(map(str, taus)), capture_target=0.9, warmup_steps=1, cooldown_steps=1, frames_per_candidate=4)
    report = output.result[1]
    assert report.splitlines()[0].endswith(combined.name)  # the header names the combination it ranked by
    # each verifier scored the input latent once (the check before any rollout), then every rollout in order
    assert [len(verifier.scores) for verifier in recording] == [1 + seeds * (1 + len(taus))] * 2
    plan = CalibrationPlan(taus, seeds, 0, 0.9)
    (shown,) = output.ui["cachedsearch_calibration"]
    # the rollouts' skipped shares as the run measured them (the recommendation depends on them), in thousandths
    skipped = [0.0, *(row["skipped"] for row in shown["rows"])]
    store = ScoreStore(None)
    for index, arm in enumerate([FULL_ARM, *map(tau_arm, taus)]):
        rollouts = slice(1 + index * seeds, 1 + (index + 1) * seeds)
        scores = combined.combine(list(zip(*(verifier.scores[rollouts] for verifier in recording))))
        for seed, score in zip(plan.seed_list, scores):
            store.add(arm, 0, seed, score, seconds=1.0, calls=1000, skipped=round(1000 * skipped[index]))
    expected = Calibration.from_store(store, plan).rows()
    fidelity = ("tau", "rho", "top1", "capture", "regret", "meets_target", "recommended")
    assert [{key: row[key] for key in fidelity} for row in shown["rows"]] == \
        [{key: row[key] for key in fidelity} for row in expected]
    # z-scores: each arm's combined scores are centred, unlike the raw scores
    assert abs(sum(combined.combine(list(zip(recording[0].scores[1:4], recording[1].scores[1:4]))))) < 1e-9


def test_a_videoscore_verifier_drives_the_calibration(engine):
    """VideoScore scored as the VideoScore Verifier node scores (its clip, the aspects' average): a tau that skips
    nothing reproduces the full videos, so their ranking is kept exactly (capture 1 needs scores that differ)."""
    from scripts.tiny_models import WAN21_VAE_FILE

    model, positive, negative, latent = engine.tiny_wan_t2v()
    verifier = engine.one("CachedSearchLoadVideoScore", model_folder="VideoScore-v1.1", dtype="default")
    output = engine.output(
        "CachedSearchCalibrate", model=model, positive=positive, negative=negative, latent_image=latent,
        vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE), verifier=verifier, prompt="a red ball", first_seed=0,
        seeds=3, steps=4, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0, taus="0.0001",
        capture_target=0.9, warmup_steps=1, cooldown_steps=1, frames_per_candidate=4)
    report = output.result[1]
    (row,) = output.ui["cachedsearch_calibration"][0]["rows"]
    assert "verifier VideoScore-v1.1" in report
    # a tau that skips nothing keeps the ranking but saves nothing: not recommended
    assert row["skipped"] == 0 and row["top1"][0] == 1.0 and row["capture"][0] == 1.0 and not row["recommended"]


def test_a_videoscore_verifier_ranked_by_one_aspect_scores_as_the_videoscore_verifier(engine, monkeypatch):
    """Calibrate's full-arm scores with rank_by one aspect are the VideoScore Verifier's scores, set the same way,
    of the same seeds' full rollouts (a search on the plain model, whose drafts are full rollouts)."""
    from cachedsearch_core.audit import FULL_ARM
    from scripts.tiny_models import WAN21_VAE_FILE

    ScoreStore = engine.extension.cachedsearch_core.audit.ScoreStore  # the loaded extension's, which Calibrate uses
    model, positive, negative, latent = engine.tiny_wan_t2v()
    vae = engine.one("VAELoader", vae_name=WAN21_VAE_FILE)
    verifier = engine.one("CachedSearchLoadVideoScore", model_folder="VideoScore-v1.1", dtype="default")
    stored = []
    original_add = ScoreStore.add

    def recording_add(store, arm, prompt, seed, score, *args, **kwargs):
        stored.append((arm, seed, score))
        original_add(store, arm, prompt, seed, score, *args, **kwargs)

    monkeypatch.setattr(ScoreStore, "add", recording_add)
    settings = dict(steps=4, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
    aspect = "text-to-video alignment"

    def calibrate(rank_by):
        stored.clear()
        output = engine.output(
            "CachedSearchCalibrate", model=model, positive=positive, negative=negative, latent_image=latent,
            vae=vae, verifier=verifier, prompt="a red ball", first_seed=0, seeds=2, taus="0.0001",
            capture_target=0.9, warmup_steps=1, cooldown_steps=1, frames_per_candidate=4, rank_by=rank_by,
            aspect_weights="1, 1, 1, 1, 1", **settings)
        return output.result[1], {seed: score for arm, seed, score in stored if arm == FULL_ARM}

    report, by_aspect = calibrate(aspect)
    assert report.splitlines()[0].endswith(f"ranked by {aspect}")  # the header names the verifier and how it ranks
    drafts, candidates, _ = engine.run("CachedSearchSampler", model=model, positive=positive, negative=negative,
                                       latent_image=latent, seed=0, num_candidates=2, **settings)
    with torch.inference_mode():
        ranking, _ = engine.nodes["CachedSearchVideoVerifier"].execute(
            images=engine.one("VAEDecode", samples=drafts, vae=vae), candidates=candidates, prompt="a red ball",
            verifier=verifier, max_frames=4, rank_by=aspect, aspect_weights="1, 1, 1, 1, 1").result
    assert [by_aspect[seed] for seed in (0, 1)] == pytest.approx(list(ranking.scores), abs=1e-5)
    _, by_average = calibrate("average of the five aspects")
    assert [by_average[seed] for seed in (0, 1)] != pytest.approx(list(ranking.scores), abs=1e-5)


def test_a_combined_verifier_that_cannot_read_the_vaes_frames_is_named_before_any_rollout(engine):
    from scripts.comfy_runtime import run_node
    from scripts.tiny_models import WAN21_VAE_FILE

    model, positive, negative, latent = engine.tiny_wan_t2v()
    (world,) = run_node(demo_node("CachedSearchDemoBallAndSpotVerifierModel"))
    combined = engine.one("CachedSearchCombineVerifiers", verifier_1=tiny_verifiers(engine)[0], weight_1=1.0,
                          verifier_2=world, weight_2=1.0, normalisation="rank average")
    calls = []
    handle = model.model.diffusion_model.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(ValueError, match=rf"^verifier: {re.escape(world.name)} .*combined"):  # which verifier
            engine.run("CachedSearchCalibrate", model=model, positive=positive, negative=negative, latent_image=latent,
                       vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE), verifier=combined, prompt="a red ball",
                       first_seed=0, seeds=2, steps=4, cfg=5.0, sampler_name="euler", scheduler="simple",
                       denoise=1.0, taus="0.1", capture_target=0.9, warmup_steps=1, cooldown_steps=1,
                       frames_per_candidate=4)
    finally:
        handle.remove()
    assert calls == []


def saved_image(server, image) -> np.ndarray:
    folder = server.base_dir / image["type"] / image.get("subfolder", "")
    return np.asarray(Image.open(folder / image["filename"]))


def measured_rows(entry) -> list[dict]:
    (shown,) = entry["outputs"]["calibrate"]["cachedsearch_calibration"]
    return [{key: row[key] for key in MEASURED if key not in ("meets_target", "recommended")} for row in shown["rows"]]


def test_over_http_cancel_mid_calibration_leaves_the_next_run_clean_and_the_tau_feeds_apply_cache(comfy_server):
    from cachedsearch_core.calibration_memory import setup_key

    saved = comfy_server.base_dir / "user" / "cachedsearch" / "saved"
    shutil.rmtree(saved, ignore_errors=True)  # nothing another test of this server saved
    graph = calibrate_wan(seed=5, capture_target=0.9)
    cancelled = set()

    def cancel_a_third_in(index, node, value, maximum):
        if index == 0 and node == "calibrate" and value >= maximum // 3 and not cancelled:
            cancelled.add(index)
            return True
        return False

    first, second = comfy_server.run_batch([graph, graph], cancel_a_third_in)
    assert cancelled == {0}
    assert "execution_interrupted" in [message[0] for message in first["status"]["messages"]]
    assert "calibrate" not in first["outputs"]
    assert second["status"]["status_str"] == "success", second["status"]
    # the re-queue reused what the cancelled run finished (a third of 9 rollouts: 2 or 3 of them)
    (shown,) = second["outputs"]["calibrate"]["cachedsearch_calibration"]
    assert shown["reused_rollouts"] in (2, 3) and shown["rollouts"] == 9
    # the same calibration never cancelled nor resumed (another capture target: the measurements must not change)
    shutil.rmtree(saved)
    alone = comfy_server.run_prompt(calibrate_wan(seed=5, capture_target=0.95))
    assert alone["outputs"]["calibrate"]["cachedsearch_calibration"][0]["reused_rollouts"] == 0
    assert measured_rows(second) == measured_rows(alone)
    assert [row["tau"] for row in shown["rows"]] == [0.1, 0.5] and len(shown["rows"][0]["capture"]) == 3
    tau = shown["recommended_tau"]
    # the tau output went into Apply Cache, whose model the search sampled with
    assert f"tau {tau:g}" in second["outputs"]["search"]["text"][0] or (tau == 0 and "tau 0" in
                                                                         second["outputs"]["search"]["text"][0])
    (chart,) = second["outputs"]["chart"]["images"]
    assert saved_image(comfy_server, chart).shape == (400, 640, 3)
    report = second["outputs"]["calibrate"]["text"][0]
    assert numbers(line_of(report, "cost:"))[:5] == [3, 3, 2, 9, 54]  # 3 full + 3 cached x 2 taus = 9, 54 steps
    assert setup_key("wan2.1_t2v_1.3B_fp16.safetensors", 6, "euler", "simple") in report  # remembered for it


def computed_rollouts(events, steps: int) -> set[int]:
    """The rollouts (0-based, in the calibration's order) that sampled, from Calibrate's progress events: a computed
    rollout moves the bar step by step over its own stretch, a reused one moves nothing."""
    return {(value - 1) // steps for node, value, _ in events if node == "calibrate" and value > 0}


def test_over_http_a_cancelled_calibration_resumes_in_a_fresh_server_with_only_the_missing_rollouts(
        base_with_models):
    """Cancel a calibration after a few rollouts, stop the server, start a new server process on the same base
    directory and queue the same graph: the new process computes exactly the rollouts the saved file lacks (counted
    from the progress bar's steps, independently of the report's own count), completes the previews of those saved
    before their prompt's previews were scored, and ends with the table of the same graph run uninterrupted."""
    steps, rollouts = 6, 9  # calibrate_wan: 3 seeds x (full + 2 taus)
    graph = calibrate_wan(seed=21, capture_target=0.9, steps=steps)
    base = base_with_models("calibrate_restart")
    saved = base / "user" / "cachedsearch" / "saved" / "index.jsonl"  # the rollouts (and the graph's drafts) saved

    def saved_rollouts() -> dict[str, dict]:
        """Each saved rollout's last record by its key, in the order first saved (a cached rollout is saved as it
        finishes and again with its previews once its prompt's seeds all ran)."""
        records = [json.loads(line) for line in saved.read_text().splitlines()[1:]]
        return {record["key"]: record for record in records if record["kind"] == "rollout"}

    def run(server, cancel_in_rollout=None):
        events = []

        def watch(index, node, value, maximum):
            events.append((node, value, maximum))
            return cancel_in_rollout is not None and node == "calibrate" and value > cancel_in_rollout * steps

        (entry,) = server.run_batch([graph], watch)
        return entry, events

    first = comfy_runtime.ComfyServer(base)
    try:
        first.start()
        alone, events = run(first)
        assert computed_rollouts(events, steps) == set(range(rollouts))  # the meter sees every computed rollout
        saved.unlink()
        first.reset_caches()  # the same graph again must run, not come from ComfyUI's cache
        cancelled, events = run(first, cancel_in_rollout=4)
    finally:
        first.stop()
    assert "execution_interrupted" in [message[0] for message in cancelled["status"]["messages"]]
    lines = saved_rollouts()
    kept = len(lines)  # the rollouts that finished before Cancel stopped the run
    assert 4 <= kept < rollouts and computed_rollouts(events, steps) >= set(range(kept))
    # the full arm's 3 rollouts come first and record no previews; a cached one whose prompt's previews were not
    # scored yet is saved without them, and the next run samples it again to its last preview step
    without_previews = {index for index, record in enumerate(lines.values()) if index >= 3 and "previews" not in record}
    assert without_previews

    second = comfy_runtime.ComfyServer(base)
    try:
        second.start()
        resumed, events = run(second)
    finally:
        second.stop()
    assert resumed["status"]["status_str"] == "success", resumed["status"]
    assert computed_rollouts(events, steps) == set(range(kept, rollouts)) | without_previews
    report = resumed["outputs"]["calibrate"]["text"][0]
    (shown,) = resumed["outputs"]["calibrate"]["cachedsearch_calibration"]
    assert (shown["reused_rollouts"], shown["rollouts"]) == (kept, rollouts)
    assert numbers(line_of(report, "saved rollouts:"))[:3] == [kept, rollouts, rollouts - kept]  # reused, all, now
    after = saved_rollouts()
    assert list(after)[:kept] == list(lines) and len(after) == rollouts  # appended the missing ones
    assert all(after[key] == record for index, (key, record) in enumerate(lines.items())
               if index not in without_previews)  # nothing computed twice
    assert all("previews" in record for record in list(after.values())[3:])
    (table,), (uninterrupted,) = (entry["outputs"]["calibrate"]["cachedsearch_calibration"]
                                  for entry in (resumed, alone))
    assert [{key: row[key] for key in MEASURED} for row in table["rows"]] == \
        [{key: row[key] for key in MEASURED} for row in uninterrupted["rows"]]
    assert table["recommended_tau"] == uninterrupted["recommended_tau"]


def test_over_http_the_cost_on_the_canvas_is_the_reports_and_names_a_bad_input(comfy_server):
    """POST /cachedsearch/calibration_cost (what the node shows before it runs) answers from the plans the node runs:
    the report's cost for the same widgets, every prompt line with a text encoder on clip, ComfyUI's engines'
    thresholds; a value the node would refuse is answered with the node's own message."""
    from cachedsearch_core.calibration import CalibrationPlan, cache_window_problem, sweep_rollouts

    def cost(node, clip=False, **changes):
        inputs = {**calibrate_wan()["calibrate"]["inputs"], **changes}
        return comfy_server.request("POST", "/cachedsearch/calibration_cost", {
            "node": node, "inputs": {name: value for name, value in inputs.items() if not isinstance(value, list)},
            "clip": clip})

    status, one = cost("CachedSearchCalibrate")
    assert status == 200 and one["rollouts"] == 9 and one["full_rollouts"] == 3 and one["full_rollout_times"] == 6
    # the report of this graph says (test_over_http_cancel_mid_calibration_...): "cost: 3 full rollouts + 3 cached
    # rollouts x 2 taus = 9 rollouts (54 sampler steps ..."
    assert numbers(one["breakdown"]) == [3, 3, 2]  # 3 full rollouts + 3 cached rollouts x 2 taus
    assert one["line"].startswith(sweep_rollouts([CalibrationPlan((0.1, 0.5), 3)]).line())  # then the previews'
    prompts = "\n".join(f"prompt {index}" for index in range(25))
    status, family = cost("CachedSearchCalibrate", clip=True, prompt=prompts, seeds=8, taus="0.1 0.2 0.3",
                          easycache_thresholds="0.2")
    assert status == 200 and family["rollouts"] == 25 * 8 * (1 + 3 + 1) and family["full_rollout_times"] == 600
    # 25 prompts x (8 full + 8 cached x (3 taus + 1 EasyCache threshold)), about 600 full-rollout times
    assert numbers(family["line"])[:7] == [1000, 25, 8, 8, 3, 1, 600] and "EasyCache" in family["line"]
    status, experts = cost("CachedSearchCalibrateExperts", seeds=2, taus_high="0.1 2", taus_low="0.1",
                                    steps=8, split_step=4)
    assert status == 200 and experts["rollouts"] == 2 * (2 + 2 + 1) and experts["at_most"]
    status, refused = cost("CachedSearchCalibrate", taus="0.5 0.1")  # the input, its value, the value to write
    assert status == 400 and refused["error"].startswith('taus: got "0.5 0.1"') and '"0.1 0.5"' in refused["error"]
    status, refused = cost("CachedSearchCalibrate", clip=True, prompt="a ball\na ball")
    assert status == 400 and refused["error"].startswith("prompt: 'a ball' is written twice")
    # the node's own check of its cache window, before the run: the shipped 5 and 5 on 8 steps leave nothing to skip
    status, refused = cost("CachedSearchCalibrate", steps=8, warmup_steps=5, cooldown_steps=5)
    assert status == 400 and refused["error"].startswith(cache_window_problem(8, 5, 5))
    assert cost("CachedSearchCalibrate", seeds=None)[0] == 400


def test_over_http_apply_cache_shows_the_calibration_remembered_for_its_setup(comfy_server):
    entry = comfy_server.run_prompt(calibrate_wan(seed=9, capture_target=0.9))
    tau = entry["outputs"]["calibrate"]["cachedsearch_calibration"][0]["recommended_tau"]
    from cachedsearch_core.calibration import cache_window_problem

    def shown_at(steps: int, cache_tau: float, window: int) -> str | None:
        """Apply Cache's line on a sampling of ``steps`` steps, its tau and warmup and cooldown given."""
        graph = cached_wan_sampling(seed=3, steps=steps, tau=cache_tau, warmup_steps=window, cooldown_steps=window,
                                    filename_prefix="calibrated_setup")
        return (comfy_server.run_prompt(graph)["outputs"].get("cache", {}).get("cachedsearch_calibrated") or [None])[0]

    same = shown_at(6, tau, 1)
    assert numbers(same)[0] == tau and same.endswith("; this node uses it.")
    # the node's own tau beside the calibrated one says whether they differ, and which to set
    assert numbers(shown_at(6, tau + 0.05, 1))[-2:] == pytest.approx([tau + 0.05, tau])
    # another setup has no calibration; with the shipped warmup and cooldown (5 and 5) its 7 steps leave nothing to
    # skip, and the node says so
    assert shown_at(7, 0.1, 1) is None
    assert cache_window_problem(7, 5, 5) in shown_at(7, 0.1, 5)


def world_api_prompt() -> dict:
    """The server's prompt of a world calibration (the node id "calibrate"), from which the node knows its setup."""
    return {
        "loader": {"class_type": "UNETLoader", "inputs": {"unet_name": WORLD_MODEL.name, "weight_dtype": "default"}},
        "sampling": {"class_type": "ModelSamplingSD3", "inputs": {"model": ["loader", 0], "shift": TRAINING_SHIFT}},
        "frames": {"class_type": "CachedSearchDemoBallAndSpotFrames", "inputs": {}},
        "verifier": {"class_type": "CachedSearchDemoBallAndSpotVerifierModel", "inputs": {}},
        "calibrate": {"class_type": "CachedSearchCalibrate", "inputs": {
            "model": ["sampling", 0], "vae": ["frames", 0], "verifier": ["verifier", 0]}},
    }


def test_a_cancelled_calibration_resumes_with_only_the_missing_rollouts(engine, monkeypatch, tmp_path):
    """In process, as a fresh server would run it (nothing kept in memory between runs: only the saved file): Cancel
    in the fifth of 8 rollouts, then the re-queued run computes the 4 missing ones (skipping a line a crash left
    half-written) and ends with the uninterrupted run's table; another warmup recomputes only the cached rollouts."""
    import comfy.model_management
    import folder_paths

    inputs = world_prompts_inputs(engine, AUDIT_PROMPTS[:2], seeds=2, taus=(0.3,))
    hidden = {"PROMPT": world_api_prompt(), "UNIQUE_ID": "calibrate"}
    hidden["hidden_inputs"] = dict(hidden)  # what PREPARE_CLASS_CLONE reads: 0.3.75 the dict, 0.33 this entry

    def calibrate(user_directory, press_at=(0, 0), **changes):
        monkeypatch.setattr(folder_paths, "get_user_directory", lambda: str(user_directory))
        model, counts = engine.press_cancel_at(inputs["model"], *press_at)
        with torch.inference_mode():
            node = engine.nodes["CachedSearchCalibrate"].PREPARE_CLASS_CLONE(hidden)
            try:
                return node.execute(**{**inputs, "model": model, **changes}), counts["runs"]
            except comfy.model_management.InterruptProcessingException:
                return None, counts["runs"]

    alone, computed = calibrate(tmp_path / "uninterrupted")
    assert computed == 8
    cancelled, computed = calibrate(tmp_path / "resumed", press_at=(5, 2))
    assert cancelled is None and computed == 5
    saved = tmp_path / "resumed" / "cachedsearch" / "saved" / "index.jsonl"
    assert len(saved.read_text().splitlines()) == 1 + 4
    with saved.open("a") as file:
        file.write('{"key": "half-written')
    resumed, computed = calibrate(tmp_path / "resumed")
    assert computed == 4
    report = resumed.result[1]
    assert numbers(line_of(report, "saved rollouts:"))[:3] == [4, 8, 4]  # reused, all, computed now
    # the finished panel says it too (#41 item 3)
    shown = resumed.ui["cachedsearch_calibration"][0]
    assert (shown["reused_rollouts"], shown["rollouts"]) == (4, 8)
    assert "1 unreadable line(s) ignored" in report
    assert [{key: row[key] for key in MEASURED} for row in resumed.ui["cachedsearch_calibration"][0]["rows"]] == \
        [{key: row[key] for key in MEASURED} for row in alone.ui["cachedsearch_calibration"][0]["rows"]]
    wider, computed = calibrate(tmp_path / "resumed", warmup_steps=inputs["warmup_steps"] + 1)
    assert computed == 4  # the cached rollouts, whose cache window changed; the full ones are reused
    assert numbers(line_of(wider.result[1], "saved rollouts:"))[:2] == [4, 8]


def test_a_broken_memory_and_rollouts_file_are_set_aside_and_named_on_the_nodes_and_the_next_run_works(
        engine, monkeypatch, tmp_path):
    """A calibration memory torn by a crash and a saved-rollouts file that is not ours are moved aside whole, each
    named with where it went on the node that read it (Apply Cache's line, Calibrate's report); the calibration then
    saves and remembers as usual, and the next run reuses its rollouts and shows its tau on Apply Cache."""
    import folder_paths

    from cachedsearch_core.calibration_memory import NOT_A_MEMORY, setup_key
    from cachedsearch_core.saved_work import FORMAT as SAVED_WORK_FORMAT

    monkeypatch.setattr(folder_paths, "get_user_directory", lambda: str(tmp_path))
    memory = tmp_path / "cachedsearch" / "calibrations.json"
    rollouts = tmp_path / "cachedsearch" / "saved" / "index.jsonl"
    rollouts.parent.mkdir(parents=True)
    memory.write_text('{"wan2.1_t2v_1.3B_fp16.safetensors | 20 steps | euler | simple": {"tau": 0.')
    rollouts.write_text('{"not": "ours"}\n')
    inputs = {**world_inputs(engine), "seeds": 2, "taus": "0.3"}
    loader_and_shift = {name: node for name, node in world_api_prompt().items() if name in ("loader", "sampling")}

    def run(node_class, node_id, graph, /, **node_inputs):
        hidden = {"PROMPT": {**loader_and_shift, **graph}, "UNIQUE_ID": node_id}
        hidden["hidden_inputs"] = dict(hidden)  # what PREPARE_CLASS_CLONE reads: 0.3.75 the dict, 0.33 this entry
        with torch.inference_mode():
            return engine.nodes[node_class].PREPARE_CLASS_CLONE(hidden).execute(**node_inputs)

    def apply_cache_line() -> str | None:
        """Apply Cache's line on the world model sampled with the calibration's steps, sampler and scheduler."""
        sampler = {"model": ["cache", 0], "steps": WORLD_RUN["steps"], "sampler_name": "euler", "scheduler": "simple"}
        output = run("CachedSearchApplyCache", "cache", {
            "cache": {"class_type": "CachedSearchApplyCache", "inputs": {"model": ["sampling", 0]}},
            "sampler": {"class_type": "KSampler", "inputs": sampler}}, model=inputs["model"], mode="adaptive",
            tau=0.1, warmup_steps=1, cooldown_steps=1, static_interval=2)
        return ((output.ui or {}).get("cachedsearch_calibrated") or [None])[0]

    def calibrate() -> str:
        calibrate_node = {name: node for name, node in world_api_prompt().items() if name not in loader_and_shift}
        return run("CachedSearchCalibrate", "calibrate", calibrate_node, **inputs).result[1]

    line = apply_cache_line()
    (torn,) = memory.parent.glob("calibrations.json.corrupt-*")
    assert line.startswith(f"{memory}: ") and "it is not JSON" in line and torn.name in line
    assert torn.read_text().endswith('"tau": 0.') and not memory.exists()

    memory.write_text('["not a memory"]')
    report = calibrate()
    (foreign,) = rollouts.parent.glob(f"{rollouts.name}.corrupt-*")
    (memory_aside,) = set(memory.parent.glob("calibrations.json.corrupt-*")) - {torn}
    rollouts_problem, memory_problem = line_of(report, f"{rollouts}: "), line_of(report, f"{memory}: ")
    assert SAVED_WORK_FORMAT in rollouts_problem and foreign.name in rollouts_problem
    assert NOT_A_MEMORY in memory_problem and memory_aside.name in memory_problem
    assert numbers(line_of(report, "saved rollouts:"))[:2] == [0, 4]
    assert setup_key(WORLD_MODEL.name, WORLD_RUN["steps"], "euler", "simple") in report  # remembered for it
    assert foreign.read_text() == '{"not": "ours"}\n' and memory_aside.read_text() == '["not a memory"]'

    again = calibrate()
    assert numbers(line_of(again, "saved rollouts:"))[:2] == [4, 4] and "set aside" not in again
    (remembered,) = json.loads(memory.read_text()).values()
    assert numbers(apply_cache_line())[0] == remembered["tau"]


def test_two_experts_calibrate_on_several_prompts(engine):
    """The world model as both experts, two prompts typed one per line: each expert's table and the picks together
    pool both prompts (every arm ran each prompt's seeds)."""
    inputs = world_prompts_inputs(engine, AUDIT_PROMPTS[:2], seeds=2, taus=())
    output = engine.output(
        "CachedSearchCalibrateExperts", model_high=inputs["model"], model_low=inputs["model"],
        **{name: inputs[name] for name in ("negative", "latent_image", "vae", "verifier", "prompt", "clip", "seeds",
                                           "first_seed", "cfg", "sampler_name", "scheduler",
                                           "frames_per_candidate")},
        steps=8, split_step=4, taus_high="0.0001", taus_low="0.0001", capture_target=0.9, warmup_steps_high=1,
        cooldown_steps_high=1, warmup_steps_low=1, cooldown_steps_low=1)
    tau_high, tau_low, report, _ = output.result
    (shown,) = output.ui["cachedsearch_calibration"]
    assert shown["prompts"] == 2 and not shown["intervals"]
    # a tau that skips nothing keeps every prompt's ranking but saves nothing: neither expert recommends it
    assert tau_high == tau_low == 0.0
    assert all(row["calls"] == 2 * 2 * 8 for row in shown["rows"])  # 2 prompts x 2 seeds x 8 steps
    # 2 prompts x (2 full + 2 cached x (1 high-noise tau + 1 low-noise tau) + 2 with both picks) = 16 at most
    cost = line_of(report, "cost:")
    assert numbers(cost)[:7] == [2, 2, 2, 1, 1, 2, 16] and "at most" in cost


def test_over_http_the_cost_line_names_the_previews_calibrate_scores(comfy_server):
    """Calibrate scores each cached rollout's previews (issue 51 item 1): the canvas's cost line says how many
    verifier calls that adds, from the node's own window (cached rollouts x preview steps)."""
    from cachedsearch_core.previews import preview_steps
    from cachedsearch_core.pruning import CacheWindow

    inputs = {name: value for name, value in calibrate_wan()["calibrate"]["inputs"].items()
              if not isinstance(value, list)}
    status, one = comfy_server.request("POST", "/cachedsearch/calibration_cost",
                                       {"node": "CachedSearchCalibrate", "inputs": inputs, "clip": False})
    steps = preview_steps([CacheWindow(0, inputs["steps"], inputs["warmup_steps"], inputs["cooldown_steps"])],
                          inputs["steps"])
    assert status == 200 and steps and one["preview_steps"] == list(steps)
    assert one["preview_verifier_calls"] == 3 * 2 * len(steps)  # 3 seeds x 2 taus x the preview steps
    assert f"{one['preview_verifier_calls']} more verifier calls" in one["line"]
    status, experts = comfy_server.request("POST", "/cachedsearch/calibration_cost", {
        "node": "CachedSearchCalibrateExperts", "inputs": {**inputs, "seeds": 2, "taus_high": "0.1 2",
                                                             "taus_low": "0.1", "steps": 8, "split_step": 4}})
    assert status == 200 and experts["preview_verifier_calls"] == 2 * (2 + 1 + 1) * len(experts["preview_steps"])
    assert 4 in experts["preview_steps"]  # the switch between the experts is a prune step
