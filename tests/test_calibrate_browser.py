"""CachedSearch Calibrate's panel in headless Chromium against the real server, on the frontend matrix (the pinned
frontend and the newest, Nodes 2.0 off and on): a stored calibration shows on load, a live one fills the table and
Apply Cache's line, the same graph queued again with every result reused shows the table again; on the pinned
frontend in classic mode Cancel stops a calibration and the next one completes.
Screenshots: test-artifacts/calibrate_*.png."""

import json
import subprocess

import pytest
from test_browser import ARTIFACTS, BROWSER_TESTS, NEWEST_FRONTEND, browser_available, newest_frontend_server  # noqa: F401

from scripts.graphs import calibrate_wan
from scripts.workflow_format import api_to_gui

pytestmark = pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")

SEED = 20
STORED_ROWS = [
    {"tau": 0.1, "skipped": 0.25, "call_speedup": 1.33, "speedup": 1.25, "calls": 24, "computed_calls": 18,
     "meets_target": True, "recommended": True, "rho": [0.8, 0.4, 1.0], "top1": [1.0, 0.0, 1.0],
     "capture": [0.95, 0.5, 1.0], "regret": [0.0, 0.0, 0.125]},
    {"tau": 0.5, "skipped": 0.5, "call_speedup": 2.0, "speedup": 1.8, "calls": 24, "computed_calls": 12,
     "meets_target": False, "recommended": False, "rho": [None], "top1": [0.0, 0.0, 1.0],
     "capture": [0.4, -0.5, 1.0], "regret": [0.25, 0.0, 0.5]},
]


def workflow_files(server, tmp_path) -> dict:
    object_info = server.get("/object_info")
    live = calibrate_wan(seeds=3, taus="0.1 0.5")
    layout = {key: (40 + 420 * (index % 4), 60 + 330 * (index // 4), 380, 260) for index, key in enumerate(live)}
    layout["calibrate"] = (40, 720, 780, 760)
    gui = api_to_gui(live, object_info, layout, seed_control="fixed")
    stored = json.loads(json.dumps(gui))
    for node in stored["nodes"]:
        if node["type"] == "CachedSearchCalibrate":
            node["properties"]["cachedsearch_calibration_output"] = {"cachedsearch_calibration": [{
                "rows": STORED_ROWS, "recommended_tau": 0.1, "capture_target": 0.9, "seeds": 4, "steps": 30,
                "intervals": True}]}
        if node["type"] == "CachedSearchApplyCache":
            node["properties"]["cachedsearch_calibration_output"] = {
                "cachedsearch_calibrated": ["calibrated for this setup: tau 0.1 (capture 95 %)"]}
    paths = {"live_workflow": tmp_path / "live.json", "stored_workflow": tmp_path / "stored.json"}
    paths["live_workflow"].write_text(json.dumps(gui))
    paths["stored_workflow"].write_text(json.dumps(stored))
    return {name: str(path) for name, path in paths.items()}


def check_calibrate(server, tmp_path, frontend: str, vue_nodes: bool, cancel: bool) -> dict:
    ARTIFACTS.mkdir(exist_ok=True)
    renderer = "nodes2" if vue_nodes else "classic"
    config = {**workflow_files(server, tmp_path), "seed": SEED, "cancel": cancel, "cancel_after_progress": 12,
              "screenshot": str(ARTIFACTS / f"calibrate_{frontend}_{renderer}.png")}
    (tmp_path / "config.json").write_text(json.dumps(config))
    server.request("POST", "/settings/Comfy.TutorialCompleted", True)
    server.request("POST", "/settings/Comfy.VueNodes.Enabled", vue_nodes)
    server.reset_caches()  # the live calibration runs every node, whatever ran on this server before
    try:
        completed = subprocess.run(["node", str(BROWSER_TESTS / "check_calibrate.mjs"), server.url,
                                    str(tmp_path / "config.json")], capture_output=True, text=True, timeout=1200)
    finally:
        server.request("POST", "/settings/Comfy.VueNodes.Enabled", False)
    assert completed.returncode == 0, completed.stderr[-4000:]
    seen = json.loads(completed.stdout.strip().splitlines()[-1])
    assert seen["vueNodes"] in (vue_nodes, None)
    assert seen["extensionErrors"] == []
    assert seen["clipped"] == []
    # the stored table: both rows, the recommended one marked, intervals and an undefined rho shown as such
    assert [row["tau"] for row in seen["stored"]] == [0.1, 0.5]
    assert [row["recommended"] for row in seen["stored"]] == [True, False]
    assert seen["stored"][0]["cells"] == ["★ 0.1", "25%", "1.33x", "1.25x", "0.80 [0.40, 1.00]", "1.00 [0.00, 1.00]",
                                          "0.95 [0.50, 1.00]", "0.000 [0.000, 0.125]"]
    assert seen["stored"][1]["cells"][4] == "-"
    stored_text = " ".join(seen["storedPanels"])
    assert "recommended tau 0.1 (largest with capture ≥ 90%), 4 seeds, 30 steps" in stored_text
    assert "calibrated for this setup: tau 0.1 (capture 95 %)" in stored_text
    # the live calibration
    assert seen["liveOutcome"] == "success"
    assert [row["tau"] for row in seen["live"]] == [0.1, 0.5]
    assert sum(row["recommended"] for row in seen["live"]) <= 1
    assert any(text.startswith("calibrated for this setup: tau") for text in seen["livePanels"])
    # queued again unchanged from a fresh load: every result is reused and the table shows again; Apply Cache's
    # line does not (it names the setup downstream of the node, which its cached result does not depend on)
    assert seen["requeuedOutcome"] == "success"
    assert [row["tau"] for row in seen["requeued"]] == [0.1, 0.5]
    assert not any(text.startswith("calibrated for this setup") for text in seen["requeuedPanels"])
    return seen


def test_calibration_panel_live_with_cancel_on_the_pinned_frontend(comfy_server, tmp_path):
    """(That the run after a cancel measures what an uninterrupted one does is checked over HTTP in
    tests/test_calibrate_comfy.py.)"""
    seen = check_calibrate(comfy_server, tmp_path, "pinned", vue_nodes=False, cancel=True)
    assert seen["cancelled"] == "interrupted" and seen["afterCancelOutcome"] == "success"
    assert [row["tau"] for row in seen["afterCancel"]] == [0.1, 0.5]
    assert (ARTIFACTS / "calibrate_pinned_classic.png").stat().st_size > 0


@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", True), ("newest", False), ("newest", True)])
def test_calibration_panel_on_each_frontend_and_node_renderer(request, tmp_path, frontend, vue_nodes):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    seen = check_calibrate(server, tmp_path, frontend, vue_nodes, cancel=False)
    if frontend == "newest":
        assert seen["frontend"] == NEWEST_FRONTEND.name.split("-")[1]
