"""The search nodes' optional pruning plan on ComfyUI's real runtime (in process, CPU, tiny random-weight models):
the CachedSearch Pruning Plan node wired into CachedSearch Sampler, Sampler (Advanced) and the two-expert sampler."""

import urllib.parse
import urllib.request

import pytest
import torch

from report_text import numbers, refusal
from scripts.tiny_models import WAN21_VAE_FILE, WAN22_A14B_FILES

VIDEO_LENGTH = 13  # 4 latent frames, so 4 preview frames fit
SETTINGS = dict(steps=8, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
SKIPPING = dict(mode="adaptive", tau=0.5, warmup_steps=1, cooldown_steps=1, static_interval=2)
OFF = dict(SKIPPING, mode="off")
SEED = 120
PROMPT = "a red ball on the grass"
SCRIPTED_PREVIEW_SCORES = [0.3, 0.9, 0.1, 0.7]  # candidates 2 and 4 survive with keep 2


class ScriptedVerifier:
    """A verifier whose scores are scripted in call order (one call per candidate's preview): it records the
    frames it was shown and can press Cancel, as POST /interrupt does, while a call is scored."""

    name = "scripted"

    def __init__(self, scores, cancel_at_call=None):
        self.scores = list(scores)
        self.cancel_at_call = cancel_at_call
        self.frames_seen = []

    def score(self, prompt, frames):
        import comfy.model_management

        self.frames_seen.append(frames.clone())
        if len(self.frames_seen) == self.cancel_at_call:
            comfy.model_management.interrupt_current_processing(True)
        return torch.full((frames.shape[0],), self.scores[len(self.frames_seen) - 1])


@pytest.fixture(scope="module")
def wan(engine):
    model, positive, negative, latent = engine.tiny_wan_t2v(length=VIDEO_LENGTH)
    vae = engine.one("VAELoader", vae_name=WAN21_VAE_FILE)
    return model, positive, negative, latent, vae


def pruning_plan(engine, vae, verifier, **overrides):
    inputs = dict(vae=vae, verifier=verifier, prompt=PROMPT, keep=2, prune_fraction=0.4, prune_step=0,
                  preview_frames=4)
    return engine.one("CachedSearchPruningPlan", **(inputs | overrides))


def pruned_search(engine, model, wan, pruning, n=4, **settings):
    _, positive, negative, latent, _ = wan
    return engine.run("CachedSearchSampler", model=model, positive=positive, negative=negative, latent_image=latent,
                      seed=SEED, num_candidates=n, pruning=pruning, **(SETTINGS | settings))


def ksampler(engine, wan, seed):
    model, positive, negative, latent, _ = wan
    return engine.one("KSampler", model=model, positive=positive, negative=negative, latent_image=latent, seed=seed,
                      **SETTINGS)["samples"]


def test_sampler_keeps_the_scripted_survivors_and_continues_them_from_the_prune_step(engine, wan, vae_decodes):
    model, _, _, _, vae = wan
    counted, calls = engine.counting_transformer_calls(engine.one("CachedSearchApplyCache", model=model, **OFF))
    verifier = ScriptedVerifier(SCRIPTED_PREVIEW_SCORES)
    output = engine.output("CachedSearchSampler", model=counted, positive=wan[1], negative=wan[2],
                           latent_image=wan[3], seed=SEED, num_candidates=4,
                           pruning=pruning_plan(engine, vae, verifier), **SETTINGS)
    drafts, candidates, report = output.result
    prune_step = 3  # prune_fraction 0.4 of 8 steps

    assert candidates.seeds == [SEED + 1, SEED + 3]
    assert drafts["samples"].shape[0] == 2
    # Dropped candidates are never continued, survivors are not recomputed: N*p + k*(T-p) transformer calls
    # (cond and uncond batched in one call per step), not N*p + k*T.
    assert len(calls) == 4 * prune_step + 2 * (8 - prune_step)
    assert [d.calls_computed for d in candidates.drafts] == [8, 8]
    assert [p.draft.calls_computed for p in candidates.pruning.pruned] == [prune_step, prune_step]
    # Each preview: 4 frames decoded from the x0 estimate (4 latent frames of 4x4 -> 32x32 images), and the
    # candidates' previews differ.
    assert [tuple(frames.shape) for frames in verifier.frames_seen] == [(4, 32, 32, 3)] * 4
    assert not torch.equal(verifier.frames_seen[0], verifier.frames_seen[1])

    assert "pruned at step 3 of 8: kept 2 of 4" in report
    lines = report.splitlines()
    assert any(f"  1  seed {SEED:>20}  preview    0.3000  pruned after 3 calls" in line for line in lines)
    assert any(f"  2  seed {SEED + 1:>20}  preview    0.9000  kept" in line for line in lines)
    # The survivors keep their candidate numbers (seed order) in the report's table.
    assert [line.split()[:2] for line in lines if line.split()[1:2] in ([str(SEED + 1)], [str(SEED + 3)])] == [
        ["2", str(SEED + 1)], ["4", str(SEED + 3)]]
    shown = output.ui["cachedsearch_pruned"]
    assert [(row["seed"], row["preview_score"], row["calls"]) for row in shown] == [
        (SEED, pytest.approx(0.3), 3), (SEED + 2, pytest.approx(0.1), 3)]

    # The panel: every candidate in seed order with its number and preview score, the pruned ones marked.
    rows = output.ui["cachedsearch_drafts"]
    assert [(row["candidate"], row["seed"], row.get("pruned", False)) for row in rows] == [
        (1, SEED, True), (2, SEED + 1, False), (3, SEED + 2, True), (4, SEED + 3, False)]
    assert [row["preview_score"] for row in rows] == pytest.approx(SCRIPTED_PREVIEW_SCORES)
    assert [row["calls"] for row in rows] == [prune_step, 8, prune_step, 8]
    # Every candidate's row shows the preview frames the Pruning Plan scored; a pruned one shows them as its
    # frames. Nothing else was decoded: one decode per preview and no preview_vae.
    assert vae_decodes == [(4, 16, 1, 4, 4)] * 4
    for row, seen in zip(rows, verifier.frames_seen):
        previews = engine.read_panel_frames(row["preview_frames"])
        assert len(previews) == 4 and all(frame.shape == (32, 32, 3) for frame in previews)
        assert all((a == b).all() for a, b in zip(previews, engine.as_saved(seen)))
        assert ("frames" in row) == row.get("pruned", False)
        if row.get("pruned"):
            assert row["frames"] == row["preview_frames"]
    # Cost: the counted transformer calls against full best-of-4 (4 x 8 calls, each draft computes every call).
    (cost,) = output.ui["cachedsearch_cost"]
    assert (cost["search_calls"], cost["full_calls"]) == (len(calls), 4 * 8)
    assert cost["calls_ratio"] == len(calls) / 32 and cost["calls_ratio_with_commit"] == (len(calls) + 8) / 32
    assert "full best-of-4" in cost["note"]
    # The cache is off, so the survivors computed every call: their seconds measure a full rollout's. Not the
    # commit's: the split at the prune step makes it a real one.
    assert cost["full_rollout_seconds"] == pytest.approx(sum(d.seconds for d in candidates.drafts) / 2)
    assert (cost["commit_free"], cost["commit_calls"]) == (False, 8)

    # The winner (seed SEED + 3) is recommitted exactly as a stock KSampler with its seed.
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0.1, 0.5")
    delivered, seed, commit_report = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking,
                                                mode="commit")
    assert seed == SEED + 3
    assert "winner: candidate 4, seed 123" in commit_report
    assert torch.equal(delivered["samples"], ksampler(engine, wan, SEED + 3))
    # Seconds against full best-of-4 (every candidate started), measured by the commit; no break-even width, whose
    # model has no dropped drafts.
    # its figures: the search's seconds, a full rollout's (the commit's), the share of full best-of-4, the commit's
    # seconds, the share with it and gamma; no eighth figure (a break-even width)
    seconds = numbers(commit_report.splitlines()[-1])
    assert len(seconds) == 7 and seconds[3] == 4 and "(the commit)" in commit_report.splitlines()[-1]


def test_pruning_keeps_the_caches_schedule_of_the_unpruned_search(engine, wan):
    """The split at the prune step adds no cooldown before it and no warmup after it: with the static schedule
    (every 2nd step after warmup 1, cooldown 1 of 8) survivors compute steps 0, 1, 3, 5, 7 as unpruned drafts do."""
    model, _, _, _, vae = wan
    static = engine.one("CachedSearchApplyCache", model=model, **(SKIPPING | dict(mode="static")))
    plan = pruning_plan(engine, vae, ScriptedVerifier(SCRIPTED_PREVIEW_SCORES), prune_step=3)
    drafts, candidates, _ = pruned_search(engine, static, wan, plan)
    unpruned, unpruned_candidates, _ = pruned_search(engine, static, wan, None)
    assert [(d.calls_computed, d.calls_skipped) for d in unpruned_candidates.drafts] == [(5, 3)] * 4
    assert [(d.calls_computed, d.calls_skipped) for d in candidates.drafts] == [(5, 3)] * 2
    assert [(p.draft.calls_computed, p.draft.calls_skipped) for p in candidates.pruning.pruned] == [(2, 1)] * 2
    reference = unpruned["samples"][[1, 3]]
    assert (drafts["samples"] - reference).abs().max().item() <= 1e-4 * reference.abs().max().item()


def test_real_verifier_ranks_survivors_and_shows_pruned_rows(engine, wan):
    model, positive, negative, latent, vae = wan
    verifier = engine.one("CachedSearchLoadImageReward", ckpt_name="ImageReward.pt", dtype="fp32")
    cached = engine.one("CachedSearchApplyCache", model=model, **SKIPPING)
    drafts, candidates, _ = pruned_search(engine, cached, wan, pruning_plan(engine, vae, verifier, prune_step=4))
    outcome = candidates.pruning
    assert len(set(outcome.preview_scores)) == 4
    best_two = sorted(range(4), key=lambda index: -outcome.preview_scores[index])[:2]
    assert candidates.seeds == [SEED + index for index in sorted(best_two)]

    images = engine.one("VAEDecode", samples=drafts, vae=vae)
    scored = engine.output("CachedSearchVerifier", images=images, candidates=candidates, prompt=PROMPT,
                         verifier=verifier, frames_per_candidate=4)
    ranking = scored.result[0]
    pruned = scored.ui["cachedsearch_pruned"]
    assert {row["seed"] for row in pruned} == {SEED, SEED + 1, SEED + 2, SEED + 3} - set(candidates.seeds)
    assert all(row["preview_score"] == outcome.preview_scores[row["seed"] - SEED] for row in pruned)
    # The ranking panel: all four candidates in seed order, the survivors scored and ranked under their own
    # numbers, every one with its preview score; frames: the 4 the verifier scored, or a pruned one's preview.
    rows = scored.ui["cachedsearch_ranking"]
    assert [(row["candidate"], row["seed"]) for row in rows] == [(index + 1, SEED + index) for index in range(4)]
    assert [row["seed"] for row in rows if not row.get("pruned")] == candidates.seeds
    assert [row["preview_score"] for row in rows] == list(outcome.preview_scores)
    ranked = [row for row in rows if not row.get("pruned")]
    assert [row["score"] for row in ranked] == list(ranking.scores)
    assert sorted(row["rank"] for row in ranked) == [1, 2] and all("rank" not in row for row in pruned)
    winner = next(row for row in ranked if row["winner"])
    assert winner["rank"] == 1 and winner["seed"] == candidates.seeds[ranking.winner]
    assert winner["margin"] == pytest.approx(abs(ranking.scores[0] - ranking.scores[1]))
    assert f"* candidate {winner['candidate']}, seed {winner['seed']}" in scored.result[1]
    for row in rows:
        assert len(engine.read_panel_frames(row["frames"])) == 4
    assert scored.ui["cachedsearch_verifier"][0]["name"] == "ImageReward"

    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    assert seed == candidates.seeds[ranking.winner]
    assert torch.equal(delivered["samples"], ksampler(engine, wan, seed))


def test_cancel_during_preview_scoring_leaves_nothing_behind(engine, wan):
    import comfy.model_management

    model, _, _, _, vae = wan
    cached = engine.one("CachedSearchApplyCache", model=model, **SKIPPING)
    options_before = repr(cached.model_options)
    wrappers_before = repr(cached.wrappers)
    clean_drafts, clean_candidates, clean_report = pruned_search(
        engine, cached, wan, pruning_plan(engine, vae, ScriptedVerifier(SCRIPTED_PREVIEW_SCORES)))

    pressing = ScriptedVerifier(SCRIPTED_PREVIEW_SCORES, cancel_at_call=2)
    try:
        with pytest.raises(comfy.model_management.InterruptProcessingException):
            pruned_search(engine, cached, wan, pruning_plan(engine, vae, pressing))
    finally:
        comfy.model_management.interrupt_current_processing(False)
    assert len(pressing.frames_seen) == 2  # stopped before the third preview; nobody continued
    assert repr(cached.model_options) == options_before and repr(cached.wrappers) == wrappers_before

    drafts, candidates, _ = pruned_search(
        engine, cached, wan, pruning_plan(engine, vae, ScriptedVerifier(SCRIPTED_PREVIEW_SCORES)))
    assert torch.equal(drafts["samples"], clean_drafts["samples"])
    assert [d.calls_skipped for d in candidates.drafts] == [d.calls_skipped for d in clean_candidates.drafts]
    assert candidates.pruning.preview_scores == clean_candidates.pruning.preview_scores


@pytest.mark.parametrize("plan, n, message", [  # the input, the value got, and the facts it is refused by
    (dict(prune_step=1), 4, refusal("prune_step", 1, 8, 1, 1)),  # 8 steps, warmup 1, cooldown 1
    (dict(prune_step=7), 4, refusal("prune_step", 7)),
    (dict(prune_fraction=0.9), 4, refusal("prune_fraction", 0.9, 7, 8, 8, 1)),  # prunes at step 7 of 8
    (dict(keep=5), 4, refusal("keep", 5, 1, 4)),
    (dict(keep=0), 4, refusal("keep", 0)),
    (dict(preview_frames=5), 4, refusal("preview_frames", 5, 4, 1, 4)),  # the video has 4 frames: use 1 to 4
    (dict(prompt=" "), 4, refusal("prompt", "empty")),
])
def test_bad_pruning_input_names_the_input(engine, wan, plan, n, message):
    model, _, _, _, vae = wan
    cached = engine.one("CachedSearchApplyCache", model=model, **SKIPPING)
    verifier = ScriptedVerifier(SCRIPTED_PREVIEW_SCORES)
    with pytest.raises(ValueError, match=message):
        pruned_search(engine, cached, wan, pruning_plan(engine, vae, verifier, **plan), n=n)
    assert verifier.frames_seen == []  # refused before any sampling


@pytest.mark.slow  # test_pruning_rounds prunes the advanced sampler (in rounds) in the fast tier
def test_advanced_sampler_prunes_inside_its_sigmas(engine, wan):
    model, positive, negative, latent, vae = wan
    cached = engine.one("CachedSearchApplyCache", model=model, **OFF)
    guider = engine.one("CFGGuider", model=cached, positive=positive, negative=negative, cfg=5.0)
    sampler = engine.one("KSamplerSelect", sampler_name="euler")
    sigmas = engine.one("BasicScheduler", model=cached, scheduler="simple", steps=8, denoise=1.0)
    inputs = dict(guider=guider, sampler=sampler, sigmas=sigmas, latent_image=latent, seed=SEED, num_candidates=4)
    drafts, candidates, _ = engine.run("CachedSearchSamplerAdvanced", **inputs,
                                       pruning=pruning_plan(engine, vae, ScriptedVerifier(SCRIPTED_PREVIEW_SCORES)))
    assert candidates.seeds == [SEED + 1, SEED + 3]
    assert [d.calls_computed for d in candidates.drafts] == [8, 8]
    # euler continued from the split sigmas equals the unpruned drafts up to the leftover-noise round trip.
    unpruned, _, _ = engine.run("CachedSearchSamplerAdvanced", **inputs)
    reference = unpruned["samples"][[1, 3]]
    assert (drafts["samples"] - reference).abs().max().item() <= 1e-4 * reference.abs().max().item()

    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="1, 0")
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    stock = engine.run("SamplerCustomAdvanced", noise=engine.one("RandomNoise", noise_seed=SEED + 1), guider=guider,
                       sampler=sampler, sigmas=sigmas, latent_image=latent)[0]["samples"]
    assert seed == SEED + 1 and torch.equal(delivered["samples"], stock)


def experts(engine):
    high, low = (engine.one("ModelSamplingSD3", shift=5.0, model=engine.one("UNETLoader", unet_name=name,
                                                                              weight_dtype="default"))
                 for name in WAN22_A14B_FILES["t2v"])
    return high, low


@pytest.mark.parametrize("prune_step", [4, 6])  # at the expert switch, inside the low-noise expert
def test_two_expert_search_prunes_at_the_switch_or_inside_an_expert(engine, wan, prune_step):
    _, positive, negative, latent, vae = wan
    high, low = experts(engine)
    graph = dict(positive=positive, negative=negative, latent_image=latent, seed=SEED, num_candidates=4, steps=8,
                 split_step=4, cfg=3.5, sampler_name="euler", scheduler="simple")
    counted_high, high_calls = engine.counting_transformer_calls(
        engine.one("CachedSearchApplyCache", model=high, **OFF))
    counted_low, low_calls = engine.counting_transformer_calls(engine.one("CachedSearchApplyCache", model=low, **OFF))
    plan = pruning_plan(engine, vae, ScriptedVerifier(SCRIPTED_PREVIEW_SCORES), prune_step=prune_step)
    _, candidates, report = engine.run("CachedSearchSamplerExperts", model_high=counted_high, model_low=counted_low,
                                       pruning=plan, **graph)
    assert candidates.seeds == [SEED + 1, SEED + 3]
    assert len(high_calls) + len(low_calls) == 4 * prune_step + 2 * (8 - prune_step)
    # All four run the high-noise expert (steps 0-4); only the survivors finish the low-noise one.
    assert (len(high_calls), len(low_calls)) == (4 * 4, 4 * (prune_step - 4) + 2 * (8 - prune_step))
    assert [[stage.computed for stage in d.stage_calls] for d in candidates.drafts] == [[4, 4], [4, 4]]
    assert f"pruned at step {prune_step} of 8" in report

    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0, 1")
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    shared = dict(steps=8, cfg=3.5, sampler_name="euler", scheduler="simple", positive=positive, negative=negative)
    leftover = engine.one("KSamplerAdvanced", model=high, add_noise="enable", noise_seed=SEED + 3,
                          latent_image=latent, start_at_step=0, end_at_step=4, return_with_leftover_noise="enable",
                          **shared)
    stock = engine.one("KSamplerAdvanced", model=low, add_noise="disable", noise_seed=0, latent_image=leftover,
                       start_at_step=4, end_at_step=10000, return_with_leftover_noise="disable", **shared)
    assert seed == SEED + 3 and torch.equal(delivered["samples"], stock["samples"])


def test_two_expert_prune_step_error_names_each_experts_window(engine, wan):
    _, positive, negative, latent, vae = wan
    high, low = (engine.one("CachedSearchApplyCache", model=model, **SKIPPING) for model in experts(engine))
    # each expert's window (steps 2 to 2, 6 to 6) or the switch at 4
    with pytest.raises(ValueError, match=refusal("prune_step", 5, 2, 2, 6, 6, 4)):
        engine.run("CachedSearchSamplerExperts", model_high=high, model_low=low, positive=positive,
                   negative=negative, latent_image=latent, seed=SEED, num_candidates=4, steps=8, split_step=4,
                   cfg=3.5, sampler_name="euler", scheduler="simple",
                   pruning=pruning_plan(engine, vae, ScriptedVerifier(SCRIPTED_PREVIEW_SCORES), prune_step=5))


def test_pruned_search_through_the_server_shows_pruned_candidates(comfy_server):
    from scripts.graphs import wan_search

    info = comfy_server.get("/object_info/CachedSearchPruningPlan")["CachedSearchPruningPlan"]
    assert set(info["input"]["required"]) == {"vae", "verifier", "prompt", "keep", "prune_fraction", "prune_step",
                                              "preview_frames"}
    assert all(options[1].get("tooltip") for options in info["input"]["required"].values())
    for sampler in ("CachedSearchSampler", "CachedSearchSamplerAdvanced", "CachedSearchSamplerExperts"):
        optional = comfy_server.get(f"/object_info/{sampler}")[sampler]["input"]["optional"]
        assert optional["pruning"][0] == "CACHEDSEARCH_PRUNING_PLAN" and optional["pruning"][1]["tooltip"]
        assert optional["preview_vae"][0] == "VAE" and "previews" in optional["preview_vae"][1]["tooltip"]

    graph = wan_search(seed=300, num_candidates=3, steps=12, verifier_prompt=PROMPT, filename_prefix="pruned")
    # 9 frames: 3 latent frames to preview; 0.4 of 12 steps prunes at step 5 (warmup and cooldown 2).
    graph["pruning"] = {"class_type": "CachedSearchPruningPlan", "inputs": {
        "vae": ["vae", 0], "verifier": ["load_verifier", 0], "prompt": PROMPT, "keep": 2, "prune_fraction": 0.4,
        "prune_step": 0, "preview_frames": 3}}
    graph["search"]["inputs"]["pruning"] = ["pruning", 0]
    entry = comfy_server.run_prompt(graph)
    outputs = entry["outputs"]
    (pruned,) = outputs["search"]["cachedsearch_pruned"]
    assert pruned["prune_step"] == 5 and pruned["calls"] == 5
    rows = outputs["search"]["cachedsearch_drafts"]
    assert [(row["candidate"], row["seed"]) for row in rows] == [(1, 300), (2, 301), (3, 302)]
    kept = [row["seed"] for row in rows if not row.get("pruned")]
    assert len(kept) == 2 and pruned["seed"] not in kept and {pruned["seed"], *kept} == {300, 301, 302}
    assert outputs["ranking"]["cachedsearch_pruned"] == outputs["search"]["cachedsearch_pruned"]
    assert [row["seed"] for row in outputs["ranking"]["cachedsearch_ranking"] if not row.get("pruned")] == kept
    # The pruned candidate's preview frames are served by the server for the panel.
    for frame in next(row for row in rows if row.get("pruned"))["frames"]:
        query = urllib.parse.urlencode(frame)
        with urllib.request.urlopen(f"{comfy_server.url}/view?{query}", timeout=30) as response:
            assert response.read().startswith(b"\x89PNG")
    (report,) = outputs["recommit"]["text"]
    assert "pruned at step 5 of 12: kept 2 of 3" in report
    (delivery,) = outputs["recommit"]["cachedsearch_delivery"]
    assert delivery["seed"] in kept and delivery["num_candidates"] == 3
