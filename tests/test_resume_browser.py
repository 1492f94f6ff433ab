"""Resume after a cancel (#53 item 3) in headless Chromium against the real server, on 1.32.9 or 1.49.6 (the
runtime's pinned frontend) and 1.58.1 (classic and Nodes 2.0): a search whose seed control is randomize, cancelled
during a draft, offers on its Sampler to resume; one click queues it again with the cancelled run's seed, computes
only the drafts the store lacks and ends as an uninterrupted run of those seeds does on a fresh server.
Screenshots: test-artifacts/comfyui-<version>/resume_<frontend>_<renderer>_offer.png and _resumed.png."""

import io
import json

import pytest
from PIL import Image
from test_browser import ARTIFACTS, browser_available, frontend_version, run_browser_script
from test_draft_store_comfy import search

from scripts.workflow_format import api_to_gui

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]

WIDTH = 6
STEPS = 40
CANCELLED_IN = 3  # the draft the server presses Cancel in: the two before it are saved, the resume reuses them


@pytest.fixture(scope="module")
def reference_server(start_comfy_server):
    """A server of its own, whose store holds no draft of these searches: the uninterrupted runs."""
    return start_comfy_server("resume_reference")


def outcome(server, entry, ids) -> dict:
    """What a run of the search delivered, without timings: the drafts, the verifier's scores and the pixels of the
    committed frames (a GUI run's PNGs also carry its workflow)."""
    outputs = entry["outputs"]
    drafts = [{key: row[key] for key in ("seed", "skipped", "calls")}
              for row in outputs[ids["search"]]["cachedsearch_drafts"]]
    frames = []
    for image in outputs[ids["save"]]["images"]:
        data = (server.base_dir / "output" / image["subfolder"] / image["filename"]).read_bytes()
        frames.append(Image.open(io.BytesIO(data)).convert("RGB").tobytes())
    return {"drafts": drafts, "ranking": outputs[ids["ranking"]]["text"][0], "frames": frames}


@pytest.mark.parametrize("frontend, vue_nodes, seed", [("pinned", False, 7100), ("newest", False, 7200),
                                                       ("newest", True, 7300)])
def test_a_cancelled_search_resumes_in_one_click_with_only_the_missing_drafts(request, tmp_path, reference_server,
                                                                               frontend, vue_nodes, seed):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    object_info = server.get("/object_info")
    graph = search(seed=seed, num_candidates=WIDTH, search={"steps": STEPS})
    # Cancel pressed by the server at the same call of that draft on every run (one sent from the browser on a
    # progress event lands wherever a busy machine has got to by then), once: the resume runs to the end
    graph["press_cancel"] = {"class_type": "CachedSearchTestPressCancel",
                             "inputs": {"model": graph["search"]["inputs"]["model"]}}
    graph["search"]["inputs"]["model"] = ["press_cancel", 0]
    ids = {key: str(index + 1) for index, key in enumerate(graph)}  # api_to_gui numbers the nodes in order
    layout = {key: (40 + 420 * (index % 4), 60 + 760 * (index // 4), 380, 320) for index, key in enumerate(graph)}
    workflow = tmp_path / "workflow.json"
    workflow.write_text(json.dumps(api_to_gui(graph, object_info, layout, seed_control="randomize")))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    combination = f"{frontend_version(frontend)}_{'nodes2' if vue_nodes else 'classic'}"
    config = {"workflow": str(workflow), "sampler": ids["search"], "verifier": ids["ranking"], "steps": STEPS,
              "screenshot": str(ARTIFACTS / f"resume_{combination}.png")}
    assert server.request("POST", "/cachedsearch_test/press_cancel", {"run": CANCELLED_IN, "call": 3})[0] == 200
    seen = run_browser_script("check_resume.mjs", server, config, tmp_path / "config.json", vue_nodes, timeout=900)
    assert seen["extensionErrors"] == []
    assert seen["cancelled"]["outcome"] == "interrupted"
    cancelled = server.get(f"/history/{seen['cancelled']['promptId']}")[seen["cancelled"]["promptId"]]
    seed = cancelled["prompt"][2][ids["search"]]["inputs"]["seed"]
    assert seen["afterCancel"]["seed"] != seed  # randomize moved the seed: a plain Run would search other seeds
    assert seen["offered"] is not None and seen["offered"]["seed"] == seed, seen
    resumed = seen["resumed"]
    assert resumed["outcome"] == "success", seen
    entry = server.get(f"/history/{resumed['promptId']}")[resumed["promptId"]]
    assert entry["prompt"][2][ids["search"]]["inputs"]["seed"] == seed
    (cost,) = entry["outputs"][ids["search"]]["cachedsearch_cost"]
    assert cost["reused_drafts"] == CANCELLED_IN - 1
    assert resumed["drafts"] == WIDTH - cost["reused_drafts"]  # only the missing drafts were computed
    # the control is back to randomize after that queue, the seed where the resume put it
    assert seen["afterResume"] == {"seed": seed, "control": "randomize"}
    assert any(f"{cost['reused_drafts']} of {WIDTH} drafts reused" in line for line in seen["summaries"]), seen
    # item 9: the panels say the cache once, the pick note the search's own calls, "‹ earlier" only with an earlier run
    (sampler_summary,) = [line for line in seen["summaries"] if "drafts reused" in line]
    assert "Cache: adaptive, tau 0.3 (warmup 2, cooldown 2)." in sampler_summary, sampler_summary
    assert f"never drafts them again ({cost['drafted_calls']} transformer calls)." in seen["pickNote"], seen["pickNote"]
    assert seen["earlierDisabledAfterResume"] is True  # the cancelled run left the Verifier nothing to show
    uninterrupted = reference_server.run_prompt(entry["prompt"][2])
    assert outcome(server, entry, ids) == outcome(reference_server, uninterrupted, ids)
