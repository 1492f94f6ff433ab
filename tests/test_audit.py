"""Audit bookkeeping: resumable store, arm evaluation, tau recommendation, report files (no model)."""

import numpy as np
import pytest

from cachedsearch_core.audit import FULL_ARM, ScoreStore, evaluate_arms, markdown_report, recommend_tau, svg_plot

PROMPTS, SEEDS = range(6), range(4)


def fill(store, arm, scores, seconds, skipped=0, calls=10):
    for p in PROMPTS:
        for s in SEEDS:
            store.add(arm, p, s, scores[p][s], seconds, calls=calls, skipped=skipped)


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(0)
    full = rng.normal(size=(6, 4))
    store = ScoreStore(tmp_path / "scores.jsonl")
    fill(store, FULL_ARM, full, seconds=2.0)
    fill(store, "tau 0.05", full + 0.01 * rng.normal(size=(6, 4)), seconds=1.25, skipped=4)   # near-exact
    fill(store, "tau 0.20", -full, seconds=0.8, skipped=6)  # reversed ranking: captures nothing
    fill(store, "T/2", full[:, ::-1] * 0 + full.mean(), seconds=1.0)  # constant scores: picks seed 0
    return store, full


def test_store_resumes_from_its_file(store, tmp_path):
    store, full = store
    reopened = ScoreStore(tmp_path / "scores.jsonl")
    assert reopened.has(FULL_ARM, 5, 3) and not reopened.has(FULL_ARM, 6, 0)
    assert np.array_equal(reopened.table(FULL_ARM, PROMPTS, SEEDS), full)
    with pytest.raises(KeyError, match="arm 'tau 0.10' lacks 24 rollouts"):
        reopened.table("tau 0.10", PROMPTS, SEEDS)


def test_arms_are_measured_against_the_shared_full_references(store):
    store, _ = store
    results = evaluate_arms(store, {"tau 0.05": 0.05, "tau 0.20": 0.20, "T/2": None}, PROMPTS, SEEDS, bootstrap=200)
    by_arm = {r.arm: r for r in results}
    assert by_arm["tau 0.05"].speedup == pytest.approx(1.6)
    assert by_arm["tau 0.05"].skipped_share == pytest.approx(0.4)
    assert by_arm["tau 0.05"].fidelity.capture_of_means.value == pytest.approx(1.0)
    assert by_arm["tau 0.20"].fidelity.capture_of_means.value < 0
    assert by_arm["tau 0.20"].fidelity.rho_median == pytest.approx(-1.0)
    assert recommend_tau(results) == 0.05
    assert recommend_tau(results, target=1.01) is None


def test_report_and_plot_name_every_arm(store):
    store, _ = store
    results = evaluate_arms(store, {"tau 0.05": 0.05, "tau 0.20": 0.20}, PROMPTS, SEEDS, bootstrap=50)
    text = markdown_report(results)
    assert "| tau 0.05 | 1.60x | 40 % |" in text and "| tau 0.20 | 2.50x | 60 % |" in text
    assert "Recommended tau* (most aggressive tau with capture >= 85 %): 0.05" in text
    svg = svg_plot(results)
    assert svg.startswith("<svg") and svg.count("<circle") == 2 and ">tau 0.20</text>" in svg
