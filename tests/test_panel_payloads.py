"""Fields of the panels' payloads that the frontend formats and never works out itself (#52): which engine's rows in
Calibrate's table are CachedSearch's own cache's, and whether a search's drafts ran on it (the search's cost fields are
in test_cost.py)."""

import pytest
import torch
from test_calibration import FULL, store_with

from cachedsearch_core.calibration import OUR_ENGINE, CalibrationPlan
from cachedsearch_core.calibration_results import Calibration, EnginesCalibration


def test_calibrates_engine_rows_mark_our_caches_rows():
    store = store_with({0.1: (FULL, 4)})
    plan = CalibrationPlan((0.1, 0.2), 4, 0, 0.9)
    easy = plan.for_engine("EasyCache", (0.2,), "easycache_thresholds")
    for seed, score in enumerate(FULL):
        store.add(easy.arm(0.2), 0, seed, score, seconds=1.0, calls=10, skipped=7)
    for seed, score in enumerate(FULL):
        store.add(plan.arm(0.2), 0, seed, score, seconds=1.0, calls=10, skipped=5)
    rows = EnginesCalibration.from_store(store, [plan, easy], bootstrap=20).engine_rows()
    assert [(row["engine"], row["ours"]) for row in rows] == [(OUR_ENGINE, True), (OUR_ENGINE, True),
                                                              ("EasyCache", False)]


def test_calibrate_says_whether_no_tau_skipped_a_call():
    """Why nothing is recommended: no tau skipped a call, or none that skips keeps the target (the panel words the
    field; the report says it too)."""
    plan = CalibrationPlan((0.1, 0.2), 4, 0, 0.9)
    none_skip = Calibration.from_store(store_with({0.1: (FULL, 0), 0.2: (FULL, 0)}), plan, bootstrap=20)
    assert none_skip.recommended is None and none_skip.none_skipped
    # tau 0.2 skips but reverses the ranking: below the target, so again nothing is recommended, for another reason
    below = Calibration.from_store(store_with({0.1: (FULL, 0), 0.2: (FULL[::-1], 5)}), plan, bootstrap=20)
    assert below.recommended is None and not below.none_skipped
    engines = EnginesCalibration.from_store(store_with({0.1: (FULL, 0), 0.2: (FULL, 0)}), [plan], bootstrap=20)
    assert engines.none_skipped


CACHES = {"CachedSearchApplyCache": dict(mode="adaptive", tau=0.3, warmup_steps=2, cooldown_steps=2, static_interval=2),
          "EasyCache": dict(reuse_threshold=2.0, start_percent=0.0, end_percent=1.0, verbose=False)}


def node_output(engine, node_id, **inputs):
    """The node's whole output (results and UI payload), run as ComfyUI's executor runs a V3 node."""
    with torch.inference_mode():
        return engine.nodes[node_id].PREPARE_CLASS_CLONE({}).execute(**inputs)


@pytest.mark.slow  # in process, a few seconds a case: not in the fast tier
@pytest.mark.parametrize("cache", list(CACHES))
def test_the_sampler_and_recommit_say_whether_the_drafts_ran_on_apply_cache(engine, cache):
    """What the panels advise when the cache skipped too little depends on it: Apply Cache's warmup, cooldown and
    tau, or ComfyUI's cache's threshold."""
    base, positive, negative, latent = engine.tiny_wan_t2v()
    sampled = node_output(engine, "CachedSearchSampler", model=engine.one(cache, model=base, **CACHES[cache]),
                          positive=positive, negative=negative, latent_image=latent, seed=900, num_candidates=2,
                          steps=8, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
    candidates = sampled.result[1]
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="1 0")
    kept = node_output(engine, "CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="keep")
    ours = cache == "CachedSearchApplyCache"
    assert sampled.ui["cachedsearch_cost"][0]["drafted_with_apply_cache"] is ours
    assert kept.ui["cachedsearch_delivery"][0]["cost"]["drafted_with_apply_cache"] is ours
