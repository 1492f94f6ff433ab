"""The panels across a server restart (#53 items 1, 2, 4, 5) in headless Chromium against real servers, on the
frontend matrix (the pinned frontend: 1.32.9 on ComfyUI 0.3.75, 1.49.6 on 0.33.0; the newest, Nodes 2.0 off and
on): a search runs, the server is stopped and a new process started on the same base directory and port under the
open tab, a second search runs, and the first run's workflow is loaded again. Each of its drafts' frames, stepped
through in the large view, is the frame that run showed for that seed (a frame deleted since says it is not
available, never another picture); "Commit this" on one of its drafts delivers that seed's full-compute video bit for
bit (a stock KSampler run of the seed), reading the drafts back from disk; the cost lines keep the search's cost
with the commit beside it; and a search cancelled while it drafts leaves no panel showing the run before as the
newest. Screenshots: test-artifacts/comfyui-<version>/restart_<frontend>_<renderer>_*.png."""

import copy
import json
import subprocess

import numpy as np
import pytest
from PIL import Image
from test_browser import ARTIFACTS, BROWSER_TESTS, REPO_ROOT, browser_available, frontend_version

from conftest import NEWEST_FRONTEND
from scripts import comfy_runtime
from report_text import numbers
from scripts.graphs import tiny_workflow_variant
from scripts.workflow_format import api_to_gui, column_layout

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]

SEED = 4240
DELETED = 3  # the candidate whose panel frames are deleted while the server is down
PRESS_CANCEL = "90"  # the id of the node that cancels item 4's search


def tiny_search() -> dict:
    api = json.loads((REPO_ROOT / "workflows" / "api" / "01 Wan 2.1 (start here).json").read_text())
    graph = tiny_workflow_variant(api, pooled=False)
    (sampler,) = [node for node in graph.values() if node["class_type"] == "CachedSearchSampler"]
    sampler["inputs"]["seed"] = SEED
    # a window that leaves steps to skip: the drafts are cheaper than full compute, so a commit runs (and costs)
    (cache,) = [node for node in graph.values() if node["class_type"] == "CachedSearchApplyCache"]
    cache["inputs"].update(warmup_steps=2, cooldown_steps=2)
    # the Sampler's model through a Cancel press that item 4 arms: that search is then cancelled inside its second
    # draft on every run, however loaded the machine
    graph[PRESS_CANCEL] = {"class_type": "CachedSearchTestPressCancel", "inputs": {"model": sampler["inputs"]["model"]}}
    sampler["inputs"]["model"] = [PRESS_CANCEL, 0]
    return graph


def stock_run(graph: dict, seed: int) -> dict:
    """The same graph with a stock KSampler of ``seed`` on the model without the cache in the Sampler's place,
    decoded and saved as the Recommit's delivery is: a full-compute video of that seed."""
    stock = copy.deepcopy(graph)
    ids = {node["class_type"]: key for key, node in stock.items()}
    search = stock[ids["CachedSearchSampler"]]["inputs"]
    cache = stock[ids["CachedSearchApplyCache"]]["inputs"]
    stock[ids["CachedSearchSampler"]] = {"class_type": "KSampler", "inputs": {
        **{name: search[name] for name in ("steps", "cfg", "sampler_name", "scheduler", "denoise", "positive",
                                           "negative", "latent_image")}, "seed": seed, "model": cache["model"]}}
    for class_type in ("CachedSearchRecommit", "CachedSearchVerifier", "CachedSearchLoadImageReward",
                       "CachedSearchApplyCache", "CachedSearchTestPressCancel"):
        del stock[ids[class_type]]
    del stock[[key for key, node in stock.items() if node["class_type"] == "VAEDecode" and
               node["inputs"]["samples"][0] == ids["CachedSearchSampler"]][0]]
    for node in stock.values():
        if node["class_type"] == "VAEDecode":
            node["inputs"]["samples"] = [ids["CachedSearchSampler"], 0]
    return stock


def saved_images(server, entry: dict) -> list[np.ndarray]:
    """The frames the run's SaveImage node wrote, as arrays."""
    prompt = entry["prompt"][2]
    (key,) = [key for key, node in prompt.items() if node["class_type"] == "SaveImage"]
    return [np.asarray(Image.open(server.base_dir / "output" / image["subfolder"] / image["filename"]))
            for image in entry["outputs"][key]["images"]]


def percent(share: float) -> str:
    return f"{100 * share:.1f}%"


@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", False), ("newest", False), ("newest", True)])
def test_after_a_restart_panels_show_their_own_drafts_and_a_pick_delivers_that_seed(base_with_models, tmp_path,
                                                                                    frontend, vue_nodes):
    if frontend == "newest" and not (NEWEST_FRONTEND / "index.html").exists():
        pytest.skip(f"no {NEWEST_FRONTEND}: run scripts/setup_browser.sh")
    extra = ["--front-end-root", str(NEWEST_FRONTEND)] if frontend == "newest" else []
    combination = f"{frontend_version(frontend)}_{'nodes2' if vue_nodes else 'classic'}"
    graph = tiny_search()
    first = comfy_runtime.ComfyServer(base_with_models(f"restart_{combination}"), extra_args=extra)
    second = comfy_runtime.ComfyServer(first.base_dir, extra_args=extra)
    second.port, second.url = first.port, first.url  # the open tab reconnects to the same address
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        first.start()
        first.request("POST", "/settings/Comfy.TutorialCompleted", True)
        first.request("POST", "/settings/Comfy.VueNodes.Enabled", vue_nodes)
        object_info = first.get("/object_info")
        layout, _ = column_layout(graph, {key: index % 5 for index, key in enumerate(graph)}, object_info)
        workflow = tmp_path / "workflow.json"
        workflow.write_text(json.dumps(api_to_gui(graph, object_info, layout, seed_control="fixed")))
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"workflow": str(workflow),
                                      "screenshot": str(ARTIFACTS / f"restart_{combination}.png")}))
        browser = subprocess.Popen(["node", str(BROWSER_TESTS / "check_restart.mjs"), first.url, str(config)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            restart = json.loads(browser.stdout.readline() or "{}")
            assert restart.get("restart"), browser.stderr.read()[-4000:]
            first.stop()
            # while the server is down: the frames of one draft are deleted, as a cleaned-up folder would lose them
            deleted = next(row for row in restart["references"] if row["seed"] == SEED + DELETED - 1)
            for frame in deleted["frames"]:
                folder = "output" if frame["type"] == "output" else "temp"
                (first.base_dir / folder / frame["subfolder"] / frame["filename"]).unlink(missing_ok=True)
            second.start()
            browser.stdin.write("started\n")
            browser.stdin.flush()
            output, errors = browser.communicate(timeout=900)
        finally:
            if browser.poll() is None:
                browser.kill()
        assert browser.returncode == 0, errors[-4000:]
        seen = json.loads(output.strip().splitlines()[-1])
        (ARTIFACTS / f"restart_{combination}.json").write_text(json.dumps(seen, indent=1))
        pick_entry = second.get(f"/history/{seen['pickPromptId']}")[seen["pickPromptId"]] \
            if seen.get("pickPromptId") else None
        stock = second.run_prompt(stock_run(graph, seen["picked"]["seed"])) if pick_entry else None
    finally:
        first.stop()
        second.stop()
    assert seen["vueNodes"] in (vue_nodes, None) and seen["extensionErrors"] == [], seen
    assert seen["firstRun"]["end"] == "execution_success" and seen["secondRun"]["end"] == "execution_success", seen

    # item 1: every frame of the first run's drafts, in its large view after the restart and another search, is
    # the one that run showed for that seed; the deleted draft's say they are not available
    assert seen["failed"].get("item 1") is None, seen["failed"]
    views = {int(view["seed"]): view for view in seen["largeViews"]}
    assert sorted(views) == [SEED, SEED + 1, SEED + 2]
    for seed, view in views.items():
        if seed == SEED + DELETED - 1:
            assert view["small"] == "missing" and view["frames"] == [], view
        else:
            assert view["small"] == "shown" and f"(seed {seed})" in view["caption"], view
            assert view["frames"] == seen["firstFrames"][str(seed)], (seed, view, seen["firstFrames"][str(seed)])

    # item 2: "Commit this" on a draft of a run the server no longer has queues the tab's graph with that search's
    # seeds: it reads the drafts back (computes none) and delivers the seed's full-compute video, bit for bit
    assert seen["failed"].get("item 2") is None, seen["failed"]
    picked = seen["picked"]
    status = seen["pickStatus"]
    assert not status.startswith("Could not") and f"commit candidate {picked['candidate']} (seed {picked['seed']})" \
        in status, status
    assert seen["pickEnd"] == "execution_success", seen
    assert pick_entry["status"]["status_str"] == "success"
    prompt = pick_entry["prompt"][2]
    (sampler,) = [key for key, node in prompt.items() if node["class_type"] == "CachedSearchSampler"]
    (recommit,) = [key for key, node in prompt.items() if node["class_type"] == "CachedSearchRecommit"]
    (cost,) = pick_entry["outputs"][sampler]["cachedsearch_cost"]
    assert (cost["reused_drafts"], cost["search_calls"]) == (3, 0), cost
    (delivery,) = pick_entry["outputs"][recommit]["cachedsearch_delivery"]
    assert (delivery["seed"], delivery["candidate"], delivery["mode"]) == (picked["seed"], picked["candidate"], "commit")
    delivered, reference = saved_images(second, pick_entry), saved_images(second, stock)
    assert len(delivered) == len(reference) > 0
    assert all((a == b).all() for a, b in zip(delivered, reference))

    # item 5: after the pick the Sampler still says what the search cost, and the Recommit adds the commit to it
    first_cost = seen["firstCost"]
    assert cost["drafted_calls"] == first_cost["search_calls"]
    drafts = (f"The drafts cost {int(100 * first_cost['calls_ratio'] + 0.5)}% of full best-of-3 "
              f"({first_cost['search_calls']} of {first_cost['full_calls']} transformer calls; this run computed 0).")
    assert drafts in seen["samplerAfterPick"], seen["samplerAfterPick"]
    with_commit = delivery["cost"]["drafted_ratio_with_commit"]
    assert with_commit == pytest.approx((first_cost["search_calls"] + delivery["cost"]["commit_calls"]) /
                                        first_cost["full_calls"])
    recommit_line = (f"search cost {percent(with_commit)} of full best-of-3's transformer calls (the drafts "
                     f"{percent(first_cost['calls_ratio'])}, this commit {percent(with_commit - first_cost['calls_ratio'])})")
    assert recommit_line in seen["recommitAfterPick"], seen["recommitAfterPick"]

    # item 4: a search cancelled while drafting leaves no panel showing the run before as the newest
    assert seen["failed"].get("item 4") is None, seen["failed"]
    assert seen["cancelledRun"]["end"] == "execution_interrupted"
    after = seen["afterCancel"]
    for panel in (after["CachedSearchSampler"], after["CachedSearchVerifier"]):
        assert seen["cancelledText"] and f"cancelled run{seen['cancelledText']}" in panel, \
            (seen["cancelledText"], after)
        assert "newest run" not in panel.replace("The newest run", "") and "★" not in panel, after
    # the Recommit delivered nothing in that run: no seed or figure of a delivery
    assert after["CachedSearchRecommit"] and numbers(after["CachedSearchRecommit"]) == [], after
    assert seen["browsedAfterCancel"].startswith("earlier run 1 of"), seen
    assert "delivered" not in seen["verifierBrowsed"] and "★" in seen["verifierBrowsed"], seen["verifierBrowsed"]
