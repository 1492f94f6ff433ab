"""The saved drafts in the artist's hands, in headless Chromium on the pinned frontend (classic) and the newest
(Nodes 2.0): the cap setting's default is 4 GB and a new value is the cap the server keeps; the settings panel
finds it; the Saved drafts dialog lists the drafts per model and clears them all. Screenshots:
test-artifacts/comfyui-<version>/saved_work_<frontend>_{settings,dialog,cleared}.png."""

import json
import subprocess

import pytest
from test_browser import ARTIFACTS, browser_available, frontend_version, run_browser_script
from test_draft_store_comfy import drafts_folder, search

from scripts.workflow_format import api_to_gui

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]
ROUTE = "/cachedsearch/saved_work"


@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", False), ("newest", True)])
def test_the_cap_setting_and_the_saved_drafts_dialog(request, frontend, vue_nodes, tmp_path):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    (entry,) = server.run_batch([search(seed=7500, num_candidates=2)])
    assert entry["status"]["status_str"] == "success"
    models = server.get(ROUTE)["drafts"]  # the server is shared: earlier tests may have saved other models' drafts
    drafts = sum(model["drafts"] for model in models)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = f"saved_work_{frontend_version(frontend)}_{'nodes2' if vue_nodes else 'classic'}"
    shots = {shot: str(ARTIFACTS / f"{name}_{shot}.png") for shot in ("settings", "dialog", "cleared")}
    try:
        seen = run_browser_script("check_saved_work.mjs", server, {"screenshots": shots}, tmp_path / "config.json",
                                  vue_nodes, timeout=600)
    finally:
        server.request("POST", f"{ROUTE}/cap", {"gigabytes": 4})
        server.request("POST", "/settings/CachedSearch.SavedDrafts.CapGB", 4)
    assert seen["extensionErrors"] == [], seen
    assert seen["defaultValue"] == 4 and seen["capAfterSetting"] == 2 * 1024**3
    dialog_lines = seen["dialog"].splitlines()
    for model in models:  # one line per model with its count
        assert [line for line in dialog_lines if (model["model"] or "") in line
                and f"{model['drafts']} draft" in line], (model, seen["dialog"])
    assert str(drafts_folder(server)) in seen["dialog"] and "4 GB by default" in seen["dialog"]
    cleared_lines = seen["cleared"].splitlines()  # the same dialog, drawn again: its heading, then what was deleted
    assert cleared_lines[0] == dialog_lines[0] and f"Deleted {drafts} draft" in seen["cleared"]
    assert "No draft is saved." in seen["cleared"]
    assert not list(drafts_folder(server).glob("*.safetensors"))
    assert json.loads((drafts_folder(server) / "cap.json").read_text()) == {"max_bytes": 4 * 1024**3}


def test_the_samplers_panel_says_when_its_drafts_could_not_be_kept(comfy_server, tmp_path):
    """A search queued from the GUI while the saved folder is a full disk (a one-page tmpfs over it): it delivers,
    and the Sampler's panel says in one line that its drafts were not kept. Screenshot:
    test-artifacts/comfyui-<version>/saved_work_not_kept.png."""
    folder = drafts_folder(comfy_server)
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here ({mounted.stderr.decode().strip()}); "
                    "tests/test_saved_work_disk_full.py covers the panel's payload")
    try:
        graph = search(seed=7600, num_candidates=2)
        # the Sampler first, in the screenshot's top left, its row tall enough for its panel below its widgets
        order = ["search", *(key for key in graph if key != "search")]
        layout = {key: (290 + 420 * (index % 4), 60 + 760 * (index // 4), 380, 700) for index, key in enumerate(order)}
        workflow = tmp_path / "workflow.json"
        workflow.write_text(json.dumps(api_to_gui(graph, comfy_server.get("/object_info"), layout,
                                                  seed_control="fixed")))
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        seen = run_browser_script("check_drafts_reused.mjs", comfy_server,
                                  {"workflow": str(workflow), "screenshot": str(ARTIFACTS / "saved_work_not_kept.png")},
                                  tmp_path / "config.json", vue_nodes=False, timeout=600)
    finally:
        subprocess.run(["umount", str(folder)], check=True)
    assert seen["outcome"] == "success" and seen["extensionErrors"] == []
    line = f"2 drafts not kept on disk (No space left on device, {folder}): this search delivered them; the next " \
        "run saves them once there is room."
    assert [summary for summary in seen["summaries"] if line in summary], seen["summaries"]
