"""The canvas's third pass (#41) in headless Chromium against the real server, on the frontend matrix (the pinned
frontend, 1.32.9 on ComfyUI 0.3.75 and 1.49.6 on 0.33.0, and the newest, Nodes 2.0 off and on), on stored and tiny
workflows: the Pruning Plan's title follows a schedule and a schedule whose rounds fall is refused when queued, before
anything runs (item 5); Calibrate's cost line refuses a cache window that leaves nothing to skip and a stored
calibration in which no tau skipped recommends none and says why (item 2); the Sampler's "cost details" opens its
help page as a page (item 4), and its panel names the cache (ComfyUI's EasyCache too) and says why a search cost
more than full best-of-N (items 6, 7); a live search's wait cancelled leaves nothing stale (item 1). Screenshots:
test-artifacts/comfyui-<version>/canvas_<frontend>_<renderer>_*.png."""

import copy
import json

import pytest
from cachedsearch_core import Draft, SearchCost
from test_browser import (
    ARTIFACTS,
    REPO_ROOT,
    browser_available,
    frontend_version,
    run_browser_script,
    stored_results_workflow,
    tiny_shipped,
    write_frames,
)
from test_calibrate_browser import STORED_ROWS, workflow_files

from report_text import numbers, says
from scripts.graphs import tiny_workflow_variant
from scripts.workflow_format import api_to_gui, column_layout

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]

# A calibration whose warmup and cooldown covered every step: each tau skipped nothing and kept every ranking.
NOTHING_SKIPPED = {"rows": [dict(row, skipped=0.0, call_speedup=1.0, calls=24, computed_calls=24, meets_target=True,
                                 recommended=False, capture=[1.0, 1.0, 1.0]) for row in STORED_ROWS],
                   "recommended_tau": 0.0, "none_skipped": True, "capture_target": 0.9, "seeds": 4, "steps": 8,
                   "intervals": True, "prompts": 3, "rollouts": 36, "reused_rollouts": 12}

# A search of 3 drafts on EasyCache that skipped nothing: with its commit it costs more than full best-of-3 (the
# cost model's payload, as the Sampler sends it).
EASYCACHE_SKIPPED_NOTHING = {**SearchCost.of_search([Draft(7 + index, 1.0, 50, 0) for index in range(3)]).as_dict(),
                             "drafted_with_apply_cache": False,
                             "cache": "EasyCache (reuse_threshold 0.2), skipped calls counted by CachedSearch"}


def check_canvas(server, tmp_path, frontend: str, vue_nodes: bool) -> dict:
    object_info = server.get("/object_info")
    frames = write_frames(server)
    api = json.loads((REPO_ROOT / "workflows" / "api" / "01 Wan 2.1 (start here).json")
                     .read_text())
    tiny = tiny_workflow_variant(api, pooled=False)
    layout, _ = column_layout(tiny, {key: index % 5 for index, key in enumerate(tiny)}, object_info)
    stored = stored_results_workflow(copy.deepcopy(tiny), object_info, frames)
    for node in stored["nodes"]:  # the Sampler's drafts made with ComfyUI's EasyCache, which skipped nothing
        if node["type"] == "CachedSearchSampler":
            node["properties"]["cachedsearch_last_output"]["cachedsearch_cost"] = [EASYCACHE_SKIPPED_NOTHING]
    files = {"pruned_workflow": tiny_shipped("02 Wan 2.1 pruned search", object_info),
             "tiny_workflow_fixed": api_to_gui(tiny, object_info, layout, seed_control="fixed"),
             "stored_workflow": stored}
    config = {}
    for name, workflow in files.items():
        config[name] = str(tmp_path / f"{name}.json")
        (tmp_path / f"{name}.json").write_text(json.dumps(workflow))
    calibrate = workflow_files(server, tmp_path, stored_result=NOTHING_SKIPPED)
    config.update(calibrate_workflow=calibrate["live_workflow"], calibrate_nothing_skipped=calibrate["stored_workflow"])
    shipped = json.loads((REPO_ROOT / "workflows" / "05 Calibrate a model family.json").read_text())
    (config["calibrate_width"],) = {node["size"][0] for node in shipped["nodes"] if node["type"] == "CachedSearchCalibrate"}
    combination = f"{frontend_version(frontend)}_{'nodes2' if vue_nodes else 'classic'}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    config["screenshot"] = str(ARTIFACTS / f"canvas_{combination}.png")
    seen = run_browser_script("check_canvas.mjs", server, config, tmp_path / "config.json", vue_nodes, timeout=900)
    recommit_inputs = object_info["CachedSearchRecommit"]["input"]["optional"]
    seen["advancedDeclared"] = bool(recommit_inputs["pick_timeout"][1].get("advanced"))
    assert seen["vueNodes"] in (vue_nodes, None)
    assert seen["extensionErrors"] == []
    return seen


@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", False), ("pinned", True), ("newest", False),
                                                 ("newest", True)])
def test_canvas_says_before_a_run_what_cannot_save_and_opens_cost_details(request, tmp_path, frontend, vue_nodes):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    seen = check_canvas(server, tmp_path, frontend, vue_nodes)
    assert seen["failed"] == {}  # every item's steps came (a step that never came is named there)
    # item 5: the title says what the plan does, from its widgets; the schedule replaces keep and prune_fraction
    assert numbers(seen["planTitle"]["title"]) == [40, 4]  # prune_fraction 40 %, keep 4
    scheduled = seen["planTitleWithSchedule"]["title"]  # the schedule typed, in place of those two
    assert scheduled.endswith(": 70%:4, 40%:2") and numbers(scheduled) == [70, 4, 40, 2]
    shown = seen["planTitleWithSchedule"]["shown"]  # Nodes 2.0 draws the title (1.32.9 with the node's badge)
    assert shown is None or shown.startswith(scheduled), shown
    assert seen["planTitleWithoutSchedule"]["title"] == seen["planTitle"]["title"]
    # falling rounds are refused by the plan's own validation when queued: nothing runs
    assert says(seen["fallingRefusal"], "schedule", 2, "'40%:2'", 40, 1, 70), seen["fallingRefusal"]
    # item 2: the shipped warmup and cooldown (5 and 5) on 8 steps, refused before the run, on the canvas
    assert seen["costBefore"].startswith("Cost: 9 rollouts")
    assert seen["costWindow"].startswith("Cost: ") and says(seen["costWindow"], "warmup_steps, cooldown_steps", 5, 5, 8)
    # a stored calibration in which no tau skipped: nothing recommended, and why
    assert seen["nothingSkippedRecommended"] == 0
    # the payload's figures: tau 0, 3 prompts x 4 seeds, 12 of 36 rollouts reused, 8 steps
    facts = [NOTHING_SKIPPED[key] for key in ("recommended_tau", "prompts", "seeds", "reused_rollouts", "rollouts",
                                              "steps")]
    assert numbers(seen["nothingSkippedVerdict"]) == facts, seen["nothingSkippedVerdict"]
    # item 3: the table with intervals fits the width the shipped workflows give the node (560: it was 704 px of
    # table in a 540 px panel, capture cut and regret hidden): every column in view, nothing clipped
    fit = seen["tableFit"]
    assert fit["scrollWidth"] <= fit["width"] + 1 and all(header["inside"] for header in fit["headers"]), fit
    assert not fit["clipped"], fit
    # item 4: the link opens the Sampler's help page as a page (it was downloaded, and its tab closed)
    assert seen["docPage"].get("heading") == "CachedSearch Sampler", seen["docPage"]
    assert seen["docPage"]["paragraphs"] > 5
    # items 6 and 7: the panel names ComfyUI's cache, says it skipped nothing, and why this search costs more than
    # full best-of-3; hovering says what a transformer call is
    panel = seen["samplerPanel"]
    cost = EASYCACHE_SKIPPED_NOTHING  # the payload's figures in the panel: 3 drafts, mean 1.00 s; the cache it names;
    # with the commit more than full best-of-3, 200 of 150 calls, 0 % skipped
    assert numbers(panel)[:2] == [cost["num_candidates"], cost["mean_draft_seconds"]], panel
    assert cost["cache"] in panel and cost["over_full_best_of"], panel
    assert says(panel, cost["num_candidates"], cost["drafted_calls_with_commit"], cost["full_calls"], "0%"), panel
    assert seen["callsTitle"] and seen["samplerTitle"].startswith(seen["callsTitle"]), seen["samplerTitle"]
    # item 7: in Nodes 2.0 the Recommit's wait_for_pick is among the widgets shown, not behind "Show advanced
    # inputs" (where it was); its guards pick_among and pick_timeout stay there
    if vue_nodes:
        shown = seen["recommitWidgetsShown"]
        assert "wait_for_pick" in shown, shown
        if seen["advancedDeclared"]:  # ComfyUI 0.3.75 has no advanced inputs: every widget shows there
            assert "pick_timeout" not in shown, shown
        # item 1: Cancel while the Recommit waits leaves nothing stale
    assert seen["firstRun"] == "execution_success" and seen["firstDelivery"].startswith("delivered seed")
    assert any("waiting for your pick" in text for text in seen["progressWhileWaiting"]), seen["progressWhileWaiting"]
    assert seen["cancelledRun"] == "execution_interrupted"
    # the cancelled run delivered nothing: no seed or figure of a delivery on the Recommit
    assert seen["recommitAfterCancel"] and numbers(seen["recommitAfterCancel"]) == [], seen["recommitAfterCancel"]
    assert seen["progressAfterCancel"] == []
    assert seen["nextRun"] == "execution_success" and seen["recommitAfterNext"].startswith("delivered seed")
    # browsing the history back from the newest run onto the cancelled one (each run drafted its own seeds)
    assert seen["cancelledIndex"] == 1 and seen["browsedLabel"] == "earlier run 1 of 2", seen
    assert seen["recommitBrowsed"] == seen["recommitAfterCancel"], seen["recommitBrowsed"]
