"""No wasted recommit: a delivered draft that computed every transformer call is the full-compute result, so
Recommit delivers it without sampling again, bit-exact to the stock graph (in process, CPU, tiny models)."""

import pytest
import torch
from conftest import InProcessComfy

from cachedsearch_core.search_report import COMMIT_FREE_DELIVERY, COMMIT_FREE_LINE, DELIVERED_BY
from report_text import line_of, numbers
from scripts.tiny_models import WAN21_VAE_FILE, WAN22_A14B_FILES, WAN22_A14B_LORA_FILES

pytestmark = pytest.mark.slow  # in process, but several seconds a test: not in the fast tier

STEPS = 6
SETTINGS = dict(steps=STEPS, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
SEED = 500
FREE = COMMIT_FREE_LINE
# Warmup and cooldown cover all 6 steps: the adaptive cache never skips.
CACHES_THAT_SKIP_NOTHING = {
    "cache off": dict(mode="off", tau=0.5, warmup_steps=1, cooldown_steps=1, static_interval=2),
    "warmup and cooldown cover every step": dict(mode="adaptive", tau=100.0, warmup_steps=3, cooldown_steps=3,
                                                 static_interval=2),
    "no cache": None,
}
FOUR_STEP = dict(steps=4, split_step=2, cfg=1.0)


@pytest.fixture(scope="module")
def wan(engine):
    return engine.tiny_wan_t2v()


def with_cache(engine, model, cache):
    return model if cache is None else engine.one("CachedSearchApplyCache", model=model, **cache)


def search(engine, model, wan, n=3, **settings):
    _, positive, negative, latent = wan
    return engine.run("CachedSearchSampler", model=model, positive=positive, negative=negative, latent_image=latent,
                      seed=SEED, num_candidates=n, **(SETTINGS | settings))


def stock(engine, wan, seed, **settings):
    model, positive, negative, latent = wan
    return engine.one("KSampler", model=model, positive=positive, negative=negative, latent_image=latent, seed=seed,
                      **(SETTINGS | settings))["samples"]


def recommit(engine, candidates, scores, **inputs):
    """The Recommit node's whole output (results and UI payload), run as ComfyUI's executor runs a V3 node."""
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores=scores)
    with torch.inference_mode():
        return engine.nodes["CachedSearchRecommit"].PREPARE_CLASS_CLONE({}).execute(
            candidates=candidates, ranking=ranking, mode="commit", **inputs)


@pytest.mark.parametrize("cache", list(CACHES_THAT_SKIP_NOTHING))
def test_a_draft_that_skipped_nothing_is_delivered_without_sampling_again(engine, wan, cache):
    counted, calls = InProcessComfy.counting_transformer_calls(wan[0])
    drafts, candidates, _ = search(engine, with_cache(engine, counted, CACHES_THAT_SKIP_NOTHING[cache]), wan)
    assert all(draft.calls_skipped == 0 for draft in candidates.drafts)
    calls.clear()
    output = recommit(engine, candidates, "0.1 0.3 0.2")
    delivered, seed, report = output.result
    assert calls == []  # nothing was sampled again
    assert seed == SEED + 1
    assert torch.equal(delivered["samples"], stock(engine, wan, SEED + 1))
    assert torch.equal(delivered["samples"], drafts["samples"][1:2])
    assert delivered["samples"].data_ptr() != drafts["samples"].data_ptr()  # a copy: the drafts output stays intact
    assert FREE in report
    assert f"winner: candidate 2, seed 501, delivered by {COMMIT_FREE_DELIVERY}" in report.splitlines()
    (delivery,) = output.ui["cachedsearch_delivery"]
    cost = delivery["cost"]
    assert (cost["commit_free"], cost["commit_calls"], cost["commit_seconds"]) == (True, 0, 0.0)
    # Every draft is a full rollout and the commit costs nothing: the search costs what full best-of-3 costs.
    assert cost["calls_ratio_with_commit"] == 1.0
    assert cost["seconds_ratio_with_commit"] == pytest.approx(1.0)
    # the seconds line: the search's, a full rollout's (the drafts that skipped nothing measured it), 100.0 % of
    # full best-of-3, the commit's 0.00 s and 100.0 % with it
    seconds = line_of(report, "seconds")
    assert numbers(seconds)[2:6] == [100.0, 3, 0.0, 100.0] and "(the commit)" not in seconds, seconds


def test_a_single_skipped_call_means_a_real_commit(engine, wan):
    # cfg 1 runs the positive branch only: one call per step; steps 0-1 warm up, 3-5 cool down, step 2 is skipped.
    one_skip = dict(mode="adaptive", tau=100.0, warmup_steps=2, cooldown_steps=3, static_interval=2)
    counted, calls = InProcessComfy.counting_transformer_calls(wan[0])
    drafts, candidates, _ = search(engine, with_cache(engine, counted, one_skip), wan, cfg=1.0)
    assert [(draft.calls_computed, draft.calls_skipped) for draft in candidates.drafts] == [(STEPS - 1, 1)] * 3
    calls.clear()
    delivered, seed, report = recommit(engine, candidates, "0.1 0.3 0.2").result
    assert len(calls) == STEPS  # sampled again at full compute
    reference = stock(engine, wan, seed, cfg=1.0)
    assert torch.equal(delivered["samples"], reference)
    assert not torch.equal(drafts["samples"][1:2], reference)  # the one skipped call changed the draft
    assert FREE not in report and f"delivered by {DELIVERED_BY['commit']}" in report


def test_a_model_connected_to_recommit_is_sampled_unless_it_is_the_drafts_own(engine, wan):
    cached = with_cache(engine, wan[0], CACHES_THAT_SKIP_NOTHING["cache off"])
    _, candidates, _ = search(engine, cached, wan, n=2)
    other, calls = InProcessComfy.counting_transformer_calls(wan[0])
    delivered, _, report = recommit(engine, candidates, "1 0", model=other).result
    assert len(calls) == STEPS and FREE not in report
    assert torch.equal(delivered["samples"], stock(engine, wan, SEED))
    _, _, report = recommit(engine, candidates, "1 0", model=cached).result
    assert FREE in report


def four_step_experts(engine):
    """The A14B T2V experts with the lightx2v 4-step LoRAs, shift 5, as the 4-step template loads them."""
    experts = []
    for file_name, lora_name in zip(WAN22_A14B_FILES["t2v"], WAN22_A14B_LORA_FILES["t2v"]):
        model = engine.one("UNETLoader", unet_name=file_name, weight_dtype="default")
        model = engine.one("LoraLoaderModelOnly", model=model, lora_name=lora_name, strength_model=1.0)
        experts.append(engine.one("ModelSamplingSD3", model=model, shift=5.0))
    return experts


@pytest.mark.parametrize("prune_step", [None, 2, 1])  # unpruned; at the expert switch; inside the high-noise expert
def test_the_four_step_path_commits_free_unless_pruning_split_a_stage(engine, wan, prune_step):
    _, positive, negative, _ = wan
    latent = engine.one("EmptyHunyuanLatentVideo", width=32, height=32, length=9, batch_size=1)
    high, low = four_step_experts(engine)
    counted_high, calls = InProcessComfy.counting_transformer_calls(high)
    pruning = None
    if prune_step is not None:
        verifier = engine.one("CachedSearchLoadImageReward", ckpt_name="ImageReward.pt", dtype="fp32")
        pruning = engine.one("CachedSearchPruningPlan", vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE),
                             verifier=verifier, prompt="a red ball", keep=2, prune_fraction=0.5,
                             prune_step=prune_step, preview_frames=2)
    _, candidates, _ = engine.run("CachedSearchSamplerExperts", model_high=counted_high, model_low=low,
                                  positive=positive, negative=negative, latent_image=latent, seed=SEED,
                                  num_candidates=3, sampler_name="euler", scheduler="simple", pruning=pruning,
                                  **FOUR_STEP)
    calls.clear()
    delivered, seed, report = recommit(engine, candidates, "0.2 0.7" if pruning else "0.2 0.7 0.1").result
    reference = engine.two_expert_graph(high, low, positive, negative, latent, seed, **FOUR_STEP)
    assert torch.equal(delivered["samples"], reference["samples"])
    split = prune_step == 1
    assert (FREE in report) is not split
    assert len(calls) == (2 if split else 0)  # a split draft is sampled again (the high-noise expert's 2 steps)


def test_drafts_from_another_machine_are_committed_here(engine, wan):
    nodes = engine.extension.nodes
    _, candidates, _ = search(engine, with_cache(engine, wan[0], CACHES_THAT_SKIP_NOTHING["cache off"]), wan, n=2)
    fields = {name: getattr(candidates, name) for name in ("recipe", "drafts", "draft_latents", "cache_description",
                                                           "latent_entries")}
    gathered = nodes.distributed_search.DistributedCandidates(**fields, drafted_by=(nodes.distributed_setup.MASTER,
                                                                                    "worker-1"))
    assert gathered.draft_is_full_compute(0) and not gathered.draft_is_full_compute(1)


def test_call_budget_spends_every_rollout_on_drafts_when_the_commit_is_free(engine, wan):
    cached = with_cache(engine, wan[0], CACHES_THAT_SKIP_NOTHING["cache off"])
    budget = engine.one("CachedSearchBudget", budget_rollouts=3, budget_unit="transformer calls", max_candidates=8)
    drafts, candidates, _ = search(engine, cached, wan, budget=budget)
    outcome = candidates.budget
    assert outcome.full_cost == STEPS  # cond and uncond are batched into one call per step
    assert outcome.commit_free and outcome.width == 3  # not 2: no full recommit to reserve
    assert outcome.predicted_total == 3 * outcome.full_cost == outcome.budget
    delivered, _, report = recommit(engine, candidates, "0 0 1").result
    assert torch.equal(delivered["samples"], stock(engine, wan, SEED + 2))
    # the recommit predicted and measured 0 calls; the search's total predicted 3 full rollouts
    assert numbers(line_of(report, "budget: recommit"))[:3] == [0, 0, 3 * outcome.full_cost]
