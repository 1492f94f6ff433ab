"""CachedSearch Calibrate's panel in headless Chromium against the real server, on the frontend matrix (the pinned
frontend and the newest, Nodes 2.0 off and on): before a run the node states its cost (the report's, from its
widgets, as they change), a stored calibration shows on load, a live one fills the table and its legend and
Apply Cache's line, the same graph queued again with every result reused shows the table again; on the pinned
frontend in classic mode Cancel stops a calibration and the next one completes.
Screenshots: test-artifacts/comfyui-<version>/calibrate_*.png."""

import json

import pytest
from cachedsearch_core.calibration_memory import describe_remembered
from conftest import NEWEST_FRONTEND
from test_browser import ARTIFACTS, browser_available, run_browser_script

from report_text import says
from scripts.graphs import calibrate_a14b, calibrate_wan
from scripts.workflow_format import api_to_gui

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]

SEED = 20
STORED_ROWS = [
    {"tau": 0.1, "skipped": 0.25, "call_speedup": 1.33, "speedup": 1.25, "calls": 24, "computed_calls": 18,
     "meets_target": True, "recommended": True, "rho": [0.8, 0.4, 1.0], "top1": [1.0, 0.0, 1.0],
     "capture": [0.95, 0.5, 1.0], "regret": [0.0, 0.0, 0.125]},
    {"tau": 0.5, "skipped": 0.5, "call_speedup": 2.0, "speedup": 1.8, "calls": 24, "computed_calls": 12,
     "meets_target": False, "recommended": False, "rho": [None], "top1": [0.0, 0.0, 1.0],
     "capture": [0.4, -0.5, 1.0], "regret": [0.25, 0.0, 0.5]},
]


# The rollout (and its transformer call) the server presses Cancel in on the cancel check: a third of the way in
PRESS_CANCEL_AT = {"run": 4, "call": 2}


EXPERT_ROWS = [{**STORED_ROWS[0], "expert": "high-noise"}, {**STORED_ROWS[1], "expert": "low-noise"},
               {**STORED_ROWS[0], "expert": "both", "tau": "0.1 + 0.1", "recommended": False}]


def workflow_files(server, tmp_path, live=None, stored_result=None, calibrate_box=(40, 720, 780, 760),
                   columns=4) -> dict:
    object_info = server.get("/object_info")
    live = live or calibrate_wan(seeds=3, taus="0.1 0.5")
    layout = {key: (40 + 420 * (index % columns), 60 + 330 * (index // columns), 380, 260)
              for index, key in enumerate(live)}
    layout["calibrate"] = calibrate_box
    if "press_cancel" in live:  # right of the other nodes
        layout["press_cancel"] = (40 + 420 * columns, 60, 380, 120)
    gui = api_to_gui(live, object_info, layout, seed_control="fixed")
    stored = json.loads(json.dumps(gui))
    for node in stored["nodes"]:
        if node["type"] == live["calibrate"]["class_type"]:
            node["properties"]["cachedsearch_calibration_output"] = {"cachedsearch_calibration": [stored_result or {
                "rows": STORED_ROWS, "recommended_tau": 0.1, "capture_target": 0.9, "seeds": 4, "steps": 30,
                "intervals": True}]}
        if node["type"] == "CachedSearchApplyCache":
            node["properties"]["cachedsearch_calibration_output"] = {
                "cachedsearch_calibrated": [STORED_CALIBRATED]}
    paths = {"live_workflow": tmp_path / "live.json", "stored_workflow": tmp_path / "stored.json"}
    paths["live_workflow"].write_text(json.dumps(gui))
    paths["stored_workflow"].write_text(json.dumps(stored))
    return {name: str(path) for name, path in paths.items()}


def run_check(server, tmp_path, files: dict, config: dict, vue_nodes: bool) -> dict:
    """check_calibrate.mjs on ``files`` (the live and stored workflows) with ``config``: what it saw."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server.reset_caches()  # the live calibration runs every node, whatever ran on this server before
    seen = run_browser_script("check_calibrate.mjs", server, {**files, **config}, tmp_path / "config.json", vue_nodes,
                              timeout=1200)
    assert seen["vueNodes"] in (vue_nodes, None)
    assert seen["extensionErrors"] == []
    assert seen["clipped"] == []
    return seen


COLUMNS = ("skipped", "calls", "time", "rho", "top-1", "capture", "regret")  # the table's, each with a legend line
# the line Apply Cache shows for the stored calibration (the product's own wording of its figures)
STORED_CALIBRATED = describe_remembered({"tau": 0.1, "capture": 0.95})


def check_cost_before_the_run(seen, breakdown: str, rollouts: int, more_seeds: str, input_name: str):
    """The cost line before the run: the report's figures for the live graph's widgets, another for one seed
    more, and the node's own refusal of taus that do not increase."""
    assert seen["costBefore"].startswith(f"Cost: {rollouts} rollouts") and breakdown in seen["costBefore"]
    assert more_seeds in seen["costMoreSeeds"]
    assert seen["costRefused"].startswith("Cost: ") and says(seen["costRefused"], f"{input_name}: ", '"0.5 0.1"')


def pressing_cancel(live: dict) -> dict:
    """``live`` with the calibrator's model through CachedSearchTestPressCancel, which the check arms: Cancel then
    lands in the same rollout on every run (one sent from the browser on a progress event lands wherever a busy
    machine has got to by then, at worst after the calibration ended)."""
    live["press_cancel"] = {"class_type": "CachedSearchTestPressCancel",
                            "inputs": {"model": live["calibrate"]["inputs"]["model"]}}
    live["calibrate"]["inputs"]["model"] = ["press_cancel", 0]
    return live


def check_calibrate(server, tmp_path, frontend: str, vue_nodes: bool, cancel: bool) -> dict:
    renderer = "nodes2" if vue_nodes else "classic"
    live = calibrate_wan(seeds=3, taus="0.1 0.5")
    files = workflow_files(server, tmp_path, pressing_cancel(live) if cancel else live)
    seen = run_check(server, tmp_path, files, {
        "seed": SEED, "cancel": cancel, "press_cancel_at": PRESS_CANCEL_AT,
        "screenshot": str(ARTIFACTS / f"calibrate_{frontend}_{renderer}.png")}, vue_nodes)
    # the stored table: both rows, the recommended one marked, intervals and an undefined rho shown as such
    assert [row["tau"] for row in seen["stored"]] == [0.1, 0.5]
    assert [row["recommended"] for row in seen["stored"]] == [True, False]
    assert seen["stored"][0]["cells"] == ["★ 0.1", "25%", "1.33x", "1.25x", "0.80 [0.40, 1.00]", "1.00 [0.00, 1.00]",
                                          "0.95 [0.50, 1.00]", "0.000 [0.000, 0.125]"]
    assert seen["stored"][1]["cells"][4] == "-"
    stored_text = " ".join(seen["storedPanels"])
    # the stored payload's figures in its verdict: tau 0.1, capture target 90 %, 4 seeds, 30 steps (the legend's
    # first line follows the verdict without a space)
    assert says(stored_text, "tau 0.1", "90%", "4 seeds", 30) and STORED_CALIBRATED in stored_text
    # before the run: the cost the report states (tests/test_calibrate_comfy.py: "cost: 3 full rollouts + 3 cached
    # rollouts x 2 taus = 9 rollouts (54 sampler steps ..."), following the seeds
    check_cost_before_the_run(seen, "3 full rollouts + 3 cached rollouts x 2 taus", 9,
                              "Cost: 12 rollouts = 4 full rollouts + 4 cached rollouts x 2 taus", "taus")
    # the live calibration, its columns explained
    assert seen["liveOutcome"] == "success"
    live_text = " ".join(seen["livePanels"])
    assert all(f"{column}: " in live_text for column in COLUMNS) and says(live_text, "[low, high]: ", "95%")
    assert [row["tau"] for row in seen["live"]] == [0.1, 0.5]
    assert sum(row["recommended"] for row in seen["live"]) <= 1
    calibrated = STORED_CALIBRATED.split(" tau ")[0]  # Apply Cache's line, whatever tau the live run measured
    assert any(text.startswith(calibrated) for text in seen["livePanels"])
    # the run is over: no "rollout 9 / 9 ..." stays above the table
    assert seen["progressTextsAfterRun"] == []
    # queued again unchanged from a fresh load: every result is reused and the table shows again; Apply Cache's
    # line does not (it names the setup downstream of the node, which its cached result does not depend on)
    assert seen["requeuedOutcome"] == "success"
    assert [row["tau"] for row in seen["requeued"]] == [0.1, 0.5]
    assert not any(text.startswith(calibrated) for text in seen["requeuedPanels"])
    return seen


@pytest.mark.slow
def test_calibration_panel_live_with_cancel_on_the_pinned_frontend(comfy_server, tmp_path):
    """(That the run after a cancel measures what an uninterrupted one does is checked over HTTP in
    tests/test_calibrate_comfy.py.)"""
    seen = check_calibrate(comfy_server, tmp_path, "pinned", vue_nodes=False, cancel=True)
    assert seen["cancelled"] == "interrupted" and seen["afterCancelOutcome"] == "success"
    # the cancelled calibration's "rollout 12 / 27 ..." does not stay on the node (#41 item 1)
    assert seen["progressTextsAfterCancel"] == []
    assert [row["tau"] for row in seen["afterCancel"]] == [0.1, 0.5]
    assert (ARTIFACTS / "calibrate_pinned_classic.png").stat().st_size > 0


@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", True), ("newest", False), ("newest", True)])
def test_calibration_panel_on_each_frontend_and_node_renderer(request, tmp_path, frontend, vue_nodes):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    seen = check_calibrate(server, tmp_path, frontend, vue_nodes, cancel=False)
    if frontend == "newest":
        assert seen["frontend"] == NEWEST_FRONTEND.name.split("-")[1]


@pytest.mark.parametrize("vue_nodes", [False, True])
def test_two_expert_calibration_panel_and_each_experts_apply_cache_line(comfy_server, tmp_path, vue_nodes):
    renderer = "nodes2" if vue_nodes else "classic"
    stored = {"rows": EXPERT_ROWS, "recommended_tau": {"high-noise": 0.1, "low-noise": 0}, "capture_target": 0.9,
              "seeds": 4, "steps": 20, "intervals": True}
    # the calibrator right of the other nodes, so the screenshots show its table beside both Apply Cache lines
    files = workflow_files(comfy_server, tmp_path, calibrate_a14b(seed=SEED, taus="2"), stored, (1300, 60, 860, 1100),
                           columns=3)
    seen = run_check(comfy_server, tmp_path, files, {
        "seed": SEED, "cancel": False, "calibrate_type": "CachedSearchCalibrateExperts",
        "screenshot": str(ARTIFACTS / f"calibrate_experts_pinned_{renderer}.png")}, vue_nodes)
    check_cost_before_the_run(seen, "2 full rollouts + 2 cached rollouts x (1 high-noise tau + 1 low-noise tau) + 2 "
                              "with both picks", 8, "Cost: 12 rollouts at most", "taus_high")
    # the stored table: an expert column, each expert's pick, the pair together
    assert [row["cells"][:2] for row in seen["stored"]] == [["high-noise", "★ 0.1"], ["low-noise", "0.5"],
                                                            ["both", "0.1 + 0.1"]]
    # the stored payload's figures: each expert's tau (the low-noise one off), target 90 %, 4 seeds, 20 steps
    assert says(" ".join(seen["storedPanels"]), "high-noise 0.1", "low-noise 0", "90%", "4 seeds", 20)
    # live, and queued again with every result reused: both experts' rows; live, each Apply Cache names its expert
    # (reused, it shows no line: the line depends on the sampler downstream, which its cached result does not)
    assert seen["progressTextsAfterRun"] == []
    for outcome, rows, panels in (("liveOutcome", "live", "livePanels"), ("requeuedOutcome", "requeued",
                                                                          "requeuedPanels")):
        assert seen[outcome] == "success"
        assert [row["cells"][0] for row in seen[rows]][:2] == ["high-noise", "low-noise"]
        for expert in ("high-noise", "low-noise"):
            calibrated = describe_remembered({expert: {"tau": 1, "capture": 1}}, expert).split(" tau ")[0]
            shown = any(text.startswith(calibrated) for text in seen[panels])
            assert shown == (outcome == "liveOutcome")
