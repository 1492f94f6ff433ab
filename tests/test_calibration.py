"""Calibration bookkeeping without a model: the plan's checks, the seed bootstrap, the table, chart and memory."""

import dataclasses
import json
import math
import os
import re

import numpy as np
import pytest

from cachedsearch_core.audit import FULL_ARM, ScoreStore, tau_arm
from cachedsearch_core.calibration import (
    CalibrationPlan,
    cache_window_problem,
    parse_taus,
    prompt_lines,
    skippable_steps,
    sweep_rollouts,
)
from cachedsearch_core.calibration_experts import (
    HIGH_NOISE,
    LOW_NOISE,
    ExpertsCalibration,
    ExpertsPlan,
    expert_arm_prefix,
    together_arm,
)
from cachedsearch_core.calibration_memory import (
    NOT_A_MEMORY,
    WHAT_SETTING_ASIDE_LOSES,
    CalibrationMemory,
    describe_remembered,
    experts_setup_key,
    setup_key,
)
from cachedsearch_core.calibration_results import Calibration, EnginesCalibration
from cachedsearch_core.combine import VerifierCombination
from cachedsearch_core.cost_formulas import MEASURED_CACHED_SHARE
from cachedsearch_core.fidelity import PROMPT_BOOTSTRAP, SEED_BOOTSTRAP, ranking_fidelity
from report_text import line_of, numbers, refusal

FULL = [0.2, 0.9, 0.5, 0.4]


@pytest.mark.parametrize("taus, seeds, target, message", [
    ((), 4, 0.9, "taus: the list is empty"),
    ((0.1, 0.05), 4, 0.9, refusal("taus", '"0.1 0.05"', '"0.05 0.1"')),  # the list got, then sorted
    ((0.1, 0.1), 4, 0.9, "not strictly increasing"),
    ((0.1, 2.5), 4, 0.9, "taus: 2.5 in \"0.1 2.5\" is outside Apply Cache's range 0 to 2"),
    ((-0.1, 0.1), 4, 0.9, "taus: -0.1 .* outside"),
    ((0.1,), 1, 0.9, "seeds: got 1; a ranking needs at least 2 seeds"),
    ((0.1,), 4, 0.0, refusal("capture_target", 0.0, 0, 1)),
    ((0.1,), 4, 1.5, r"capture_target: got 1.5"),
])
def test_bad_plans_name_the_input_the_value_and_the_fix(taus, seeds, target, message):
    with pytest.raises(ValueError, match=message):
        CalibrationPlan(taus, seeds, 0, target)


def test_the_cost_counts_its_thresholds_in_the_singular_for_one():
    assert CalibrationPlan((0.1,), seeds=4).thresholds_label == "1 tau"
    assert CalibrationPlan((0.1, 0.2), seeds=4).thresholds_label == "2 taus"
    assert "cached rollouts x 1 tau" in CalibrationPlan((0.1,), seeds=4).cost(10)
    experts_cost = ExpertsPlan.create((0.1,), (0.1, 0.2), 2, 0, 0.9).cost(10)
    assert re.search(rf"\b1 {HIGH_NOISE} tau\b", experts_cost) and f"2 {LOW_NOISE} taus" in experts_cost


def test_taus_parse_from_spaces_or_commas_and_reject_words():
    assert parse_taus("0.05, 0.1  0.2\n0.3") == (0.05, 0.1, 0.2, 0.3)
    with pytest.raises(ValueError, match="taus: got '0.1 fast'; write numbers"):
        parse_taus("0.1 fast")
    one = sweep_rollouts([CalibrationPlan((0.1, 0.2), seeds=4)])
    assert (one.rollouts, one.full_rollouts, one.at_most) == (12, 4, False)
    assert one.full_rollout_times == 4 + 8 * MEASURED_CACHED_SHARE  # the cost model's figure for a cached rollout
    assert CalibrationPlan((0.1, 0.2), seeds=4).cost(10) == one.text(10)
    assert [12, 120, 12, 4 + 8 * MEASURED_CACHED_SHARE] == numbers(one.text(10).split("=", 1)[1])[:4]
    many = sweep_rollouts([CalibrationPlan((0.1, 0.2), seeds=8, prompts=25)])
    assert (many.rollouts, many.full_rollouts) == (25 * 8 * 3, 25 * 8)
    assert many.full_rollout_times == 200 + 400 * MEASURED_CACHED_SHARE
    assert numbers(many.breakdown) == [25, 8, 8, 2]  # prompts x (seeds full + seeds cached x taus)
    measured = dataclasses.replace(one, cached_share=0.25)  # a setup measured at 4x
    assert measured.full_rollout_times == 4 + 8 * 0.25 and numbers(measured.line())[-3:-1] == [4 + 8 * 0.25, 4]


def test_seed_bootstrap_gives_intervals_on_one_prompt():
    cached = [[0.45, 0.8, 0.3, 0.5]]  # same winner, the others reordered
    report = ranking_fidelity([FULL], cached, bootstrap=300, resample=SEED_BOOTSTRAP)
    assert report.resampled == SEED_BOOTSTRAP
    assert report.top1.value == 1.0 and report.capture_of_means.value == pytest.approx(1.0)
    assert report.rho.value == pytest.approx(0.4)
    assert report.rho.low < report.rho.value  # resampled seed sets disagree: the interval is not a point
    prompt_bootstrap = ranking_fidelity([FULL], cached, bootstrap=300)
    assert prompt_bootstrap.rho.low == prompt_bootstrap.rho.high == pytest.approx(0.4)  # one prompt: degenerate


def store_with(taus_cached: dict, seeds=(0, 1, 2, 3)) -> ScoreStore:
    store = ScoreStore(None)
    for seed, score in zip(seeds, FULL):
        store.add(FULL_ARM, 0, seed, score, seconds=2.0, calls=10, skipped=0)
    for tau, (scores, skipped) in taus_cached.items():
        for seed, score in zip(seeds, scores):
            store.add(tau_arm(tau), 0, seed, score, seconds=1.0, calls=10, skipped=skipped)
    return store


def test_the_table_recommends_the_largest_tau_that_meets_the_target():
    store = store_with({0.05: (FULL, 2), 0.1: ([0.2, 0.8, 0.85, 0.4], 4), 0.2: ([0.9, 0.1, 0.5, 0.4], 6)})
    calibration = Calibration.from_store(store, CalibrationPlan((0.05, 0.1, 0.2), 4, 0, 0.9), bootstrap=200)
    # tau 0.1 picks seed 2 (0.5): gain 0.5 - 0.5 = 0 of best gain 0.4 -> capture 0; tau 0.2 picks seed 0
    assert calibration.recommended_tau == 0.05
    rows = calibration.rows()
    assert [row["tau"] for row in rows] == [0.05, 0.1, 0.2]
    assert [row["recommended"] for row in rows] == [True, False, False]
    assert rows[1]["skipped"] == pytest.approx(0.4) and rows[1]["call_speedup"] == pytest.approx(10 / 6)
    assert rows[0]["speedup"] == pytest.approx(2.0)
    assert len(rows[0]["capture"]) == 3  # value and interval at S = 4
    report = calibration.report()
    assert "| 0.05 * | 20 % | 1.25x | 2.00x |" in report
    # the recommended tau, the target, its capture and its call speed-up
    assert numbers(line_of(report, "Recommended tau:")) == [0.05, 90, 100.0, 1.25]
    assert numbers(line_of(report, "Intervals:"))[:2] == [95, 4]  # a 95 % bootstrap over the 4 seeds


def test_the_recommendation_is_the_tau_that_skips_most_among_those_meeting_the_target():
    """A larger tau that skips no more only risks the ranking: of equal skips the smallest tau is recommended; a tau
    that skips more but misses the target is not."""
    store = store_with({0.05: (FULL, 2), 0.1: (FULL, 5), 0.2: (FULL, 5), 0.3: ([0.9, 0.1, 0.5, 0.4], 8)})
    calibration = Calibration.from_store(store, CalibrationPlan((0.05, 0.1, 0.2, 0.3), 4, 0, 0.9), bootstrap=50)
    assert calibration.recommended_tau == 0.1
    assert [row["recommended"] for row in calibration.rows()] == [False, True, False, False]


def test_taus_that_skip_nothing_recommend_nothing_and_say_why():
    """Warmup and cooldown covering every step: each tau computes every call (capture 100 %), and none is
    recommended (the old rule recommended the largest)."""
    store = store_with({0.1: (FULL, 0), 2.0: (FULL, 0)})
    calibration = Calibration.from_store(store, CalibrationPlan((0.1, 2.0), 4, 0, 0.9), bootstrap=50)
    assert calibration.recommended is None and calibration.recommended_tau == 0.0
    assert not any(row["recommended"] for row in calibration.rows())
    assert numbers(line_of(calibration.report(), "Recommended tau:")) == [0]  # no target: nothing was skipped
    assert numbers(describe_remembered(calibration.memory_entry())) == [0, 90]  # tau 0 at the 90 % target


@pytest.mark.parametrize("steps, warmup, cooldown, skippable", [
    (8, 5, 5, 0), (8, 4, 4, 0), (8, 4, 3, 1), (8, 1, 1, 6), (8, 0, 0, 7), (8, 0, 7, 0), (50, 5, 5, 40), (1, 0, 0, 0),
    (2, 1, 0, 1),
])
def test_the_steps_a_cache_window_leaves_to_skip(steps, warmup, cooldown, skippable):
    """Warmup and cooldown are computed; without warmup the first step is too (nothing to reuse yet)."""
    assert skippable_steps(steps, warmup, cooldown) == skippable
    assert (cache_window_problem(steps, warmup, cooldown) is None) == (skippable > 0)


def test_a_window_that_leaves_nothing_to_skip_is_named_with_a_window_that_does():
    problem = cache_window_problem(8, 5, 5, "_high", " of the high-noise expert")
    # the inputs named, their values, the steps and whose they are, then a window that leaves a step to skip
    assert re.match(refusal("warmup_steps_high, cooldown_steps_high"), problem) and f"{HIGH_NOISE} expert" in problem
    assert numbers(problem) == [5, 5, 8, 1, 1] and skippable_steps(8, 1, 1) > 0
    assert numbers(cache_window_problem(2, 1, 1)) == [1, 1, 2, 1, 0] and skippable_steps(2, 1, 0) > 0
    assert cache_window_problem(1, 0, 0).endswith("use more steps")


def test_apply_cache_says_whether_its_tau_is_the_calibrated_one():
    entry = {"tau": 0.3, "capture": 0.95, "capture_target": 0.9, "seeds": 4, "prompts": 1, "taus": [0.3]}
    same = describe_remembered(entry, used_tau=0.3)
    assert numbers(same) == [0.3, 95] and same.endswith("this node uses it")
    differs = describe_remembered(entry, used_tau=0.1)
    assert numbers(differs) == [0.3, 95, 0.1, 0.3] and not differs.endswith("this node uses it")  # set 0.3, not 0.1
    assert numbers(describe_remembered(entry)) == [0.3, 95]


def test_no_tau_meeting_the_target_recommends_the_cache_off():
    store = store_with({0.1: ([0.9, 0.1, 0.5, 0.4], 5)})
    calibration = Calibration.from_store(store, CalibrationPlan((0.1,), 4, 0, 0.9), bootstrap=50)
    assert calibration.recommended_tau == 0.0 and calibration.recommended is None
    assert numbers(line_of(calibration.report(), "Recommended tau:")) == [0, 90, 4]  # tau 0: misses 90 % of best-of-4


def test_two_seeds_give_no_intervals():
    store = store_with({0.1: (FULL[:2], 5)}, seeds=(0, 1))
    calibration = Calibration.from_store(store, CalibrationPlan((0.1,), 2, 0, 0.9), bootstrap=50)
    assert all(len(row["capture"]) == 1 for row in calibration.rows())
    assert numbers(line_of(calibration.report(), "No intervals:")) == [2, 3]  # 2 seeds; use 3 or more


def test_chart_draws_both_curves_and_the_pick():
    store = store_with({0.05: (FULL, 2), 0.1: (FULL, 5), 0.2: ([0.9, 0.1, 0.5, 0.4], 8)})
    calibration = Calibration.from_store(store, CalibrationPlan((0.05, 0.1, 0.2), 4, 0, 0.9), bootstrap=50)
    chart = calibration.chart(640, 400)
    assert chart.shape == (400, 640, 3) and chart.dtype == np.uint8
    colours = {tuple(pixel) for pixel in chart.reshape(-1, 3)}
    assert {(40, 120, 200), (220, 110, 30), (200, 30, 30)} <= colours  # capture, speed-up, the pick's ring
    assert (chart < 250).any(axis=2).mean() > 0.01  # not blank


def test_memory_keeps_the_latest_calibration_per_setup(tmp_path):
    memory = CalibrationMemory(tmp_path / "user" / "cachedsearch" / "calibrations.json")
    key = setup_key("wan2.1_t2v_1.3B_fp16.safetensors", 50, "uni_pc", "simple")
    assert memory.recall(key) is None
    good = Calibration.from_store(store_with({0.1: (FULL, 5)}), CalibrationPlan((0.1,), 4, 0, 0.9), bootstrap=20)
    memory.remember(key, good)
    assert numbers(describe_remembered(memory.recall(key))) == [0.1, 100]
    off = Calibration.from_store(store_with({0.1: ([0.9, 0.1, 0.5, 0.4], 5)}), CalibrationPlan((0.1,), 4, 0, 0.9),
                                 bootstrap=20)
    memory.remember(key, off)
    assert memory.recall(key)["tau"] == 0 and numbers(describe_remembered(memory.recall(key))) == [0, 90]
    assert memory.recall(setup_key("wan2.1_t2v_1.3B_fp16.safetensors", 30, "uni_pc", "simple")) is None
    assert not math.isnan(good.full_seconds)


def a_calibration() -> Calibration:
    return Calibration.from_store(store_with({0.1: (FULL, 5)}), CalibrationPlan((0.1,), 4, 0, 0.9), bootstrap=20)


@pytest.mark.parametrize("content, why", [
    (b'{"wan.safetensors | 20 steps": {"tau": 0.1', "it is not JSON (Expecting"),  # torn by a crash
    (b'["not", "a", "memory"]', NOT_A_MEMORY),
    (b'{"setup": 0.1}', NOT_A_MEMORY),
    (b"\xff\xfe", "it could not be read ("),
])
def test_a_corrupt_memory_is_set_aside_whole_reported_and_the_next_run_remembers(tmp_path, content, why):
    path = tmp_path / "calibrations.json"
    path.write_bytes(content)
    memory = CalibrationMemory(path)
    assert memory.recall("setup") is None
    (aside,) = tmp_path.glob("calibrations.json.corrupt-*")
    assert aside.read_bytes() == content and not path.exists()
    (problem,) = memory.problems
    assert problem.startswith(f"{path}: set aside, because {why}")
    assert aside.name in problem and problem.endswith(WHAT_SETTING_ASIDE_LOSES)
    memory.remember("setup", a_calibration())
    again = CalibrationMemory(path)
    assert again.recall("setup")["tau"] == 0.1 and again.problems == []
    assert aside.read_bytes() == content  # never overwritten


def test_a_failed_memory_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "calibrations.json"
    CalibrationMemory(path).remember("kept", a_calibration())
    before = path.read_bytes()

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        CalibrationMemory(path).remember("new", a_calibration())
    monkeypatch.undo()
    assert path.read_bytes() == before and [entry.name for entry in tmp_path.iterdir()] == ["calibrations.json"]


def test_two_writers_at_once_each_write_a_whole_file_of_their_own(tmp_path, monkeypatch):
    """The second writer finishes while the first is between writing and renaming: neither writes into the
    other's temporary file, and the memory is whole after both (the later rename wins)."""
    path = tmp_path / "calibrations.json"
    CalibrationMemory(path).remember("kept", a_calibration())
    replace = os.replace

    def second_writer_first(source, target):
        monkeypatch.setattr(os, "replace", replace)
        CalibrationMemory(path).remember("second", a_calibration())
        replace(source, target)

    monkeypatch.setattr(os, "replace", second_writer_first)
    CalibrationMemory(path).remember("first", a_calibration())
    assert set(json.loads(path.read_text())) == {"kept", "first"}
    assert [entry.name for entry in tmp_path.iterdir()] == ["calibrations.json"]


def experts_store(high: dict, low: dict, together: dict | None = None, seeds=(0, 1, 2, 3)) -> ScoreStore:
    """Full rollouts, each expert's tau arms ({tau: (scores, skipped)}) and optionally the picks together."""
    store = store_with({}, seeds)
    arms = [(expert_arm_prefix(HIGH_NOISE) + tau_arm(tau), value) for tau, value in high.items()]
    arms += [(expert_arm_prefix(LOW_NOISE) + tau_arm(tau), value) for tau, value in low.items()]
    arms += [(together_arm(*taus), value) for taus, value in (together or {}).items()]
    for arm, (scores, skipped) in arms:
        for seed, score in zip(seeds, scores):
            store.add(arm, 0, seed, score, seconds=1.0, calls=10, skipped=skipped)
    return store


def test_two_experts_are_recommended_each_by_the_same_rule_and_measured_together():
    plan = ExpertsPlan.create((0.1, 0.2), (0.05, 0.1), 4, 0, 0.9)
    bad = [0.9, 0.1, 0.5, 0.4]
    store = experts_store({0.1: (FULL, 3), 0.2: (bad, 6)}, {0.05: (FULL, 2), 0.1: (FULL, 4)})
    partial = ExpertsCalibration.from_store(store, plan, bootstrap=20)
    # each expert's table is the one-stage table of its arms
    alone = Calibration.from_store(store, plan.high, bootstrap=20, arm_prefix=expert_arm_prefix(HIGH_NOISE))
    assert partial.high.rows() == alone.rows() and partial.high.recommended_tau == 0.1
    assert partial.low.recommended_tau == 0.1
    assert partial.together is None and partial.together_taus == (0.1, 0.1)
    store = experts_store({0.1: (FULL, 3), 0.2: (bad, 6)}, {0.05: (FULL, 2), 0.1: (FULL, 4)},
                          {(0.1, 0.1): (bad, 7)})
    calibration = ExpertsCalibration.from_store(store, plan, bootstrap=20)
    assert calibration.together.computed_calls == 4 * 3 and calibration.together_meets_target is False
    rows = calibration.rows()
    assert [(row["expert"], row["tau"]) for row in rows] == [
        (HIGH_NOISE, 0.1), (HIGH_NOISE, 0.2), (LOW_NOISE, 0.05), (LOW_NOISE, 0.1), ("both", "0.1 + 0.1")]
    report = calibration.report()
    assert [line for line in report.splitlines() if line.endswith(":")][:2] == [  # a table per expert, in order
        line_of(report, HIGH_NOISE.capitalize()), line_of(report, LOW_NOISE.capitalize())]
    assert "below the target" in report and "| 0.1 + 0.1 |" in report
    assert calibration.chart().shape == (800, 640, 3)


def test_an_expert_at_tau_0_is_not_measured_together_and_the_memory_keeps_both_experts(tmp_path):
    plan = ExpertsPlan.create((0.1,), (0.1,), 4, 0, 0.9)
    calibration = ExpertsCalibration.from_store(experts_store({0.1: (FULL, 3)}, {0.1: ([0.9, 0.1, 0.5, 0.4], 4)}),
                                                plan, bootstrap=20)
    assert (calibration.high.recommended_tau, calibration.low.recommended_tau) == (0.1, 0.0)
    assert calibration.together_taus is None and "Not measured together" in calibration.report()
    memory = CalibrationMemory(tmp_path / "calibrations.json")
    key = experts_setup_key("high.safetensors", "low.safetensors", 20, 10, "euler", "simple")
    memory.remember(key, calibration)
    entry = memory.recall(key)
    high, low = describe_remembered(entry, HIGH_NOISE), describe_remembered(entry, LOW_NOISE)
    assert f"{HIGH_NOISE} expert" in high and numbers(high) == [0.1, 100]
    assert f"{LOW_NOISE} expert" in low and numbers(low) == [0, 90]  # tau 0 at the 90 % target
    assert memory.recall(experts_setup_key("high.safetensors", "low.safetensors", 20, 12, "euler", "simple")) is None


def test_expert_tau_lists_are_named_in_errors():
    with pytest.raises(ValueError, match="taus_low: got \"0.2 0.1\", which is not strictly increasing"):
        ExpertsPlan.create((0.1,), (0.2, 0.1), 4, 0, 0.9)
    with pytest.raises(ValueError, match="taus_high: the list is empty"):
        ExpertsPlan.create((), (0.1,), 4, 0, 0.9)
    with pytest.raises(ValueError, match="taus_high: got 'fast'"):
        parse_taus("fast", "taus_high")
    plan = ExpertsPlan.create((0.1,), (0.1, 0.2), 3, 0, 0.9)
    count = plan.rollout_count()
    assert (count.rollouts, count.full_rollouts, count.at_most) == (15, 3, True)  # 3 x (full + 1 + 2 + both picks)
    assert numbers(count.breakdown) == [3, 3, 1, 2, 3] and plan.cost(20) == count.text(20)


class Judge:
    def __init__(self, name):
        self.name = name


def test_a_verifier_combination_normalises_across_an_arms_seeds_as_combine_scores_does():
    combination = VerifierCombination((Judge("ImageReward"), Judge("ImageReward")), (1.0, 3.0), "rank average")
    assert combination.name.endswith("(rank average) of ImageReward x 1, ImageReward #2 x 3")  # names, weights
    # seed 0 is best for the first verifier, seed 2 for the heavier second one
    assert combination.combine([(0.9, 1.0), (0.5, 2.0), (0.1, 3.0)]) == pytest.approx([-0.25, 0.0, 0.25])
    with pytest.raises(ValueError, match="weight_2 \\(ImageReward #2\\): got -1.0"):
        VerifierCombination((Judge("ImageReward"), Judge("ImageReward")), (1.0, -1.0))
    with pytest.raises(ValueError, match="weights: all are 0"):
        VerifierCombination((Judge("a"), Judge("b")), (0.0, 0.0))
    with pytest.raises(ValueError, match="normalisation: got 'max'"):
        VerifierCombination((Judge("a"), Judge("b")), (1.0, 1.0), "max")


def test_prompts_are_the_texts_lines_each_once():
    assert prompt_lines("  a red ball \n\n a blue cube\n") == ["a red ball", "a blue cube"]
    with pytest.raises(ValueError, match="prompt: empty; .* clip"):
        prompt_lines(" \n ")
    with pytest.raises(ValueError, match="prompt: 'a red ball' is written twice; list each prompt once"):
        prompt_lines("a red ball\na blue cube\na red ball")


def test_two_prompts_give_no_intervals_and_three_resample_prompts():
    store = ScoreStore(None)
    cached = {0: [0.45, 0.8, 0.3, 0.5], 1: [0.9, 0.1, 0.5, 0.4], 2: FULL}
    for prompt, scores in cached.items():
        for seed, (full, draft) in enumerate(zip(FULL, scores)):
            store.add(FULL_ARM, prompt, seed, full + prompt, seconds=2.0, calls=10)
            store.add(tau_arm(0.1), prompt, seed, draft + prompt, seconds=1.0, calls=10, skipped=5)
    two = Calibration.from_store(store, CalibrationPlan((0.1,), 4, 0, 0.5, prompts=2), bootstrap=50)
    assert not two.has_intervals and "No intervals: 2 prompts cannot be resampled" in two.report()
    assert len(two.rows()[0]["capture"]) == 1
    three = Calibration.from_store(store, CalibrationPlan((0.1,), 4, 0, 0.5, prompts=3), bootstrap=50)
    assert three.results[0].fidelity.resampled == PROMPT_BOOTSTRAP and len(three.rows()[0]["capture"]) == 3
    # top-1 is the share of prompts whose winner the cache keeps: prompts 0 and 2 of 3
    assert three.rows()[0]["top1"][0] == pytest.approx(2 / 3)
    assert numbers(line_of(three.report(), "Each figure rests on"))[:2] == [3, 4]  # 3 prompts x 4 seeds


def test_comfyui_engines_get_their_own_table_and_the_fewest_computed_calls_win():
    store = store_with({0.1: (FULL, 4)})  # our tau keeps the ranking at 6 of 10 calls computed
    plan = CalibrationPlan((0.1,), 4, 0, 0.9)
    easy = plan.for_engine("EasyCache", (0.2, 2.5), "easycache_thresholds")
    for threshold, scores, skipped in ((0.2, FULL, 7), (2.5, [0.9, 0.1, 0.5, 0.4], 9)):
        for seed, score in enumerate(scores):
            store.add(easy.arm(threshold), 0, seed, score, seconds=1.0, calls=10, skipped=skipped)
    engines = EnginesCalibration.from_store(store, [plan, easy], bootstrap=20)
    assert [calibration.recommended_tau for calibration in engines.calibrations] == [0.1, 0.2]
    assert engines.fastest.plan.engine == "EasyCache" and engines.threshold("LazyCache") == 0.0
    report = engines.report()
    assert "EasyCache:\n| reuse_threshold |" in report and "Recommended EasyCache reuse_threshold: 0.2" in report
    fewest = line_of(report, "Fewest computed calls")  # EasyCache's 0.2: its capture, speed-up and calls
    assert f"EasyCache {easy.threshold_name}" in fewest and numbers(fewest) == [0.2, 100.0, 3.33, 12, 40]
    assert [row["engine"] for row in engines.engine_rows()] == ["CachedSearch cache", "EasyCache", "EasyCache"]
    assert engines.chart().shape == (800, 640, 3)
    with pytest.raises(ValueError, match="easycache_thresholds: 3.5 in \"0.2 3.5\" is outside EasyCache's range 0 "
                       "to 3"):
        plan.for_engine("EasyCache", (0.2, 3.5), "easycache_thresholds")


def test_a_remembered_family_calibration_says_how_many_prompts():
    entry = {"tau": 0.2, "capture": 0.93, "capture_target": 0.9, "seeds": 8, "prompts": 25}
    assert describe_remembered(entry) == "calibrated for this setup: tau 0.2 (capture 93 %, 25 prompts)"
