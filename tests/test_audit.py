"""Audit bookkeeping: resumable store, arm evaluation, tau recommendation, report files (no model)."""

import json

import numpy as np
import pytest

from cachedsearch_core.audit import (
    FULL_ARM, SCORES_FORMAT, ScoreStore, evaluate_arms, markdown_report, recommend_tau, svg_plot,
)
from report_text import line_of, numbers

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


def test_a_torn_last_line_is_tolerated_reported_and_the_store_resumes(store, tmp_path):
    store, full = store
    path = tmp_path / "scores.jsonl"
    with path.open("a") as file:
        file.write('{"arm": "tau 0.10", "prompt": 0, "se')  # the audit stopped mid-write
    reopened = ScoreStore(path)
    assert np.array_equal(reopened.table(FULL_ARM, PROMPTS, SEEDS), full) and not reopened.has("tau 0.10", 0, 0)
    (problem,) = reopened.problems
    assert problem.startswith(f"{path}: 1 unreadable line(s) ignored")
    reopened.add("tau 0.10", 0, 0, 0.5, 1.0, calls=10)
    again = ScoreStore(path)
    assert again.problems == [] and again.has("tau 0.10", 0, 0) and len(again.records) == len(store.records) + 1


def test_a_score_file_written_before_the_header_is_read_and_appended_to_as_it_is(tmp_path):
    path = tmp_path / "scores.jsonl"
    old = [{"arm": FULL_ARM, "prompt": 0, "seed": seed, "score": 0.5 + seed, "seconds": 2.0, "calls": 10,
            "skipped": 0} for seed in SEEDS]
    path.write_text("".join(json.dumps(record) + "\n" for record in old))  # as bench/results of earlier audits
    store = ScoreStore(path)
    assert store.problems == [] and list(store.records.values()) == old
    store.add("tau 0.05", 0, 0, 0.4, 1.0, calls=10, skipped=4)
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines[:len(old)]] == old and len(lines) == len(old) + 1
    assert ScoreStore(path).has("tau 0.05", 0, 0)


def test_a_new_score_file_names_its_format_and_a_foreign_one_is_set_aside(tmp_path):
    path = tmp_path / "scores.jsonl"
    ScoreStore(path).add(FULL_ARM, 0, 0, 0.5, 1.0)
    assert json.loads(path.read_text().splitlines()[0]) == {"format": SCORES_FORMAT.name, "version": 1}
    foreign = '{"format": "cachedsearch calibration rollouts", "version": 1}\n'  # another store's file
    path.write_text(foreign)
    store = ScoreStore(path)
    (aside,) = tmp_path.glob("scores.jsonl.corrupt-*")
    assert store.records == {} and aside.read_text() == foreign
    (problem,) = store.problems
    assert f"moved to {aside.name} beside it" in problem


def test_arms_are_measured_against_the_shared_full_references(store):
    store, _ = store
    results = evaluate_arms(store, {"tau 0.05": 0.05, "tau 0.20": 0.20, "T/2": None}, PROMPTS, SEEDS, bootstrap=200)
    by_arm = {r.arm: r for r in results}
    assert by_arm["tau 0.05"].speedup == pytest.approx(1.6)
    assert by_arm["tau 0.05"].skipped_share == pytest.approx(0.4)
    assert by_arm["tau 0.05"].call_speedup == pytest.approx(10 / 6)
    assert by_arm["tau 0.05"].fidelity.capture_of_means.value == pytest.approx(1.0)
    assert by_arm["tau 0.20"].fidelity.capture_of_means.value < 0
    assert by_arm["tau 0.20"].fidelity.rho_median == pytest.approx(-1.0)
    assert recommend_tau(results) == 0.05
    assert recommend_tau(results, target=1.01) is None


def test_report_and_plot_name_every_arm(store):
    store, _ = store
    results = evaluate_arms(store, {"tau 0.05": 0.05, "tau 0.20": 0.20}, PROMPTS, SEEDS, bootstrap=50)
    text = markdown_report(results)
    assert "| tau 0.05 | 1.60x | 40 % (1.67x) |" in text and "| tau 0.20 | 2.50x | 60 % (2.50x) |" in text
    assert numbers(line_of(text, "Recommended tau")) == [85, 0.05]  # the capture target, the tau recommended
    svg = svg_plot(results)
    assert svg.startswith("<svg") and svg.count("<circle") == 2 and ">tau 0.20</text>" in svg


def test_audit_rollouts_of_an_example_workflow_run_on_the_real_server(comfy_server):
    """The real-weights audit path, on tiny weights with the text encoders swapped for synthetic conditioning."""
    import json
    import pathlib

    from bench.audit import arm_specs, audit_graph, run_audit_graph
    from scripts.graphs import tiny_workflow_variant

    api = json.loads((pathlib.Path(__file__).resolve().parents[1] / "workflows" / "api"
                      / "01 Wan 2.1 (start here).json").read_text())
    workflow = tiny_workflow_variant(api, pooled=False)
    arms = arm_specs([0.5], steps=12)
    graph = audit_graph(workflow, arms["tau 0.5"], "a red ball", seed=7)
    kinds = {node["class_type"] for node in graph.values()}
    assert "CachedSearchRecommit" not in kinds and "SaveVideo" not in kinds and "PreviewAny" in kinds
    full = run_audit_graph(comfy_server, workflow, arms[FULL_ARM], "a red ball", seed=7)
    cached = run_audit_graph(comfy_server, workflow, arms["tau 0.5"], "a red ball", seed=7)
    half = run_audit_graph(comfy_server, workflow, arms["T/2 steps"], "a red ball", seed=7)
    easy = run_audit_graph(comfy_server, workflow, {"easycache": 1.0, "steps": 12}, "a red ball", seed=7)
    assert full[2:] == (12, 0) and half[2:] == (6, 0)
    assert cached[3] > 0 and cached[2] == 12
    assert len({full[0], cached[0], half[0]}) == 3  # the drafts differ from the full rollout
    assert easy[2] == 12


@pytest.mark.slow
def test_the_model_trained_here_follows_its_prompts(engine):
    """The committed ball-and-spot model follows its prompts better than chance: its ball matches the prompt's ball
    far better than the same clip judged against another ball colour. (The spot is drawn for few seeds; README.)"""
    import os
    import pathlib

    import folder_paths

    from scripts import ball_spot_world

    checkpoint = ball_spot_world.TRAINED_MODEL
    link = pathlib.Path(folder_paths.get_folder_paths("diffusion_models")[0]) / checkpoint.name
    if not link.exists():
        os.symlink(checkpoint, link)
    model = engine.one("ModelSamplingSD3", model=engine.one("UNETLoader", unet_name=checkpoint.name,
                                                             weight_dtype="default"), shift=3.0)
    latent = engine.one("EmptyHunyuanLatentVideo", width=64, height=64, length=9, batch_size=1)
    own_ball, other_ball = [], []
    for seed, prompt in enumerate(ball_spot_world.PROMPTS[::3]):
        out = engine.one("KSampler", model=model, seed=seed, steps=20, cfg=4.0, sampler_name="euler",
                         scheduler="simple", positive=[[ball_spot_world.conditioning(prompt), {}]],
                         negative=[[ball_spot_world.conditioning(None), {}]], latent_image=latent, denoise=1.0)
        clip = model.model.latent_format.process_in(out["samples"])[0]
        ball, spot, motion = prompt
        own_ball.append(ball_spot_world.adherence_parts(clip, prompt)[0])
        other = (ball + 1) % ball_spot_world.COLOURS
        other_ball.append(ball_spot_world.adherence_parts(clip, (other, spot if spot != other else ball, motion))[0])
    assert sum(own_ball) / len(own_ball) > sum(other_ball) / len(other_ball) + 0.5, (own_ball, other_ball)
