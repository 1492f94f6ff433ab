"""The Sampler's panel in headless Chromium after a restart: a search cancelled in one server process and queued
again from the GUI in a fresh one on the same base directory says how many of its drafts it reused.
Screenshot: test-artifacts/comfyui-<version>/drafts_reused.png."""

import json
import subprocess

import pytest
from test_browser import ARTIFACTS, BROWSER_TESTS, browser_available
from test_draft_store_comfy import saved_seeds, search

from scripts import comfy_runtime
from scripts.workflow_format import api_to_gui

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]


def test_after_a_restart_the_samplers_panel_says_how_many_drafts_were_reused(base_with_models, tmp_path):
    width = 5
    graph = search(seed=900, num_candidates=width)
    # Cancel pressed by the first server inside draft 3 (one sent on a progress event lands wherever a busy machine
    # has got to by then)
    graph["press_cancel"] = {"class_type": "CachedSearchTestPressCancel",
                             "inputs": {"model": graph["search"]["inputs"]["model"]}}
    graph["search"]["inputs"]["model"] = ["press_cancel", 0]
    first = comfy_runtime.ComfyServer(base_with_models("drafts_browser"))
    try:
        first.start()
        assert first.request("POST", "/cachedsearch_test/press_cancel", {"run": 3, "call": 3})[0] == 200
        (cancelled,) = first.run_batch([graph])
        saved = len(saved_seeds(first))
        object_info = first.get("/object_info")
    finally:
        first.stop()
    assert "execution_interrupted" in [message[0] for message in cancelled["status"]["messages"]]
    assert saved == 2  # the drafts before the third
    layout = {key: (40 + 420 * (index % 4), 60 + 360 * (index // 4), 380, 300) for index, key in enumerate(graph)}
    workflow = tmp_path / "workflow.json"
    workflow.write_text(json.dumps(api_to_gui(graph, object_info, layout, seed_control="fixed")))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"workflow": str(workflow), "screenshot": str(ARTIFACTS / "drafts_reused.png")}))

    second = comfy_runtime.ComfyServer(first.base_dir)
    try:
        second.start()
        second.request("POST", "/settings/Comfy.TutorialCompleted", True)
        completed = subprocess.run(["node", str(BROWSER_TESTS / "check_drafts_reused.mjs"), second.url, str(config)],
                                   capture_output=True, text=True, timeout=900)
    finally:
        second.stop()
    assert completed.returncode == 0, completed.stderr[-4000:]
    seen = json.loads(completed.stdout.strip().splitlines()[-1])
    assert seen["outcome"] == "success" and seen["extensionErrors"] == []
    # the Sampler's panel (the Recommit's summary says what it delivered)
    reused = [summary for summary in seen["summaries"] if "drafts reused" in summary]
    line = f"{saved} of {width} drafts reused from an earlier run (saved on disk), at no cost."
    assert len(reused) == 1 and line in reused[0], seen["summaries"]
