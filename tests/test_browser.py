"""The frontend extension in headless Debian Chromium against the real server and frontend package."""

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


def browser_available() -> bool:
    return os.path.exists(CHROMIUM) and (BROWSER_TESTS / "node_modules" / "playwright-core").exists() and \
        shutil.which("node") is not None


pytestmark = pytest.mark.skipif(
    not browser_available() and os.environ.get("CI") != "true",
    reason="needs Debian's chromium and `npm ci` in tests/browser (scripts/test.sh installs both when run as root)",
)


def test_results_appear_in_the_browser_and_survive_a_reload(comfy_server, tmp_path):
    object_info = comfy_server.get("/object_info")
    api = json.loads((REPO_ROOT / "workflows" / "api" / "cachedsearch_wan21_t2v.json").read_text())
    tiny = tiny_workflow_variant(api, pooled=False)
    layout = {key: (60 + 380 * (index % 5), 80 + 330 * (index // 5), 340, 260) for index, key in enumerate(tiny)}
    (tmp_path / "tiny.json").write_text(json.dumps(api_to_gui(tiny, object_info, layout)))
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "verifier_ranking.png"
    workflows = sorted(str(path) for path in (REPO_ROOT / "workflows").glob("*.json"))
    combined = combined_verifier_search(seed=50)
    combined_layout = {key: (60 + 380 * (index % 5), 80 + 330 * (index // 5), 340, 260)
                       for index, key in enumerate(combined)}
    (tmp_path / "combined.json").write_text(json.dumps(api_to_gui(combined, object_info, combined_layout)))
    config = {"workflows": workflows, "tiny_workflow": str(tmp_path / "tiny.json"), "candidates": 3,
              "screenshot": str(screenshot), "combined_workflow": str(tmp_path / "combined.json")}
    (tmp_path / "config.json").write_text(json.dumps(config))
    comfy_server.request("POST", "/settings/Comfy.TutorialCompleted", True)

    completed = subprocess.run(["node", str(BROWSER_TESTS / "check_ui.mjs"), comfy_server.url,
                                str(tmp_path / "config.json")], capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    seen = json.loads(completed.stdout.strip().splitlines()[-1])

    assert seen["missing"] == {path: [] for path in workflows}
    assert seen["extensionErrors"] == []
    assert seen["toleranceErrors"] == []
    rows = seen["rows"]
    assert len(rows) == 3 and [row["winner"] for row in rows].count(True) == 1
    assert rows[0]["winner"] and rows[0]["score"] == max(row["score"] for row in rows)  # ranked, winner first
    served = seen["served"]  # the Verifier's UI payload as the server sent it over the websocket
    assert len(served) == 3
    shown = {row["seed"]: row["score"] for row in rows}
    assert shown == {row["seed"]: pytest.approx(row["score"]) for row in served}
    winner = max(served, key=lambda row: row["score"])
    assert [row["seed"] for row in rows if row["winner"]] == [winner["seed"]] and winner["winner"]
    assert f"delivered seed {winner['seed']} (candidate {winner['candidate']}, commit); search cost" in " ".join(
        seen["panels"])
    assert any(panel.startswith("3 drafts, ") and "per draft" in panel for panel in seen["panels"])
    assert seen["overlay"]
    assert seen["rowsAfterReload"] == 3

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
    assert screenshot.stat().st_size > 0
