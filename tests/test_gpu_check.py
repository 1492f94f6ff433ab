"""The GPU check (bench/gpu_check.py) between GPU runs: the same command end to end at toy size on the CPU, its
time limits on stand-in measurements, and the PyAV stand-in it brings to the GPU machine."""

import contextlib
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys
from types import SimpleNamespace

import pytest

from bench import gpu_check

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DEVICE_STUBS = REPO_ROOT / "bench" / "device_stubs"


def positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """``python -m bench.gpu_check --toy`` on the CPU, with ComfyUI importing the PyAV stand-in as on the GPU
    machine. tau 10: at 2 steps a draft's drift exceeds 0.10, so only a large tau makes the cache skip a call (and
    the search commit)."""
    out = tmp_path_factory.mktemp("gpu_check")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(DEVICE_STUBS), os.environ.get("PYTHONPATH")])))
    completed = subprocess.run([sys.executable, "-m", "bench.gpu_check", "--toy", "--device", "cpu", "--tau", "10",
                                "--out", str(out)], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                               timeout=300)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    data = json.loads((out / gpu_check.RESULTS_JSON).read_text())
    return SimpleNamespace(data=data, markdown=(out / gpu_check.RESULTS_MARKDOWN).read_text(), stdout=completed.stdout)


@pytest.mark.slow
def test_toy_check_measures_everything_in_order(toy_run):
    toy = gpu_check.TOY
    keys = [f"rollouts_{gpu_check.size_name(video)}" for video in toy.videos] + ["search", "verifiers"]
    measurements = toy_run.data["measurements"]
    assert list(measurements) == keys
    assert {key: entry["status"] for key, entry in measurements.items()} == dict.fromkeys(keys, "done")
    check = toy_run.data["check"]
    assert (check["scale"], check["device"], check["tau"]) == ("toy", "cpu", 10)
    assert check["model_parameters"] > 0


@pytest.mark.slow
def test_toy_rollouts_count_calls_and_relate_wall_time_to_the_ideal(toy_run):
    for video in gpu_check.TOY.videos:
        figures = toy_run.data["measurements"][f"rollouts_{gpu_check.size_name(video)}"]["figures"]
        arms = figures["arms"]
        assert list(arms) == ["full", "cachedsearch", "easycache"]
        full, cached = arms["full"], arms["cachedsearch"]
        assert full["calls_computed"] == full["calls_made"] == gpu_check.TOY.steps
        assert cached["calls_made"] == full["calls_made"] and 0 < cached["calls_computed"] < cached["calls_made"]
        for row in arms.values():
            assert all(positive(row[name]) for name in ("median_s", "seconds_per_computed_call", "ideal_speedup"))
            assert row["ideal_speedup"] == pytest.approx(row["calls_made"] / row["calls_computed"])
            assert row["seconds_per_computed_call"] == pytest.approx(row["median_s"] / row["calls_computed"])
        for row in (cached, arms["easycache"]):
            assert row["wall_speedup"] == pytest.approx(full["median_s"] / row["median_s"])
            assert 0 < row["wall_over_ideal"] < 10
        check = figures["cache_check"]
        assert positive(check["seconds_per_call"]) and positive(check["share_of_computed_call"])
        assert check["host_syncs_per_call"] is None  # counted on CUDA only
    first = toy_run.data["measurements"][f"rollouts_{gpu_check.size_name(gpu_check.TOY.videos[0])}"]["figures"]
    assert positive(first["first_rollout_s"]) and first["easycache_matching"]["rollouts"] >= 1


@pytest.mark.slow
def test_toy_search_is_measured_against_full_best_of_n(toy_run):
    figures = toy_run.data["measurements"]["search"]["figures"]
    count = gpu_check.TOY.candidates
    full, search = figures["full_candidate"], figures["search"]
    assert full["total_s"] == pytest.approx(full["rollout_s"] + full["decode_s"] + full["score_s"])
    assert figures["full_best_of_n_s"] == pytest.approx(count * full["total_s"])
    stages = ("drafts_s", "decode_s", "scoring_s", "commit_s")
    assert all(positive(search[stage]) for stage in stages)  # the drafts skipped, so the commit ran
    assert search["total_s"] == pytest.approx(sum(search[stage] for stage in stages))
    assert figures["share_of_full_best_of_n"] == pytest.approx(search["total_s"] / figures["full_best_of_n_s"])
    assert 0 < figures["share_of_full_best_of_n"] < 5
    assert search["draft_calls_computed"] < search["draft_calls_made"] == count * full["calls"]
    assert figures["calls_share"] == pytest.approx((search["draft_calls_computed"] + full["calls"]) /
                                                   (count * full["calls"]))
    assert positive(full["peak_bytes"]) and positive(search["peak_bytes"])
    assert figures["peak_ratio"] == pytest.approx(search["peak_bytes"] / full["peak_bytes"])
    assert list(search["stage_peak_bytes"]) == ["drafts", "decode", "scoring", "commit"]
    assert search["peak_bytes"] == max(search["stage_peak_bytes"].values())
    assert positive(full["decode_peak_bytes"])


@pytest.mark.slow
def test_toy_verifiers_are_timed_with_their_memory(toy_run):
    verifiers = toy_run.data["measurements"]["verifiers"]["figures"]["verifiers"]
    assert list(verifiers) == ["ImageReward", "VideoScore-v1.1"]
    for row in verifiers.values():
        assert all(positive(row[name]) for name in ("parameters", "weights_bytes", "first_score_s",
                                                    "seconds_per_candidate", "peak_bytes"))
        assert len(row["seconds"]) == 2 and row["scoring_growth_bytes"] >= 0


@pytest.mark.slow
def test_toy_markdown_has_every_table_and_ends_the_output(toy_run):
    for heading in ("## Rollouts", "## Search, N = 2", "## Verifiers", "| arm | setting | computed / made calls",
                    "search / full best-of-2:", "| verifier | parameters"):
        assert heading in toy_run.markdown
    assert toy_run.markdown.count("| cachedsearch | tau 10 |") == len(gpu_check.TOY.videos)
    assert toy_run.stdout.rstrip().endswith(toy_run.markdown.rstrip().splitlines()[-1])


def stand_in_steps(out: pathlib.Path, on_disk: list):
    """Measurements that stand in for the real ones: each records like them, then ends one way."""

    def partial_rollouts(entry, clock):
        figures = entry["figures"]
        figures.update(video="32x32x5", latent=[1, 16, 2, 4, 4], tokens=8, steps=2, tau=0.1, arms={},
                       cache_check={"seconds_per_call": 1e-4, "host_syncs_per_call": None})
        gpu_check.record_arm(figures, "full", [0.5], SimpleNamespace(computed=2, skipped=0))
        on_disk.append(json.loads((out / gpu_check.RESULTS_JSON).read_text()))  # what is on disk meanwhile
        clock.require(10, "the next rollout")

    def too_long(entry, clock):
        clock.require(10, "a rollout")

    def broken(entry, clock):
        raise RuntimeError("CUDA out of memory")

    def stopped(entry, clock):
        raise gpu_check.TimeLimitReached("its time limit (3 s) stopped the work in progress")

    def fine(entry, clock):
        entry["figures"]["value"] = 1.0

    return [("rollouts_32x32x5", "partial", 3.0, 0.0, partial_rollouts), ("second", "waits", 3.0, 1000.0, fine),
            ("search", "too long", 3.0, 0.0, too_long), ("broken", "fails", 3.0, 0.0, broken),
            ("stopped", "stopped", 3.0, 0.0, stopped), ("verifiers", "fine", 3.0, 0.0, fine)]


def test_a_check_cut_short_keeps_what_it_measured_and_goes_on(tmp_path):
    results = gpu_check.Results(tmp_path, {"scale": "toy", "budget_s": 60.0})
    on_disk, failures, said = [], [], []
    gpu_check.run_measurements(stand_in_steps(tmp_path, on_disk), results, gpu_check.Clock(60.0), 0.0,
                               lambda clock: contextlib.nullcontext(), lambda: failures.append(1), said.append)

    assert on_disk[0]["measurements"]["rollouts_32x32x5"]["status"] == "running"  # written as it goes
    saved = json.loads((tmp_path / gpu_check.RESULTS_JSON).read_text())["measurements"]
    assert {key: entry["status"] for key, entry in saved.items()} == {
        "rollouts_32x32x5": "cut short", "second": "skipped", "search": "skipped", "broken": "failed",
        "stopped": "cut short", "verifiers": "done"}
    assert saved["rollouts_32x32x5"]["figures"]["arms"]["full"]["median_s"] == 0.5
    assert "the next rollout (about 10 s) would not end" in saved["rollouts_32x32x5"]["reason"]
    assert "kept for the measurements after this one" in saved["second"]["reason"]
    assert saved["broken"]["reason"] == "RuntimeError: CUDA out of memory" and failures == [1]
    assert saved["verifiers"]["figures"] == {"value": 1.0}
    markdown = (tmp_path / gpu_check.RESULTS_MARKDOWN).read_text()
    assert "## partial: cut short" in markdown and "| full | - | 2/2 | 0.50 |" in markdown
    assert "cut short: the next rollout" in markdown and len(said) == 6


def test_wan_sequence_lengths_of_the_real_sizes():
    # 832x480 pixels -> 104x60 latent -> 52x30 patches; 33 frames -> 9 latent frames, 81 -> 21
    assert gpu_check.video_tokens((1, 16, 9, 60, 104)) == 14040
    assert gpu_check.video_tokens((1, 16, 21, 60, 104)) == 32760
    spec = gpu_check.REAL.model
    ratio = gpu_check.forward_flops(spec, 32760, 512) / gpu_check.forward_flops(spec, 14040, 512)
    assert 32760 / 14040 < ratio < (32760 / 14040) ** 2  # attention grows with the square, the rest linearly


@pytest.fixture
def av_stand_in():
    """The stand-in loaded under another name, so this process's real PyAV (if any) stays untouched."""
    spec = importlib.util.spec_from_file_location("av_stand_in", DEVICE_STUBS / "av" / "__init__.py",
                                                  submodule_search_locations=[str(DEVICE_STUBS / "av")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["av_stand_in"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        for name in [name for name in sys.modules if name.startswith("av_stand_in")]:
            del sys.modules[name]


def test_av_stand_in_imports_what_comfyui_imports_and_refuses_real_use(av_stand_in):
    from av_stand_in.container import InputContainer
    from av_stand_in.error import InvalidDataError
    from av_stand_in.video.reformatter import ColorPrimaries, ColorTrc

    assert {ColorTrc.BT709: "sRGB"}[ColorTrc.BT709] == "sRGB"  # ComfyUI keys dicts on its members at import
    assert not isinstance(object(), av_stand_in.VideoStream) and issubclass(InvalidDataError, Exception)
    assert not hasattr(av_stand_in, "__version__") and not hasattr(ColorPrimaries, "__wrapped__")
    for use in (lambda: av_stand_in.open("clip.mp4"), lambda: InputContainer(),
                lambda: av_stand_in.audio.resampler.AudioResampler(format="fltp")):
        with pytest.raises(ImportError, match=r"is not available: this av is the GPU check's stand-in"):
            use()
