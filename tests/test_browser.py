"""The frontend extension in headless Debian Chromium against the real server, on a frontend matrix: the
frontend package this runtime pins and the newest published one (--front-end-root), each with Nodes 2.0
(Comfy.VueNodes.Enabled) off and on. The full flow (a search, reload, re-queue, seed ranges) runs once, on the
pinned frontend in classic mode; the other combinations load the workflows and show stored results."""

import copy
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from scripts.graphs import combined_verifier_search, tiny_workflow_variant
from scripts.workflow_format import api_to_gui

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BROWSER_TESTS = REPO_ROOT / "tests" / "browser"
ARTIFACTS = REPO_ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
NEWEST_FRONTEND = REPO_ROOT / ".runtimes" / "frontend-1.58.1"  # fetched by scripts/setup_browser.sh
CANDIDATES = 3
FIRST_SEED = 1000
UNKNOWN_NODE_TYPE = "CachedSearchNodeNoExtensionProvides"


def browser_available() -> bool:
    return os.path.exists(CHROMIUM) and (BROWSER_TESTS / "node_modules" / "playwright-core").exists() and \
        shutil.which("node") is not None


pytestmark = pytest.mark.skipif(
    not browser_available() and os.environ.get("CI") != "true",
    reason="needs Debian's chromium and `npm ci` in tests/browser (scripts/test.sh installs both when run as root)",
)


@pytest.fixture(scope="module")
def newest_frontend_server(start_comfy_server):
    if not (NEWEST_FRONTEND / "index.html").exists() and os.environ.get("CI") != "true":
        pytest.skip(f"no {NEWEST_FRONTEND}: run scripts/setup_browser.sh")
    return start_comfy_server("comfy_newest_frontend", ["--front-end-root", str(NEWEST_FRONTEND)])


def stored_results_workflow(tiny: dict, object_info: dict) -> dict:
    """The tiny workflow at the frontend's default node width, carrying results as a saved workflow does."""
    layout = {key: (60 + 340 * (index % 5), 80 + 330 * (index // 5), 300, 200) for index, key in enumerate(tiny)}
    gui = api_to_gui(tiny, object_info, layout)
    drafts = [{"candidate": i + 1, "seed": 7 + i, "seconds": 41.25, "skipped": 29, "calls": 50} for i in range(3)]
    stored = {
        "CachedSearchSampler": {"text": ["report"], "cachedsearch_drafts": drafts},
        "CachedSearchSamplerAdvanced": {"text": ["report"], "cachedsearch_drafts": drafts},
        "CachedSearchVerifier": {"text": ["scores"], "cachedsearch_ranking": [
            dict(row, score=0.5 - 0.1 * index, winner=index == 0) for index, row in enumerate(drafts)],
            "cachedsearch_pruned": [{"seed": 20, "preview_score": 0.125, "seconds": 16.5, "skipped": 8,
                                     "calls": 20, "prune_step": 20}]},
        "CachedSearchRecommit": {"text": ["report"], "cachedsearch_delivery": [{
            "seed": 7, "candidate": 1, "mode": "commit", "num_candidates": 3, "commit_seconds": 95.5,
            "relative_cost": 0.6123}]},
    }
    for node in gui["nodes"]:
        if node["type"] in stored:
            node["properties"]["cachedsearch_last_output"] = stored[node["type"]]
    return gui


def check_ui(server, tmp_path, frontend: str, full: bool, vue_nodes: bool) -> dict:
    object_info = server.get("/object_info")
    api = json.loads((REPO_ROOT / "workflows" / "api" / "cachedsearch_wan21_t2v.json").read_text())
    tiny = tiny_workflow_variant(api, pooled=False)
    layout = {key: (60 + 380 * (index % 5), 80 + 330 * (index // 5), 340, 260) for index, key in enumerate(tiny)}
    files = {"tiny": api_to_gui(tiny, object_info, layout),
             "tiny_fixed": api_to_gui(tiny, object_info, layout, seed_control="fixed"),
             "stored": stored_results_workflow(copy.deepcopy(tiny), object_info),
             "unknown_node": api_to_gui(tiny, object_info, layout)}
    files["unknown_node"]["nodes"][0]["type"] = UNKNOWN_NODE_TYPE
    for name, workflow in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(workflow))
    ARTIFACTS.mkdir(exist_ok=True)
    # The distributed workflow needs ComfyUI-Distributed's nodes: tests/test_distributed.py loads it on its servers.
    shipped = sorted(str(path) for path in (REPO_ROOT / "workflows").glob("*.json")
                     if not path.stem.endswith("_distributed"))
    # The missing-node check must see what this server lacks: an unknown type, and ComfyUI-Distributed's collector
    # (not installed on these servers).
    missing_node_probes = {str(tmp_path / "unknown_node.json"): [UNKNOWN_NODE_TYPE],
                           str(REPO_ROOT / "workflows" / "cachedsearch_wan21_t2v_distributed.json"):
                               ["DistributedCollector"]}
    config = {"workflows": shipped,
              "tiny_workflow": str(tmp_path / "tiny.json"), "tiny_workflow_fixed": str(tmp_path / "tiny_fixed.json"),
              "stored_workflow": str(tmp_path / "stored.json"), "missing_node_probes": list(missing_node_probes),
              "candidates": CANDIDATES, "first_seed": FIRST_SEED,
              "full": full,
              "screenshot": str(ARTIFACTS / f"verifier_ranking_{frontend}_{'nodes2' if vue_nodes else 'classic'}.png")}
    if full:
        # ImageReward + VideoScore + Combine Scores: a table per verifier node with each verifier's column
        combined = combined_verifier_search(seed=50)
        combined_layout = {key: (60 + 380 * (index % 5), 80 + 330 * (index // 5), 340, 260)
                           for index, key in enumerate(combined)}
        (tmp_path / "combined.json").write_text(json.dumps(api_to_gui(combined, object_info, combined_layout)))
        config["combined_workflow"] = str(tmp_path / "combined.json")
    (tmp_path / "config.json").write_text(json.dumps(config))
    server.request("POST", "/settings/Comfy.TutorialCompleted", True)
    server.request("POST", "/settings/Comfy.VueNodes.Enabled", vue_nodes)
    try:
        completed = subprocess.run(["node", str(BROWSER_TESTS / "check_ui.mjs"), server.url,
                                    str(tmp_path / "config.json")], capture_output=True, text=True, timeout=900)
    finally:
        server.request("POST", "/settings/Comfy.VueNodes.Enabled", False)
    assert completed.returncode == 0, completed.stderr[-4000:]
    seen = json.loads(completed.stdout.strip().splitlines()[-1])
    # every combination: shipped workflows load cleanly, stored results show, unclipped at the default width
    assert seen["vueNodes"] in (vue_nodes, None)
    assert seen["missingInProbes"] == missing_node_probes  # the check below is not blind on this frontend
    assert seen["missing"] == {path: [] for path in config["workflows"]}
    assert seen["loadWarnings"] == {path: [] for path in config["workflows"]}
    assert seen["extensionErrors"] == []
    assert seen["clipped"] == []
    stored = " ".join(seen["storedPanels"])
    assert "3 drafts, 58% of transformer calls skipped (~2.38x fewer), mean 41.25 s per draft" in stored
    assert "delivered seed 7 (candidate 1, commit); search cost 61.2% of full best-of-3" in stored
    assert "pruned20preview 0.125040%16.50" in stored  # a pruned search's dropped candidate, below the ranking
    return seen


def test_results_appear_in_the_browser_survive_a_reload_and_a_cached_requeue(comfy_server, tmp_path):
    seen = check_ui(comfy_server, tmp_path, "pinned", full=True, vue_nodes=False)
    assert seen["toleranceErrors"] == []
    rows = seen["rows"]
    assert len(rows) == CANDIDATES and [row["winner"] for row in rows].count(True) == 1
    assert rows[0]["winner"] and rows[0]["score"] == max(row["score"] for row in rows)  # ranked, winner first
    served = seen["served"]  # the Verifier's UI payload as the server sent it over the websocket
    assert len(served) == CANDIDATES
    shown = {row["seed"]: row["score"] for row in rows}
    assert shown == {row["seed"]: pytest.approx(row["score"]) for row in served}
    winner = max(served, key=lambda row: row["score"])
    assert [row["seed"] for row in rows if row["winner"]] == [winner["seed"]] and winner["winner"]
    delivered = f"delivered seed {winner['seed']} (candidate {winner['candidate']}, commit); search cost"
    assert delivered in " ".join(seen["panels"])
    assert any(panel.startswith("3 drafts, ") and "per draft" in panel for panel in seen["panels"])
    assert seen["overlay"]
    assert seen["rowsAfterReload"] == CANDIDATES
    # a freshly loaded copy queued again is served from ComfyUI's cache, and still shows that search
    assert seen["reusedRows"] == CANDIDATES
    assert delivered in " ".join(seen["reusedPanels"])
    # two queues of the shipped seed control (randomize) search two disjoint seed ranges
    first, second = seen["seedRuns"]
    assert first == list(range(FIRST_SEED, FIRST_SEED + CANDIDATES))
    assert len(second) == CANDIDATES and not set(first) & set(second)
    assert (ARTIFACTS / "verifier_ranking_pinned_classic.png").stat().st_size > 0
    # the combined search: a table per verifier node, each verifier's column beside the combined score
    by_headers = {tuple(table["headers"]): table["rows"] for table in seen["tables"]}
    aspects = ("visual quality", "temporal consistency", "dynamic degree", "text-to-video alignment",
               "factual consistency")
    combined_rows = by_headers[("", "#", "seed", "ImageReward", "VideoScore", "score", "skipped", "s")]
    video_rows = by_headers[("", "#", "seed", *aspects, "score", "skipped", "s")]
    assert len(combined_rows) == len(video_rows) == 3
    assert combined_rows[0]["winner"] and combined_rows[0]["score"] == max(row["score"] for row in combined_rows)
    video_by_seed = {row["seed"]: row["score"] for row in video_rows}
    for row in combined_rows:
        assert row["columns"]["VideoScore"] == pytest.approx(video_by_seed[row["seed"]], abs=1e-3)
    for row in video_rows:
        assert row["score"] == pytest.approx(sum(row["columns"][a] for a in aspects) / 5, abs=2e-3)
    # right after the live run (the frontend's progress text and image preview share the node's height) nothing is
    # clipped either: each panel asks for its content plus the DOM widget's margins
    assert seen["clippedAfterRun"] == []


@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", True), ("newest", False), ("newest", True)])
def test_workflows_and_stored_results_on_each_frontend_and_node_renderer(request, tmp_path, frontend, vue_nodes):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    seen = check_ui(server, tmp_path, frontend, full=False, vue_nodes=vue_nodes)
    if frontend == "newest":
        assert seen["frontend"] == NEWEST_FRONTEND.name.split("-")[1]
