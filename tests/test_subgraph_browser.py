"""The artist's loop with the search nodes inside a subgraph (#53 item 10), in headless Chromium against the real
server, on the frontend matrix (each runtime's pinned frontend, 1.32.9 on ComfyUI 0.3.75 and 1.49.6 on 0.33.0, and
1.58.1, Nodes 2.0 off and on): the tiny Wan 2.1 search's Sampler, decodes, Verifier and Recommit converted into a
subgraph as an artist does (Comfy.Graph.ConvertToSubgraph), run live; its panels, drafts, "Commit this"; that
subgraph converted into another (nested): the wait mode's banner and "Keep this" answering it, "‹ earlier", and what
the outer subgraph node shows from the top-level graph; a Calibrate in a subgraph shows its table. Screenshots:
test-artifacts/comfyui-<version>/subgraph_<frontend>_<renderer>_*.png."""

import json

import pytest
from test_browser import ARTIFACTS, REPO_ROOT, browser_available, frontend_version, run_browser_script
from test_calibrate_browser import workflow_files

from report_text import numbers, says
from scripts.graphs import tiny_workflow_variant
from scripts.workflow_format import api_to_gui, column_layout

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]

SEARCH_NODES = ("CachedSearchSampler", "CachedSearchVerifier", "CachedSearchRecommit")
# The seeds of each combination's resumed search, apart: a server keeps the drafts an earlier check saved
RESUME_SEEDS = {("pinned", False): 1000, ("pinned", True): 2000, ("newest", False): 3000, ("newest", True): 4000}


def check_subgraph(server, tmp_path, frontend: str, vue_nodes: bool) -> dict:
    object_info = server.get("/object_info")
    api = json.loads((REPO_ROOT / "workflows" / "api" / "01 Wan 2.1 (start here).json").read_text())
    tiny = tiny_workflow_variant(api, pooled=False)
    del tiny["frames"]  # the frame dump other tests read; not part of the workflow
    # the Sampler's model through the Cancel press the resume check arms (it stays outside the subgraphs)
    (sampler,) = [node for node in tiny.values() if node["class_type"] == "CachedSearchSampler"]
    tiny["press_cancel"] = {"class_type": "CachedSearchTestPressCancel",
                            "inputs": {"model": sampler["inputs"]["model"]}}
    sampler["inputs"]["model"] = ["press_cancel", 0]
    layout, _ = column_layout(tiny, {key: index % 5 for index, key in enumerate(tiny)}, object_info)
    path = tmp_path / "tiny_workflow_fixed.json"
    path.write_text(json.dumps(api_to_gui(tiny, object_info, layout, seed_control="fixed")))
    config = {"tiny_workflow_fixed": str(path), "resume_seed": RESUME_SEEDS[(frontend, vue_nodes)],
              "calibrate_workflow": workflow_files(server, tmp_path)["live_workflow"]}
    combination = f"{frontend_version(frontend)}_{'nodes2' if vue_nodes else 'classic'}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    config["screenshot"] = str(ARTIFACTS / f"subgraph_{combination}.png")
    server.reset_caches()  # the first search runs every node, whatever ran on this server before
    seen = run_browser_script("check_subgraph.mjs", server, config, tmp_path / "config.json", vue_nodes, timeout=1500)
    (ARTIFACTS / f"subgraph_{combination}.json").write_text(json.dumps(seen, indent=1))  # what it saw, to read
    assert seen["vueNodes"] in (vue_nodes, None)
    return seen


def delivered(text: str) -> tuple:
    """(seed, candidate, mode) of a Recommit panel's "delivered seed S (candidate C, mode)"."""
    head = text.split(";")[0]
    seed = int(head.split("delivered seed ")[1].split(" ")[0])
    candidate, mode = head.split("(candidate ")[1].rstrip(")").split(", ")
    return seed, int(candidate), mode


@pytest.fixture(scope="module")
def pinned_subgraph_server(start_comfy_server):
    """A server of this file's own for the pinned frontend: on the session's shared server, after the whole suite's
    runs, "Commit this" in the subgraph once queued nothing within two minutes on ComfyUI 0.3.75 (not seen on a
    server of its own, nor on 0.33.0; docs/gui.md)."""
    return start_comfy_server("comfy_subgraph_pinned")


@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", False), ("pinned", True), ("newest", False),
                                                 ("newest", True)])
def test_the_loop_inside_a_subgraph_and_a_nested_one(request, tmp_path, frontend, vue_nodes):
    server = request.getfixturevalue("pinned_subgraph_server" if frontend == "pinned" else "newest_frontend_server")
    seen = check_subgraph(server, tmp_path, frontend, vue_nodes)
    assert seen["failed"] == {}, seen["failed"]
    assert seen["extensionErrors"] == []
    # converting nodes that show a run's panels logs nothing (it logged a NullGraphError from the panels' script)
    assert seen["flatRun"] == "execution_success"
    assert seen["conversionErrors"] == [], seen["conversionErrors"]
    # the search ran inside the subgraph: the prompt names its nodes by path
    sampler = next(entry.split(" ")[1] for entry in seen["innerIds"] if entry.startswith("CachedSearchSampler "))
    assert ":" in sampler and sampler in seen["firstRun"]["ids"], seen["innerIds"]
    assert seen["firstRun"]["end"] == "execution_success"
    # the panels inside: three drafts ranked, each playing its frames, a delivery
    assert len(seen["firstRows"]) == 3 and sum(row["winner"] for row in seen["firstRows"]) == 1, seen["firstRows"]
    assert seen["framesLoaded"] and all(seen["framesLoaded"]), seen["framesLoaded"]
    assert seen["samplerPanel"].startswith("3 drafts"), seen["samplerPanel"]
    assert seen["firstDelivery"].startswith("delivered seed"), seen["firstDelivery"]
    # "Commit this" on the draft the verifier did not choose delivers it (it failed: "no Recommit node takes these
    # candidates")
    target = seen["commitTarget"]
    assert seen["commit"]["end"] == "execution_success", seen["commit"]
    assert f"commit candidate {target['candidate']} (seed {target['seed']})" in seen["commit"]["status"], seen["commit"]
    assert (seen["commit"]["delivered"]["seed"], seen["commit"]["delivered"]["candidate"]) == \
        (target["seed"], target["candidate"])
    assert delivered(seen["commit"]["delivery"]) == (target["seed"], target["candidate"], "commit")
    # nested: the search's nodes two subgraphs deep
    search = [entry for entry in seen["nestedIds"] if entry.split(" ")[0] in SEARCH_NODES]
    assert len(search) == 3 and all(entry.split(" ")[1].count(":") == 2 for entry in search), seen["nestedIds"]
    # wait mode: the banner shows on the Recommit inside, and Keep on a draft answers the waiting run
    assert (seen["banner"] or "").startswith("Waiting") and numbers(seen["banner"])[0] == 3, seen["banner"]
    keep = seen["keepTarget"]
    assert seen["waitRun"]["end"] == "execution_success", seen["waitRun"]
    assert (seen["waitRun"]["delivered"]["seed"], seen["waitRun"]["delivered"]["mode"]) == (keep["seed"], "keep")
    assert delivered(seen["waitRun"]["delivery"]) == (keep["seed"], keep["candidate"], "keep")
    # each search drafted its own seeds: the waiting run's, and the nested one's before it
    assert {row["seed"] for row in seen["verifierWhileWaiting"]} == set(range(seen["waitRun"]["seed"],
                                                                             seen["waitRun"]["seed"] + 3))
    # "‹ earlier" shows the search before (the nested run's seed range) on the panels
    assert seen["nestedRun"]["end"] == "execution_success"
    assert seen["earlierLabel"].startswith("earlier run 1 of"), seen["earlierLabel"]
    assert {row["seed"] for row in seen["earlierRows"]} == set(range(seen["nestedRun"]["seed"],
                                                                    seen["nestedRun"]["seed"] + 3))
    # from outside, the subgraph node says a search ran inside and where to look, and that it waits for a pick
    assert "waits for your pick" in (seen["outsideWaiting"] or ""), seen["outsideWaiting"]
    outside = seen["outsideAfter"] or ""
    # the node inside that ranked the 3 drafts (its display name), and where its panels are
    assert says(outside, "CachedSearch Verifier", 3) and "open the subgraph" in outside, outside
    # resume of a cancelled search inside the nested subgraph: the same seeds, the saved drafts reused
    assert seen["resumeCancelled"]["end"] == "execution_interrupted", seen["resumeCancelled"]
    assert seen["resumed"]["end"] == "execution_success" and seen["resumed"]["seed"] == seen["resumeCancelled"]["seed"], \
        seen["resumed"]
    assert seen["resumed"]["cost"]["reused_drafts"] == 1, seen["resumed"]["cost"]  # the draft before the cancel
    # Calibrate inside a subgraph shows its table after a run
    assert seen["calibrateRun"] == "execution_success" and seen["calibrateRows"] >= 2, seen
