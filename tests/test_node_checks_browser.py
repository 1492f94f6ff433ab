"""What the nodes say before a run and where "cost details" leads (#53 items 6, 7 and 8) in headless Chromium against
the real server, on the runtime's pinned frontend (1.32.9 on 0.3.75, 1.49.6 on 0.33.0) and 1.58.1 classic and Nodes
2.0: the Pruning Plan says on the node, in the node's own words, that it would refuse a schedule whose rounds fall (the
line goes once it is fixed); Calibrate's refused cache window says, under each input ComfyUI files it, that only
warmup_steps and cooldown_steps need changing; "cost details" opens the Sampler's doc page as a page that reloads and
whose links open the other pages (outside web/ too) with their images. Screenshots:
test-artifacts/comfyui-<version>/node_checks_<frontend>_<renderer>_*.png."""

import json
import re

import pytest
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
from test_calibrate_browser import workflow_files

from cachedsearch_core.pruning import PruningSchedule
from scripts.graphs import tiny_workflow_variant

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]

FALLING = "10:4, 5:2"
# ComfyUI files a validate_inputs refusal under every input the method reads (docs/gui.md); the message names the two.
WINDOW_NOTE = re.compile(r"^warmup_steps, cooldown_steps: got 5 and 5, .*\. Only warmup_steps and cooldown_steps need "
                         r"changing \(when queued, ComfyUI files this under each input the node checks\)$")


def falling_refusal() -> str:
    with pytest.raises(ValueError) as refused:
        PruningSchedule(FALLING)
    return str(refused.value)


@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", False), ("newest", False), ("newest", True)])
def test_the_nodes_say_what_they_would_refuse_before_a_run(request, tmp_path, frontend, vue_nodes):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    object_info = server.get("/object_info")
    pruned = tmp_path / "pruned.json"
    pruned.write_text(json.dumps(tiny_shipped("02 Wan 2.1 pruned search", object_info)))
    stored = tmp_path / "stored_search.json"  # workflow_files writes its own stored.json
    tiny = tiny_workflow_variant(json.loads((REPO_ROOT / "workflows" / "api" / "01 Wan 2.1 (start here).json")
                                            .read_text()), pooled=False)
    stored.write_text(json.dumps(stored_results_workflow(tiny, object_info, write_frames(server))))
    combination = f"{frontend_version(frontend)}_{'nodes2' if vue_nodes else 'classic'}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    config = {"pruned_workflow": str(pruned), "calibrate_workflow": workflow_files(server, tmp_path)["live_workflow"],
              "stored_workflow": str(stored),
              "screenshot": str(ARTIFACTS / f"node_checks_{combination}.png")}
    seen = run_browser_script("check_node_checks.mjs", server, config, tmp_path / "config.json", vue_nodes, timeout=600)
    assert seen["vueNodes"] in (vue_nodes, None)
    assert seen["extensionErrors"] == []
    # item 6: every error ComfyUI files for the window names the two inputs to change
    errors = seen["windowErrors"]
    assert isinstance(errors, list) and errors, errors
    assert {error["type"] for error in errors} == {"custom_validation_failed"}
    for error in errors:
        name, _, message = error["details"].partition(" - ")
        assert name == error["extra_info"]["input_name"] and WINDOW_NOTE.match(message), error
    # item 7: the falling schedule is said on the node as typed, in the node's own words; gone once fixed
    assert seen["failed"] == {}, seen
    assert seen["lineBefore"] is None
    assert seen["fallingLine"] == f"Refused when queued: {falling_refusal()}"
    assert seen["fallingTitle"] == f"Prune drafts in rounds: {FALLING}"
    assert seen["fixedLine"] is None
    # item 8: a page with the Sampler's doc, at an address that reloads, whose links open the other pages
    doc = seen["docPage"]
    assert doc["heading"] == "CachedSearch Sampler" and doc["paragraphs"] > 5, doc
    assert doc["url"].endswith("/extensions/cachedsearch/docs/page.html?doc=web/docs/CachedSearchSampler.md"), doc
    assert seen["docPageReloaded"] == doc
    assert seen["linkedPage"]["heading"] == "How CachedSearch works", seen["linkedPage"]
    assert seen["linkedPage"]["url"].endswith("page.html?doc=docs/method.md")
    assert seen["imagePage"]["heading"] == "CachedSearch Verifier"
    assert seen["images"] and all(image["loaded"] for image in seen["images"]), seen["images"]
