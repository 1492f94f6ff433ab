"""The shipped workflow in the shape of ComfyUI's official templates (its pipeline in a subgraph, the inputs an artist
sets promoted onto the subgraph node) in headless Chromium against the real server, on each runtime's pinned frontend
and 1.58.1 (classic and Nodes 2.0): what the frontend queues for it, for it nested in another subgraph and for an
official template with our nodes inside, is what scripts/workflow_format.py's gui_to_api reads from the file; its
tiny variant loads without missing nodes or warnings, runs, shows the panels inside the subgraph, delivers a draft
picked there, says from outside what the search did, and a second queue searches a fresh seed range. Screenshots:
test-artifacts/comfyui-<version>/shipped_subgraph_<frontend>_<renderer>_*.png."""

import copy
import importlib.util
import json
import pathlib

import pytest
from test_browser import ARTIFACTS, REPO_ROOT, browser_available, frontend_version, run_browser_script, tiny_shipped

from scripts.subgraph_workflow import wrap_in_subgraph
from scripts.workflow_format import gui_to_api, subgraph_definitions

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not browser_available(),
                                 reason="needs Debian's chromium and `npm ci` in tests/browser")]

SUBGRAPH_WORKFLOW = "14 Wan 2.1 in a subgraph"
OFFICIAL_TEMPLATE = "video_wan2_2_14B_t2v.json"  # comfyui-workflow-templates' Wan 2.2 A14B: a subgraph, 11 promoted


def official_template_with_our_cache() -> dict | None:
    """ComfyUI's official Wan 2.2 A14B template with a CachedSearch Apply Cache on its high-noise expert's model,
    inside the template's subgraph; None where this runtime's venv lacks the templates package."""
    spec = importlib.util.find_spec("comfyui_workflow_templates_json")
    if spec is None:
        return None
    path = pathlib.Path(spec.submodule_search_locations[0]) / "templates" / OFFICIAL_TEMPLATE
    template = json.loads(path.read_text())
    (subgraph,) = subgraph_definitions(template).values()
    sampler = next(node for node in subgraph["nodes"] if node["type"] == "KSamplerAdvanced"
                   and node["widgets_values"][0] == "enable")  # the high-noise expert's: it adds the noise
    link = next(link for link in subgraph["links"] if link["id"] == sampler["inputs"][0]["link"])
    cache_id, new_link = subgraph["state"]["lastNodeId"] + 1, subgraph["state"]["lastLinkId"] + 1
    subgraph["nodes"].append({
        "id": cache_id, "type": "CachedSearchApplyCache", "pos": [sampler["pos"][0], sampler["pos"][1] - 300],
        "size": [340, 200], "flags": {}, "order": 0, "mode": 0,
        "inputs": [{"name": "model", "type": "MODEL", "link": link["id"]}],
        "outputs": [{"name": "MODEL", "type": "MODEL", "links": [new_link]}],
        "properties": {}, "widgets_values": ["adaptive", 0.15, 2, 1, 2]})
    link.update(target_id=cache_id, target_slot=0)
    subgraph["links"].append({"id": new_link, "origin_id": cache_id, "origin_slot": 0, "target_id": sampler["id"],
                              "target_slot": 0, "type": "MODEL"})
    sampler["inputs"][0]["link"] = new_link
    subgraph["state"].update(lastNodeId=cache_id, lastLinkId=new_link)
    return template


@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", False), ("newest", False), ("newest", True)])
def test_the_subgraph_workflow_queues_what_gui_to_api_reads_and_runs_its_loop(request, tmp_path, frontend, vue_nodes):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    object_info = server.get("/object_info")
    shipped = json.loads((REPO_ROOT / "workflows" / f"{SUBGRAPH_WORKFLOW}.json").read_text())
    save = next(node["id"] for node in shipped["nodes"] if node["type"] == "SaveVideo")
    workflows = {"shipped": shipped, "tiny": tiny_shipped(SUBGRAPH_WORKFLOW, object_info),
                 # two deep: the shipped subgraph node inside another subgraph ("20:19:10")
                 "nested": wrap_in_subgraph(copy.deepcopy(shipped), object_info, "outer", {save}, [])}
    official = official_template_with_our_cache()
    if official is not None and {node["type"] for graph in subgraph_definitions(official).values()
                                 for node in graph["nodes"]} <= set(object_info):
        workflows["official"] = official
    for name, workflow in workflows.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(workflow))
    combination = f"{frontend_version(frontend)}_{'nodes2' if vue_nodes else 'classic'}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    config = {"prompts": {name: str(tmp_path / f"{name}.json") for name in workflows},
              "tiny_workflow": str(tmp_path / "tiny.json"),
              "screenshot": str(ARTIFACTS / f"shipped_subgraph_{combination}.png")}
    server.reset_caches()  # the first run drafts every seed, whatever ran on this server before
    seen = run_browser_script("check_shipped_subgraph.mjs", server, config, tmp_path / "config.json", vue_nodes)
    (ARTIFACTS / f"shipped_subgraph_{combination}.json").write_text(json.dumps(seen, indent=1))
    assert seen["vueNodes"] in (vue_nodes, None)
    # what the frontend queues is what gui_to_api reads: execution ids "outer:inner", promoted values, the output
    for name, workflow in workflows.items():
        queued = seen["prompts"][name]
        assert queued["missing"] == [], (name, queued["missing"])
        assert queued["prompt"] == gui_to_api(copy.deepcopy(workflow), object_info), name
    assert "official" in workflows or official is None, "the official template's nodes are missing on this runtime"
    assert {key.count(":") for key in seen["prompts"]["nested"]["prompt"]} == {0, 2}
    # the tiny variant loads cleanly and runs inside the subgraph
    assert seen["missing"] == [] and seen["loadWarnings"] == [] and seen["extensionErrors"] == []
    first = seen["firstRun"]
    assert first["end"] == "execution_success", first
    assert {key.split(":")[0] for key in first["ids"] if ":" in key} == {seen["subgraphNode"]}, first["ids"]
    # the panels inside: eight drafts ranked (one winner), their frames loaded, the Sampler's and Recommit's lines
    assert len(seen["rows"]) == 8 and sum(row["winner"] for row in seen["rows"]) == 1, seen["rows"]
    assert seen["framesLoaded"] and all(seen["framesLoaded"]), seen["framesLoaded"]
    assert seen["samplerPanel"].startswith("8 drafts"), seen["samplerPanel"]
    assert seen["firstDelivery"].startswith("delivered seed"), seen["firstDelivery"]
    # "Commit this" inside the subgraph delivers the picked draft
    target = seen["commitTarget"]
    assert seen["commit"]["end"] == "execution_success", seen["commit"]
    assert (seen["commit"]["delivered"]["seed"], seen["commit"]["delivered"]["candidate"]) == \
        (target["seed"], target["candidate"])
    assert f"delivered seed {target['seed']} (candidate {target['candidate']}, commit)" in seen["commitDelivery"]
    # from outside, the subgraph node says what the search inside did
    outside = seen["outside"]
    assert "CachedSearch inside:" in outside and "ranked 8 drafts" in outside, outside
    assert "open the subgraph" in outside, outside
    # queued again, the promoted seed (randomize) searches another range
    assert seen["secondRun"]["end"] == "execution_success", seen["secondRun"]
    assert abs(seen["secondRun"]["seed"] - first["seed"]) >= 8, (first["seed"], seen["secondRun"]["seed"])
