"""Budget "auto" choosing a PRUNED search through a real ComfyUI server (issue 51, Tests): after a Calibrate run the
chooser itself (no mock, no hand-set table) finds pruning the best buy for a budget of M full renders; the search
runs the chosen rounds, the panel names the calibration and the schedule, and the calls it computed, its previews at
their measured worth and the commit stay within the budget; a cancelled then re-queued pruned auto search resumes
from its saved drafts and delivers, and is charged, what an uninterrupted one is.

Why this world prunes where test_auto_server's does not (the chooser, called on this server's calibration memory,
says so):
- 48 steps with a cache that skips little (tau 0.02): a draft to the first prune step (step 3) computes 3 of a full
  draft's ~36 calls, so even at the tiny models' dear previews (a preview's decoding and judging measures 3-4.5
  calls' time on a quiet machine, up to 7 with the suite's two runtimes side by side) pruning is the best buy for 4
  full renders: N = 4 pruned 3:3 while a preview costs up to 8 calls, N = 7 pruned 3:1 up to 12, none beyond (the
  ledger reserves one candidate's 45 remaining calls beside the drafts). The choice weighs the measured seconds,
  priced by the median of several lone decodes, so one slow call does not turn it;
- a one-frame video: a preview decodes the frame the final render decodes, so the x0 preview tells the seeds apart.
  On the tiny 9-frame video a latent frame decoded alone is not that frame decoded in its clip, the random
  verifier's previews say nothing of the final score, and the chooser rightly prunes nowhere.
Its own server: the calibration memory and the drafts start empty."""

import shutil

import pytest

from test_auto_server import auto_search, budget_of, calibration
from test_draft_store_comfy import drafts_folder, outcome, press_cancel_in, pressing_cancel, pruned_rows, run

STEPS, SEEDS, TAU, M = 48, 12, 0.02, 4
ONE_FRAME = {"length": 1}


@pytest.fixture(scope="module")
def calibrated(start_comfy_server):
    server = start_comfy_server("auto_budget_pruned")
    graph = calibration(steps=STEPS, seeds=SEEDS, tau=TAU)
    graph["latent"]["inputs"].update(ONE_FRAME)
    server.run_prompt(graph)  # raises unless it succeeds
    return server


def pruned_auto_search() -> dict:
    graph = auto_search(latent_frames=1, search={"steps": STEPS}, cache={"tau": TAU}, latent=ONE_FRAME)
    graph["budget"]["inputs"]["budget_rollouts"] = M
    return graph


def counting_forwards(graph: dict) -> dict:
    """``graph`` with the test pack's CountForwards between the cache and the Sampler (the commit runs on the same
    model)."""
    graph["count_forwards"] = {"class_type": "CachedSearchTestCountForwards", "inputs": {"model": ["cache", 0]}}
    graph["search"]["inputs"]["model"] = ["count_forwards", 0]
    return graph


def forwards(server) -> int:
    status, answer = server.request("GET", "/cachedsearch_test/forwards")
    assert status == 200, answer
    return answer["count"]


def pruning_of(entry) -> dict:
    (pruning,) = entry["outputs"]["search"]["cachedsearch_pruning"]
    return pruning


def from_scratch(server) -> None:
    """No saved drafts and nothing in ComfyUI's caches: the next search computes what it runs."""
    shutil.rmtree(drafts_folder(server), ignore_errors=True)
    server.reset_caches()


@pytest.mark.slow  # a calibration and a search through a server
def test_the_chooser_buys_a_pruned_search_the_panel_names_it_and_the_budget_holds(calibrated):
    from_scratch(calibrated)
    before = forwards(calibrated)
    entry = calibrated.run_prompt(counting_forwards(pruned_auto_search()))
    computed = forwards(calibrated) - before
    budget = budget_of(entry)
    auto = budget["auto"]
    assert auto["used"] is True and auto["rounds"], auto["line"]
    assert f"(1 prompt x {SEEDS} seeds, tau {TAU:g}): N = {auto['width']}, prune {auto['schedule']};" in auto["line"]
    assert auto["line"] in entry["outputs"]["recommit"]["text"][0]
    # The rounds that ran are the chosen ones, at the chosen width: this prompt's cache skips as calibrated (the
    # same seeds), so the ledger narrows nothing.
    pruning = pruning_of(entry)
    assert auto["narrowed"] == []
    assert [[prune["step"], len(prune["kept"])] for prune in pruning["rounds"]] == auto["rounds"]
    assert budget["width"] == pruning["num_candidates"] == auto["width"]
    # Charged: every call the search computed (counted by a forward hook, less the commit's, which computes every
    # call), each scored preview at its worth in calls (its decoding and judging time in Calibrate).
    (cost,) = entry["outputs"]["search"]["cachedsearch_cost"]
    assert cost["commit_calls"] == budget["full_cost"] == STEPS
    assert auto["spent_calls"] == computed - cost["commit_calls"] == cost["search_calls"]
    scored = sum(len(prune["scored"]) for prune in pruning["rounds"])
    assert auto["preview_cost"] > 0 and auto["spent_previews"] == pytest.approx(scored * auto["preview_cost"])
    # Within M full renders.
    assert computed + auto["spent_previews"] <= budget["budget"] == M * STEPS


@pytest.mark.slow  # three searches through a server
@pytest.mark.parametrize("cancel_in", ["a draft", "the survivors' run"])
def test_a_cancelled_pruned_auto_search_resumes_from_its_saved_drafts_as_an_uninterrupted_one(calibrated, cancel_in):
    graph = pressing_cancel(pruned_auto_search())
    from_scratch(calibrated)
    alone = calibrated.run_prompt(graph)
    assert budget_of(alone)["auto"]["rounds"]

    from_scratch(calibrated)
    # Sampling runs: each draft to the first round's step, then the survivors' continuation.
    press_cancel_in(calibrated, run=3 if cancel_in == "a draft" else budget_of(alone)["width"] + 1, call=2)
    cancelled, _ = run(calibrated, graph)
    assert "execution_interrupted" in [message[0] for message in cancelled["status"]["messages"]]
    calibrated.reset_caches()
    resumed = calibrated.run_prompt(graph)
    # The winner, its delivered frames, the drafts' latents and rows, the rounds and preview scores.
    assert outcome(calibrated, resumed) == outcome(calibrated, alone)
    assert pruned_rows(resumed) == pruned_rows(alone) and pruning_of(resumed) == pruning_of(alone)
    # Read back and charged as when computed: the same choice and charges, fewer calls computed now.
    assert budget_of(resumed) == budget_of(alone)
    (cost_alone,), (cost_resumed,) = (entry["outputs"]["search"]["cachedsearch_cost"] for entry in (alone, resumed))
    assert cost_resumed["search_calls"] < cost_alone["search_calls"]
