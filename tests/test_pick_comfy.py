"""The artist's pick on Recommit, on ComfyUI's real samplers (in process, CPU, tiny random-weight models): a picked
candidate is delivered exactly as the stock graph makes its seed, for all three sampler shapes and for a candidate a
pruned search stopped."""

import pytest
import torch

from cachedsearch_core.search_report import DELIVERED_BY, WINNER_LINE_PREFIX
from report_text import numbers, refusal
from scripts.tiny_models import WAN21_VAE_FILE, WAN22_A14B_FILES

SETTINGS = dict(steps=8, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
SKIPPING = dict(mode="adaptive", tau=0.5, warmup_steps=1, cooldown_steps=1, static_interval=2)
SEED = 140


@pytest.fixture(scope="module")
def wan(engine):
    model, positive, negative, latent = engine.tiny_wan_t2v(length=5)
    return model, engine.one("CachedSearchApplyCache", model=model, **SKIPPING), positive, negative, latent


def node_output(engine, node_id, **inputs):
    """The node's whole output (results and UI payload), run as ComfyUI's executor runs a V3 node."""
    with torch.inference_mode():
        return engine.nodes[node_id].PREPARE_CLASS_CLONE({}).execute(**inputs)


def recommit(engine, candidates, **inputs):
    output = node_output(engine, "CachedSearchRecommit", candidates=candidates, **(dict(mode="commit") | inputs))
    (delivery,) = output.ui["cachedsearch_delivery"]
    return output.result, delivery


def scores(engine, candidates, text):
    return engine.one("CachedSearchRankingFromScores", candidates=candidates, scores=text)


def ksampler(engine, wan, seed):
    model, _, positive, negative, latent = wan
    return engine.one("KSampler", model=model, positive=positive, negative=negative, latent_image=latent, seed=seed,
                      **SETTINGS)["samples"]


def search(engine, wan, n=3, **inputs):
    _, cached, positive, negative, latent = wan
    return engine.run("CachedSearchSampler", model=cached, positive=positive, negative=negative, latent_image=latent,
                      seed=SEED, num_candidates=n, **(SETTINGS | inputs))


@pytest.fixture(scope="module")
def searched(engine, wan):
    """Drafts and CANDIDATES of a 3-seed search on the skipping cache."""
    drafts, candidates, _ = search(engine, wan)
    return drafts, candidates


def pick_line(report, mode="commit"):
    """The report's line saying what was delivered (by ``mode``) and who chose it."""
    (line,) = [line for line in report.splitlines() if line.endswith(DELIVERED_BY[mode])]
    return line


def test_a_pick_against_the_verifier_commits_exactly_the_stock_ksampler_of_that_seed(engine, wan, searched):
    drafts, candidates = searched
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    ranking = scores(engine, candidates, "0.1 0.3 0.2")  # the verifier prefers candidate 2
    (delivered, seed, report), delivery = recommit(engine, candidates, ranking=ranking, pick=3, pick_among=3)
    reference = ksampler(engine, wan, SEED + 2)
    assert seed == SEED + 2 and torch.equal(delivered["samples"], reference)
    assert not torch.equal(drafts["samples"][2:3], reference)  # the draft was lossy: this is the commit
    # you picked candidate 3 (seed 142) where the verifier preferred candidate 2 (seed 141); no winner line
    assert numbers(pick_line(report)) == [3, 142, 2, 141] and "you" in pick_line(report)
    assert not any(line.startswith(WINNER_LINE_PREFIX) for line in report.splitlines())
    assert delivery | {"cost": None} == {
        "candidate": 3, "seed": SEED + 2, "mode": "commit", "picked_by": "you",
        "verifier_choice": {"candidate": 2, "seed": SEED + 1}, "pick_among": 3, "num_candidates": 3, "cost": None}
    # The Sampler's cost model, with the pick's commit: a full rollout like the verifier's winner's.
    assert delivery["cost"]["commit_ran"] and delivery["cost"]["commit_calls"] == candidates.cost().commit_calls

    (kept, kept_seed, kept_report), kept_delivery = recommit(engine, candidates, pick=2, mode="keep")
    assert kept_seed == SEED + 1 and torch.equal(kept["samples"], drafts["samples"][1:2])  # no ranking needed
    assert numbers(pick_line(kept_report, "keep")) == [2, 141]  # your candidate 2; no verifier's choice to name
    assert kept_delivery["verifier_choice"] is None and kept_delivery["cost"]["kept"]
    assert kept_delivery["cost"]["calls_ratio_with_commit"] == candidates.cost().calls_ratio  # nothing added

    (_, verifiers_seed, verifiers_report), verifiers = recommit(engine, candidates, ranking=ranking)
    assert verifiers_seed == SEED + 1 and verifiers["picked_by"] == "verifier"
    assert pick_line(verifiers_report).startswith(WINNER_LINE_PREFIX) and numbers(pick_line(verifiers_report)) == [
        2, 141]


def test_advanced_sampler_pick_without_a_ranking_commits_the_stock_sampler_custom_advanced(engine, wan):
    model, cached, positive, negative, latent = wan
    guider = engine.one("CFGGuider", model=cached, positive=positive, negative=negative, cfg=5.0)
    sampler = engine.one("KSamplerSelect", sampler_name="euler")
    sigmas = engine.one("BasicScheduler", model=model, scheduler="simple", steps=8, denoise=1.0)
    _, candidates, _ = engine.run("CachedSearchSamplerAdvanced", guider=guider, sampler=sampler, sigmas=sigmas,
                                  latent_image=latent, seed=SEED, num_candidates=3)
    (delivered, seed, _), delivery = recommit(engine, candidates, pick=1)
    stock_guider = engine.one("CFGGuider", model=model, positive=positive, negative=negative, cfg=5.0)
    stock = engine.run("SamplerCustomAdvanced", noise=engine.one("RandomNoise", noise_seed=SEED), guider=stock_guider,
                       sampler=sampler, sigmas=sigmas, latent_image=latent)[0]["samples"]
    assert seed == SEED and delivery["picked_by"] == "you" and torch.equal(delivered["samples"], stock)


def test_two_expert_pick_commits_the_official_two_ksampler_advanced_graph(engine, wan):
    _, _, positive, negative, latent = wan
    high, low = (engine.one("ModelSamplingSD3", shift=5.0, model=engine.one("UNETLoader", unet_name=name,
                                                                              weight_dtype="default"))
                 for name in WAN22_A14B_FILES["t2v"])
    skipping = dict(SKIPPING, tau=2.0)
    _, candidates, _ = engine.run(
        "CachedSearchSamplerExperts", model_high=engine.one("CachedSearchApplyCache", model=high, **skipping),
        model_low=engine.one("CachedSearchApplyCache", model=low, **skipping), positive=positive, negative=negative,
        latent_image=latent, seed=SEED, num_candidates=2, steps=8, split_step=4, cfg=3.5, sampler_name="euler",
        scheduler="simple")
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    (delivered, seed, report), _ = recommit(engine, candidates, ranking=scores(engine, candidates, "1 0"), pick=2)
    shared = dict(steps=8, cfg=3.5, sampler_name="euler", scheduler="simple", positive=positive, negative=negative)
    leftover = engine.one("KSamplerAdvanced", model=high, add_noise="enable", noise_seed=SEED + 1,
                          latent_image=latent, start_at_step=0, end_at_step=4, return_with_leftover_noise="enable",
                          **shared)
    stock = engine.one("KSamplerAdvanced", model=low, add_noise="disable", noise_seed=0, latent_image=leftover,
                       start_at_step=4, end_at_step=10000, return_with_leftover_noise="disable", **shared)
    assert seed == SEED + 1 and torch.equal(delivered["samples"], stock["samples"])
    assert numbers(pick_line(report)) == [2, 141, 1, 140]  # yours, then the verifier's candidate 1 (seed 140)


class ScriptedPreviewVerifier:
    """Scores each candidate's preview with the next scripted number (one call per candidate, in seed order)."""

    name = "scripted"

    def __init__(self, scores):
        self.scores = list(scores)

    def score(self, prompt, frames):
        return torch.full((frames.shape[0],), self.scores.pop(0))


def test_a_pruned_candidate_is_committed_exactly_and_survivors_keep_their_seed_order_numbers(engine, wan):
    vae = engine.one("VAELoader", vae_name=WAN21_VAE_FILE)
    plan = engine.one("CachedSearchPruningPlan", vae=vae, verifier=ScriptedPreviewVerifier([0.3, 0.9, 0.1, 0.7]),
                      prompt="a red ball", keep=2, prune_fraction=0.4, prune_step=3, preview_frames=2)
    drafts, candidates, _ = search(engine, wan, n=4, pruning=plan)
    assert candidates.seeds == [SEED + 1, SEED + 3]  # candidates 2 and 4 survived, 1 and 3 were pruned
    ranking = scores(engine, candidates, "0.5 0.1")  # the verifier prefers the first survivor: candidate 2

    (delivered, seed, report), delivery = recommit(engine, candidates, ranking=ranking, pick=3, pick_among=4)
    assert seed == SEED + 2 and torch.equal(delivered["samples"], ksampler(engine, wan, SEED + 2))
    assert numbers(pick_line(report)) == [3, 142, 2, 141]  # yours, then the verifier's
    assert (delivery["candidate"], delivery["pick_among"], delivery["num_candidates"]) == (3, 4, 4)

    (kept, kept_seed, _), _ = recommit(engine, candidates, pick=4, mode="keep")
    assert kept_seed == SEED + 3 and torch.equal(kept["samples"], drafts["samples"][1:2])
    (_, verifiers_seed, verifiers_report), _ = recommit(engine, candidates, ranking=ranking)
    assert verifiers_seed == SEED + 1
    assert pick_line(verifiers_report).startswith(WINNER_LINE_PREFIX) and numbers(pick_line(verifiers_report)) == [
        2, 141]
    with pytest.raises(ValueError, match=refusal("mode", "keep", 3, 142, "commit")):  # pruned: commit it instead
        recommit(engine, candidates, pick=3, mode="keep")


@pytest.mark.parametrize("inputs, message", [
    (dict(), refusal("ranking", "pick", 0, 1, 3)),  # pick 0 without a ranking: pick 1 to 3
    (dict(pick=4), refusal("pick", 4, 3, 1, 3)),
    (dict(pick=2, pick_among=8), refusal("pick_among", 8, 3)),
    (dict(wait_for_pick=True), refusal("wait_for_pick", "server")),
])
def test_a_pick_that_cannot_be_delivered_stops_the_run_naming_the_input(engine, searched, inputs, message):
    _, candidates = searched
    with pytest.raises(ValueError, match=message):
        recommit(engine, candidates, **inputs)


def test_only_a_waiting_recommit_runs_again_when_queued_again(engine):
    recommit_node = engine.nodes["CachedSearchRecommit"]
    assert recommit_node.fingerprint_inputs(wait_for_pick=False, pick=0) is False
    assert recommit_node.fingerprint_inputs(wait_for_pick=True, pick=2) is False  # a set pick does not wait
    waiting = recommit_node.fingerprint_inputs(wait_for_pick=True, pick=0)
    assert waiting != waiting  # NaN: never equal to the last run's, so ComfyUI does not serve a cached result
