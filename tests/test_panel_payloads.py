"""Fields of the panels' payloads that the frontend formats and never works out itself (#52): which engine's rows in
Calibrate's table are CachedSearch's own cache's (the search's cost fields are in test_cost.py)."""

from test_calibration import FULL, store_with

from cachedsearch_core.calibration import OUR_ENGINE, CalibrationPlan
from cachedsearch_core.calibration_results import EnginesCalibration


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
