"""Full compute, checked: ComfyUI's EasyCache and LazyCache explore in front of the Sampler and the commit is still
the stock KSampler bit for bit; a cache CachedSearch does not know is refused; Calibrate's full arm is full compute
whatever cache is on its input; the Sampler and Recommit tell one cost (in process, CPU, tiny random-weight models)."""

import contextlib

import pytest
import torch
from report_text import line_of, numbers, refusal

pytestmark = pytest.mark.slow  # in process, but several seconds a test: not in the fast tier

STEPS = 8
SETTINGS = dict(steps=STEPS, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
SEED = 700
# reuse_threshold 2 skips about half the steps of the tiny Wan (0.3 skips none: its changes are large).
FOREIGN_CACHES = {name: dict(reuse_threshold=2.0, start_percent=0.0, end_percent=1.0, verbose=False)
                  for name in ("EasyCache", "LazyCache")}


@pytest.fixture(scope="module")
def wan(engine):
    return engine.tiny_wan_t2v()


def node_output(engine, node_id, **inputs):
    """The node's whole output (results and UI payload), run as ComfyUI's executor runs a V3 node."""
    with torch.inference_mode():
        return engine.nodes[node_id].PREPARE_CLASS_CLONE({}).execute(**inputs)


def search(engine, model, wan, n=3, **settings):
    _, positive, negative, latent = wan
    return node_output(engine, "CachedSearchSampler", model=model, positive=positive, negative=negative,
                       latent_image=latent, seed=SEED, num_candidates=n, **(SETTINGS | settings))


def stock(engine, wan, seed, model=None):
    base, positive, negative, latent = wan
    return engine.one("KSampler", model=model or base, positive=positive, negative=negative, latent_image=latent,
                      seed=seed, **SETTINGS)["samples"]


def recommit(engine, candidates, scores, **inputs):
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores=scores)
    return node_output(engine, "CachedSearchRecommit", candidates=candidates, ranking=ranking,
                       **(dict(mode="commit") | inputs))


@contextlib.contextmanager
def patch_embeddings_counted(model):
    """Transformer calls counted at the patch embedding, independently of the extension's own meter."""
    calls = []
    handle = model.model.diffusion_model.patch_embedding.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        yield calls
    finally:
        handle.remove()


@pytest.mark.parametrize("cache", list(FOREIGN_CACHES))
def test_a_comfyui_cache_explores_and_the_commit_is_the_stock_ksampler(engine, wan, cache):
    cached = engine.one(cache, model=wan[0], **FOREIGN_CACHES[cache])
    with patch_embeddings_counted(wan[0]) as calls:
        drafts, candidates, report = search(engine, cached, wan).result
    searched = len(calls)
    assert not torch.equal(drafts["samples"][1:2], stock(engine, wan, SEED + 1))  # the drafts are cached
    skipped = [draft.calls_skipped for draft in candidates.drafts]
    assert all(count > 0 for count in skipped)
    # Asked in the unit computed: a LazyCache skip of a whole model evaluation is one (batched) call.
    assert all(draft.calls_computed + draft.calls_skipped == STEPS for draft in candidates.drafts)
    assert sum(draft.calls_computed for draft in candidates.drafts) == searched  # our count, not the engine's log
    assert f"3 candidate(s), {cache} (reuse_threshold 2)" in report.splitlines()[0]
    assert f"{skipped[1]}/{STEPS} (" in report.splitlines()[3]

    # Recommit with its model unconnected detaches the engine: the commit is the stock KSampler bit for bit.
    with patch_embeddings_counted(wan[0]) as calls:
        output = recommit(engine, candidates, "0.1 0.3 0.2")
    delivered, seed, _ = output.result
    assert seed == SEED + 1 and torch.equal(delivered["samples"], stock(engine, wan, SEED + 1))
    assert len(calls) == STEPS  # cond and uncond batched: one call per step

    # The pick commit likewise, for a candidate the verifier did not choose.
    (picked, picked_seed, _) = recommit(engine, candidates, "0.1 0.3 0.2", pick=3, pick_among=3).result
    assert picked_seed == SEED + 2 and torch.equal(picked["samples"], stock(engine, wan, SEED + 2))


@pytest.mark.parametrize("cache", list(FOREIGN_CACHES))
def test_a_comfyui_cache_explores_for_the_advanced_sampler(engine, wan, cache):
    model, positive, negative, latent = wan
    sampler = engine.one("KSamplerSelect", sampler_name="euler")
    sigmas = engine.one("BasicScheduler", model=model, scheduler="simple", steps=STEPS, denoise=1.0)
    cached = engine.one(cache, model=model, **FOREIGN_CACHES[cache])
    guider = engine.one("CFGGuider", model=cached, positive=positive, negative=negative, cfg=5.0)
    _, candidates, _ = engine.run("CachedSearchSamplerAdvanced", guider=guider, sampler=sampler, sigmas=sigmas,
                                  latent_image=latent, seed=SEED, num_candidates=2)
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    delivered, _, _ = recommit(engine, candidates, "0 1").result
    stock_guider = engine.one("CFGGuider", model=model, positive=positive, negative=negative, cfg=5.0)
    reference = engine.run("SamplerCustomAdvanced", noise=engine.one("RandomNoise", noise_seed=SEED + 1),
                           guider=stock_guider, sampler=sampler, sigmas=sigmas, latent_image=latent)[0]["samples"]
    assert torch.equal(delivered["samples"], reference)


def test_easycache_on_both_experts_explores_and_the_commit_is_the_official_graph(engine, wan):
    from scripts.tiny_models import WAN22_A14B_FILES

    _, positive, negative, _ = wan
    latent = engine.one("EmptyHunyuanLatentVideo", width=32, height=32, length=5, batch_size=1)
    high, low = (engine.one("ModelSamplingSD3", shift=5.0, model=engine.one("UNETLoader", unet_name=name,
                                                                              weight_dtype="default"))
                 for name in WAN22_A14B_FILES["t2v"])
    cached_high, cached_low = (engine.one("EasyCache", model=model, **FOREIGN_CACHES["EasyCache"])
                               for model in (high, low))
    experts = dict(steps=STEPS, split_step=4, cfg=3.5)
    _, candidates, report = engine.run("CachedSearchSamplerExperts", model_high=cached_high, model_low=cached_low,
                                       positive=positive, negative=negative, latent_image=latent, seed=SEED,
                                       num_candidates=2, sampler_name="euler", scheduler="simple", **experts)
    assert "high noise: EasyCache (reuse_threshold 2)" in report
    assert sum(draft.calls_skipped for draft in candidates.drafts) > 0
    assert all(draft.calls_computed + draft.calls_skipped == STEPS for draft in candidates.drafts)
    delivered, seed, _ = recommit(engine, candidates, "0 1").result
    reference = engine.two_expert_graph(high, low, positive, negative, latent, seed, **experts)
    assert torch.equal(delivered["samples"], reference["samples"])


def test_easycache_explores_for_the_distributed_sampler_and_its_commit_is_the_stock_ksampler(engine, wan):
    base, positive, negative, latent = wan
    cached = engine.one("EasyCache", model=base, **FOREIGN_CACHES["EasyCache"])
    _, candidates, report, _ = node_output(engine, "CachedSearchDistributedSampler", model=cached, positive=positive,
                                           negative=negative, latent_image=latent, seed=SEED, num_candidates=2,
                                           worker_timeout=60.0, **SETTINGS).result
    assert "EasyCache (reuse_threshold 2)" in report and "no workers" in report
    assert all(draft.calls_skipped > 0 for draft in candidates.drafts)
    delivered, seed, _ = recommit(engine, candidates, "0 1").result
    assert seed == SEED + 1 and torch.equal(delivered["samples"], stock(engine, wan, SEED + 1))


def pruning_plan(engine):
    from scripts.tiny_models import WAN21_VAE_FILE

    verifier = engine.one("CachedSearchLoadImageReward", ckpt_name="ImageReward.pt", dtype="fp32")
    return engine.one("CachedSearchPruningPlan", vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE),
                      verifier=verifier, prompt="a red ball", keep=2, prune_fraction=0.5, prune_step=STEPS // 2,
                      preview_frames=2)


def budget_plan(engine):
    """Full best-of-3 in transformer calls: the drafts may spend two full rollouts' calls, the recommit the third."""
    return engine.one("CachedSearchBudget", budget_rollouts=3, budget_unit="transformer calls", max_candidates=8)


PLANS = {"pruning": pruning_plan, "budget": budget_plan}  # by the sampler input they connect to
COST_CASES = {"EasyCache": ("EasyCache", None), "LazyCache": ("LazyCache", None),
              "pruned, EasyCache": ("EasyCache", "pruning"), "budget, EasyCache": ("EasyCache", "budget"),
              "free commit, no cache": (None, None)}


@pytest.mark.parametrize("case", list(COST_CASES))
def test_the_sampler_and_recommit_tell_one_cost_in_transformer_calls(engine, wan, case):
    cache, plan = COST_CASES[case]
    model = wan[0] if cache is None else engine.one(cache, model=wan[0], **FOREIGN_CACHES[cache])
    plans = {plan: PLANS[plan](engine)} if plan else {}
    with patch_embeddings_counted(wan[0]) as calls:
        sampled = search(engine, model, wan, **plans)
        candidates = sampled.result[1]
        committed = recommit(engine, candidates, " ".join(str(index % 3) for index in range(len(candidates))))
        counted = len(calls)
        stock(engine, wan, SEED)
        full_rollout = len(calls) - counted
    width = 3
    if plan == "budget":
        width, outcome = len(candidates), candidates.budget
        assert outcome.stopped_draft_cost is not None and not outcome.stopped_draft_skipped  # stopped in a call
        # The budget stops a draft at the first transformer block of the call that would overrun it (the meter's
        # hook), after that call's patch embedding ran: this count saw the call, the product rightly does not (no
        # block of it was computed).
        counted -= 1
    (cost,) = sampled.ui["cachedsearch_cost"]
    (delivery,) = committed.ui["cachedsearch_delivery"]
    delivered = delivery["cost"]  # the Sampler's cost model, with the commit that ran
    assert cost["calls_ratio_with_commit"] == delivered["calls_ratio_with_commit"] == \
        pytest.approx(counted / (width * full_rollout))
    if plan != "budget":  # a best-of-3 budget spends 3 full rollouts' calls: a ratio of 1 whenever it drafts 3
        assert (delivered["calls_ratio_with_commit"] == 1) is (cache is None)  # a free commit: full best-of-3
    # the Sampler's panel names the cache the drafts ran with, ComfyUI's own included (#41 item 6)
    assert cost["cache"] == candidates.cache_description
    assert cost["cache"].startswith(f"{cache} (reuse_threshold ") if cache else cost["cache"].startswith("no cache")
    report = committed.result[2]
    commit_calls = 0 if cache is None else full_rollout
    assert f"with the commit ({commit_calls}) {counted} ({100 * counted / (width * full_rollout):.1f} %)" in report
    if plan == "budget":  # the budget's measured total is the cost model's, counted here too: the recommit's
        # predicted and measured calls, the search's predicted and measured total, its share of the budget
        measured = numbers(line_of(report, "budget: recommit"))
        assert (measured[1], measured[3]) == (full_rollout, counted), measured


def skipping_every_other_call(model):
    """A clone of ``model`` with a keyed DIFFUSION_MODEL wrapper CachedSearch does not know, which skips every
    other transformer call by returning the previous output."""
    import comfy.patcher_extension

    previous = []

    def skip(executor, *args, **kwargs):
        if len(previous) % 2 == 1:
            previous.append(previous[-1])
            return previous[-1]
        previous.append(executor(*args, **kwargs))
        return previous[-1]

    skipping = model.clone()
    skipping.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "test_skip_every_other", skip)
    return skipping


def test_a_cache_it_does_not_know_is_refused_unless_the_plain_model_is_connected(engine, wan):
    drafts, candidates, _ = search(engine, skipping_every_other_call(wan[0]), wan, n=2).result
    assert [draft.calls_skipped for draft in candidates.drafts] == [STEPS // 2] * 2
    # computed 4 of 8 calls; the wrapper that skipped; the input to connect the plain model to
    with pytest.raises(ValueError, match=refusal("model", "4 of the 8", "diffusion_model/test_skip_every_other",
                                                 "model")):
        recommit(engine, candidates, "1 0")
    delivered, _, _ = recommit(engine, candidates, "1 0", model=wan[0]).result
    assert torch.equal(delivered["samples"], stock(engine, wan, SEED))


def test_calibrate_refuses_a_full_arm_that_a_cache_it_does_not_know_skipped(engine, wan):
    """Calibrate's full arm is checked as the commit is (``RunHooks.full_compute``): a cache CachedSearch does not
    know, left on the model, is named with the fix instead of measured as full compute."""
    from scripts.tiny_models import WAN21_VAE_FILE

    model, positive, negative, latent = wan
    # 4 of 8 calls computed, the wrapper that skipped, and the fix: Calibrate applies its own cache
    with pytest.raises(ValueError, match=refusal("model", "4 of the 8", "test_skip_every_other", "Calibrate")):
        engine.output("CachedSearchCalibrate", model=skipping_every_other_call(model), positive=positive,
                      negative=negative, latent_image=latent, vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE),
                      verifier=FrameRecorder(), prompt="a red ball", first_seed=SEED, seeds=2, taus="0.5",
                      capture_target=0.9, warmup_steps=1, cooldown_steps=1, frames_per_candidate=4, **SETTINGS)


class FrameRecorder:
    """A verifier that records the frames it is given and scores them by their mean."""

    name = "frame recorder"

    def __init__(self):
        self.frames = []

    def score(self, prompt, frames):
        self.frames.append(frames.clone())
        return frames.mean(dim=(1, 2, 3))


def test_calibrates_full_arm_is_full_compute_with_easycache_on_its_input(engine, wan):
    from cachedsearch_core.judge import FrameJudge
    from scripts.tiny_models import WAN21_VAE_FILE

    model, positive, negative, latent = wan
    vae = engine.one("VAELoader", vae_name=WAN21_VAE_FILE)
    recorder, seeds = FrameRecorder(), 2
    engine.output("CachedSearchCalibrate", model=engine.one("EasyCache", model=model, **FOREIGN_CACHES["EasyCache"]),
                  positive=positive, negative=negative, latent_image=latent, vae=vae, verifier=recorder,
                  prompt="a red ball", first_seed=SEED, seeds=seeds, taus="0.5", capture_target=0.9, warmup_steps=1,
                  cooldown_steps=1, frames_per_candidate=4, **SETTINGS)
    full_arm = recorder.frames[1 : 1 + seeds]  # after the check on the input latent
    expected = FrameRecorder()
    for seed in range(SEED, SEED + seeds):
        FrameJudge(expected, "a red ball", 4).score(engine.one("VAEDecode", samples={"samples": stock(
            engine, wan, seed)}, vae=vae))
    assert all(torch.equal(got, want) for got, want in zip(full_arm, expected.frames, strict=True))
    cached = stock(engine, wan, SEED, model=engine.one("EasyCache", model=model, **FOREIGN_CACHES["EasyCache"]))
    assert not torch.equal(cached, stock(engine, wan, SEED))  # so the full arm would differ with EasyCache left on


@pytest.mark.parametrize("cache", list(FOREIGN_CACHES))
def test_calibrating_a_comfyui_cache_measures_the_stock_ksampler_against_that_cache(engine, wan, cache):
    """Calibrate with the engine's thresholds: the full arm is the stock KSampler (full compute, checked), the
    engine's arm is a KSampler on the engine's own node, and its table and threshold come out beside our tau's."""
    from cachedsearch_core.judge import FrameJudge
    from scripts.tiny_models import WAN21_VAE_FILE

    model, positive, negative, latent = wan
    vae = engine.one("VAELoader", vae_name=WAN21_VAE_FILE)
    recorder, seeds = FrameRecorder(), 2
    threshold = FOREIGN_CACHES[cache]["reuse_threshold"]
    output = engine.output(
        "CachedSearchCalibrate", model=model, positive=positive, negative=negative, latent_image=latent, vae=vae,
        verifier=recorder, prompt="a red ball", first_seed=SEED, seeds=seeds, taus="0.5", capture_target=0.5,
        warmup_steps=1, cooldown_steps=1, frames_per_candidate=4, **{f"{cache.lower()}_thresholds": str(threshold)},
        **SETTINGS)
    # after the check on the input latent: the full arm, our tau's arm, the engine's arm, seed by seed
    full_arm, engine_arm = recorder.frames[1 : 1 + seeds], recorder.frames[1 + 2 * seeds :]
    cached_model = engine.one(cache, model=model, reuse_threshold=threshold, start_percent=0.15, end_percent=0.95,
                              verbose=False)
    for arm, sampled_on in ((full_arm, None), (engine_arm, cached_model)):
        expected = FrameRecorder()
        for seed in range(SEED, SEED + seeds):
            FrameJudge(expected, "a red ball", 4).score(engine.one("VAEDecode", samples={"samples": stock(
                engine, wan, seed, model=sampled_on)}, vae=vae))
        assert all(torch.equal(got, want) for got, want in zip(arm, expected.frames, strict=True))
    assert not torch.equal(engine_arm[0], full_arm[0])  # the engine skipped calls: its drafts differ
    (shown,) = output.ui["cachedsearch_calibration"]
    (row,) = [row for row in shown["engine_rows"] if row["engine"] == cache]
    assert row["tau"] == threshold and 0 < row["computed_calls"] < row["calls"] == seeds * STEPS
    tau, report, chart, easycache, lazycache = output.result
    assert {"EasyCache": easycache, "LazyCache": lazycache}[cache] in (0.0, threshold)
    # the report's section on the fewest calls names the engine the payload gives as fastest
    assert f"{cache}:\n| reuse_threshold |" in report
    assert line_of(report, "Fewest computed calls").split(": ", 1)[1].startswith(shown["fastest"]["engine"])
    assert f"x (1 tau + 1 {cache} reuse_threshold) = 6 rollouts" in report
    assert tuple(chart.shape) == (1, 800, 640, 3)


def one_call_per_cond(model):
    """A clone of ``model`` whose evaluations run cond and uncond as two transformer calls (as ComfyUI does when
    they cannot be batched), through a CALC_COND_BATCH wrapper."""
    import comfy.patcher_extension

    def unbatched(executor, model, conds, x_in, timestep, model_options):
        return [executor(model, [cond], x_in, timestep, model_options)[0] for cond in conds]

    split = model.clone()
    split.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.CALC_COND_BATCH, "test_one_call_per_cond", unbatched)
    return split


def test_lazycache_skips_are_counted_in_the_calls_of_the_evaluation_it_reuses(engine, wan):
    """Two calls an evaluation: each evaluation LazyCache skips whole skips two calls, counted as such."""
    cached = engine.one("LazyCache", model=one_call_per_cond(wan[0]), **FOREIGN_CACHES["LazyCache"])
    with patch_embeddings_counted(wan[0]) as calls:
        _, candidates, _ = search(engine, cached, wan, n=2).result
    assert all(draft.calls_skipped > 0 and draft.calls_skipped % 2 == 0 for draft in candidates.drafts)
    assert all(draft.calls_computed + draft.calls_skipped == 2 * STEPS for draft in candidates.drafts)
    assert sum(draft.calls_computed for draft in candidates.drafts) == len(calls)
