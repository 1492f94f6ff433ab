"""Budget "auto" through a real ComfyUI server (issue 51 item 3): Calibrate remembers what the chooser needs, and a
search with the Budget on auto and the Pruning Plan's schedule "auto" then uses that calibration (its payload names
it: prompts x seeds, width, rounds, the expected gain, the calls charged); a search with another sampler or another
verifier does not, and says what differs; a re-queued auto search cancelled part-way resumes from its saved drafts
and delivers what an uninterrupted one delivers. Its own server: the calibration memory and the drafts start empty."""

import shutil

import pytest
from report_text import says

from cachedsearch_core.pruning import default_preview_frames
from scripts.graphs import calibrate_wan
from test_draft_store_comfy import (
    STEPS, drafts_folder, outcome, press_cancel_in, pressing_cancel, pruned_rows, run, search,
)

SEED, SEEDS, TAU, FRAMES, WINDOW, M = 900, 4, 0.3, 1, 2, 3
LATENT_FRAMES = 3  # the tiny video's 9 frames
IMAGE_REWARD = "CachedSearchLoadImageReward(ckpt_name=ImageReward.pt, dtype=fp32)"


def calibration(steps: int = STEPS, seeds: int = SEEDS, tau: float = TAU) -> dict:
    """Calibrate on the search's model, steps, sampler, scheduler, cache window and verifier, at the search's tau."""
    graph = calibrate_wan(seed=0, seeds=seeds, steps=steps, taus=f"{tau:g}")
    for unused in ("search", "search_report", "cache"):
        del graph[unused]
    graph["calibrate"]["inputs"].update(warmup_steps=WINDOW, cooldown_steps=WINDOW, frames_per_candidate=FRAMES)
    return graph


def auto_search(latent_frames: int = LATENT_FRAMES, **changes) -> dict:
    """The drafts-on-disk search graph with its Budget on auto and a Pruning Plan on schedule auto, previewing the
    frames Calibrate scores its previews on (every latent frame of the tiny video)."""
    graph = search(seed=SEED, num_candidates=2, **changes)
    graph["budget"] = {"class_type": "CachedSearchBudget", "inputs": {
        "budget_rollouts": M, "budget_unit": "transformer calls", "max_candidates": 16, "choose": "auto"}}
    graph["pruning"] = {"class_type": "CachedSearchPruningPlan", "inputs": {
        "vae": ["vae", 0], "verifier": ["load_verifier", 0], "prompt": "a red ball", "keep": 2,
        "prune_fraction": 0.5, "prune_step": 0, "preview_frames": default_preview_frames(latent_frames),
        "schedule": "auto"}}
    graph["search"]["inputs"].update(budget=["budget", 0], pruning=["pruning", 0])
    return graph


@pytest.fixture(scope="module")
def calibrated(start_comfy_server):
    server = start_comfy_server("auto_budget")
    entry = server.run_prompt(calibration())
    assert entry["status"]["status_str"] == "success", entry["status"]
    assert "Remembered for " in entry["outputs"]["calibrate"]["text"][0]
    return server


def budget_of(entry) -> dict:
    (budget,) = entry["outputs"]["search"]["cachedsearch_budget"]
    return budget


@pytest.mark.slow  # a calibration and a search through a server
def test_a_calibration_of_this_setup_and_verifier_chooses_the_search_and_the_budget_holds(calibrated):
    entry, _ = run(calibrated, auto_search())
    assert entry["status"]["status_str"] == "success", entry["status"]
    budget = budget_of(entry)
    auto = budget["auto"]
    assert auto["used"] is True and (auto["prompts"], auto["seeds"], auto["tau"]) == (1, SEEDS, TAU)
    assert f"(1 prompt x {SEEDS} seeds, tau {TAU:g})" in auto["line"]
    low, value, high = auto["expected_gain"][1], auto["expected_gain"][0], auto["expected_gain"][2]
    assert low <= value <= high
    # What the search computed and the commit, against M full renders.
    (cost,) = entry["outputs"]["search"]["cachedsearch_cost"]
    assert cost["search_calls"] + budget["full_cost"] <= budget["budget"] == M * budget["full_cost"]
    # The width the line names is the width that ran (fewer only with a note saying why), its calls charged.
    assert budget["width"] == auto["width"] or auto.get("narrowed"), budget
    assert auto["spent_calls"] == cost["search_calls"]
    if auto["rounds"]:
        assert budget["pruned"]
        assert len(entry["outputs"]["search"]["cachedsearch_pruning"][0]["rounds"]) == len(auto["rounds"])
    assert auto["line"] in entry["outputs"]["recommit"]["text"][0]


@pytest.mark.slow  # two searches through a server
def test_another_sampler_or_verifier_does_not_use_the_calibration_and_says_what_differs(calibrated):
    entry, _ = run(calibrated, auto_search(search={"sampler_name": "uni_pc"}))
    auto = budget_of(entry)["auto"]
    assert auto["used"] is False
    assert says(auto["line"], "sampler", "euler", "sampler", "uni_pc"), auto["line"]

    graph = auto_search()
    graph["load_clip"] = {"class_type": "CachedSearchLoadClipVerifier",
                          "inputs": {"model_folder": "tiny-clip", "dtype": "fp32"}}
    graph["pruning"]["inputs"]["verifier"] = ["load_clip", 0]
    entry, _ = run(calibrated, graph)
    auto = budget_of(entry)["auto"]
    assert auto["used"] is False
    assert says(auto["line"], "verifier", IMAGE_REWARD, "verifier",
                "CachedSearchLoadClipVerifier(dtype=fp32, model_folder=tiny-clip)"), auto["line"]


@pytest.mark.slow  # three searches through a server
def test_a_cancelled_auto_search_resumes_from_its_saved_drafts_as_an_uninterrupted_one(calibrated):
    graph = pressing_cancel(auto_search())
    shutil.rmtree(drafts_folder(calibrated), ignore_errors=True)
    calibrated.reset_caches()
    alone, _ = run(calibrated, graph)
    assert alone["status"]["status_str"] == "success", alone["status"]

    shutil.rmtree(drafts_folder(calibrated), ignore_errors=True)
    calibrated.reset_caches()
    press_cancel_in(calibrated, run=3)
    cancelled, _ = run(calibrated, graph)
    assert "execution_interrupted" in [message[0] for message in cancelled["status"]["messages"]]
    calibrated.reset_caches()
    resumed, _ = run(calibrated, graph)
    assert resumed["status"]["status_str"] == "success", resumed["status"]
    assert outcome(calibrated, resumed) == outcome(calibrated, alone)
    # Read back and charged as when computed: the same choice and the same calls charged, fewer computed now.
    assert budget_of(resumed) == budget_of(alone)
    (cost_alone,), (cost_resumed,) = (entry["outputs"]["search"]["cachedsearch_cost"] for entry in (alone, resumed))
    assert cost_resumed["search_calls"] < cost_alone["search_calls"]
    if budget_of(alone).get("pruned"):
        assert pruned_rows(resumed) == pruned_rows(alone)
