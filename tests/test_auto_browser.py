"""Budget "auto" on the canvas (#51 items 4 and 5), in headless Chromium against a real ComfyUI server of its own
with frontend 1.58.1, classic and Nodes 2.0: workflow 04's tiny variant (Calibrate, 8 seeds) queued from the canvas,
then workflow 16's tiny variant (Budget and Pruning Plan on auto) queued the same way. The Sampler's panel and the
Recommit's show what auto bought, each figure as the payload has it: the width, the pruning rounds, the calibration
(prompts x seeds), the expected gain over full best-of-8 with its interval, and the calls charged against the
budget. Screenshots: test-artifacts/comfyui-<version>/auto_<frontend>_<renderer>.png with its _sampler and _recommit
views, the payload and what the panels said beside them (.json)."""

import json

import pytest
from conftest import NEWEST_FRONTEND
from test_browser import ARTIFACTS, browser_available, frontend_version, run_browser_script
from test_ltx2_browser import depth_columns
from test_workflows import node_of, tiny_calibrate_then_wide

from scripts.workflow_format import api_to_gui, column_layout

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.skipif(
    not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]


@pytest.fixture(scope="module")
def auto_server(start_comfy_server):
    """No calibration remembered and no drafts saved before the first check's Calibrate."""
    return start_comfy_server("auto_browser", ["--front-end-root", str(NEWEST_FRONTEND)])


def workflow_file(server, graph: dict, path) -> dict[str, str]:
    """``graph`` as a GUI workflow at ``path``; the execution id of each node key (api_to_gui numbers in order)."""
    object_info = server.get("/object_info")
    layout, _ = column_layout(graph, depth_columns(graph), object_info)
    path.write_text(json.dumps(api_to_gui(graph, object_info, layout, seed_control="fixed")))
    return {key: str(index + 1) for index, key in enumerate(graph)}


def figures_shown(budget: dict) -> list[str]:
    """What auto bought, each figure the payload holds written as an artist reads it: the width, the calibration,
    the expected gain with its interval against full best-of-M, the budget, and for a pruned search each round's
    step and the calls charged."""
    auto = budget["auto"]
    value, low, high = auto["expected_gain"]
    figures = [f"N = {auto['width']}", f"{auto['prompts']} prompt{'s' if auto['prompts'] > 1 else ''} x "
               f"{auto['seeds']} seeds", f"{value:+.3f} over", f"{low:+.3f} to {high:+.3f}", f"best-of-{budget['rollouts']}",
               f"of {round(budget['budget'])} calls", f"charged {auto['spent_calls']}"]
    figures.append(f"prune {auto['schedule']}" if auto["rounds"] else "no pruning")
    return figures


@pytest.mark.parametrize("vue_nodes, seed", [(False, 7100), (True, 7200)])
def test_the_panels_say_what_budget_auto_bought(auto_server, tmp_path, vue_nodes, seed):
    calibrate, wide = tiny_calibrate_then_wide(seeds=8)
    node_of(wide, "CachedSearchSampler")["seed"] = seed
    workflow_file(auto_server, calibrate, tmp_path / "calibrate.json")
    ids = workflow_file(auto_server, wide, tmp_path / "wide.json")
    keys = {node["class_type"]: key for key, node in wide.items()}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    combination = f"{frontend_version('newest')}_{'nodes2' if vue_nodes else 'classic'}"
    config = {"calibrate": str(tmp_path / "calibrate.json"), "wide": str(tmp_path / "wide.json"),
              "nodes": {"sampler": ids[keys["CachedSearchSampler"]], "recommit": ids[keys["CachedSearchRecommit"]]},
              "screenshot": str(ARTIFACTS / f"auto_{combination}.png")}
    seen = run_browser_script("check_auto.mjs", auto_server, config, tmp_path / "config.json", vue_nodes,
                              timeout=1200)
    assert seen["extensionErrors"] == []
    assert seen["vueNodes"] in (vue_nodes, None)
    assert seen["runs"] == {"calibrate": "execution_success", "wide": "execution_success"}, seen["runs"]
    (entry,) = [entry for entry in auto_server.get("/history").values()
                if entry["prompt"][2].get(ids[keys["CachedSearchSampler"]], {}).get("inputs", {}).get("seed") == seed]
    (budget,) = entry["outputs"][ids[keys["CachedSearchSampler"]]]["cachedsearch_budget"]
    (ARTIFACTS / f"auto_{combination}.json").write_text(json.dumps({"budget": budget, "seen": seen}, indent=1))
    assert budget["auto"]["used"] is True, budget["auto"]
    # The width the line names is the width that ran (fewer only with a note saying why).
    assert budget["width"] == budget["auto"]["width"] or budget["auto"].get("narrowed"), budget
    for panel in ("sampler", "recommit"):  # the Recommit's delivery carries the search's budget
        shown = seen["panels"][panel]["text"]
        missing = [figure for figure in figures_shown(budget) if figure not in shown]
        assert missing == [], (panel, missing, shown)
