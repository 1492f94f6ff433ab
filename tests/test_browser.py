"""The frontend extension in headless Debian Chromium against the real server, on a frontend matrix: the
frontend package this runtime pins (1.32.9 on ComfyUI 0.3.75, 1.49.6 on 0.33.0) and the newest published one
(--front-end-root), each with Nodes 2.0 (Comfy.VueNodes.Enabled) off and on. Every combination runs a search
through the Run button, clicks "Commit this" on a draft the verifier did not choose and answers and cancels the
wait mode; it loads the shipped workflows as saved after a run (their results in the payload the panels read),
checks that nothing overlaps or clips, and plays and enlarges a stored draft. The rest of the full flow (reload,
re-queue, seed ranges, an earlier run, combined verifiers) runs once, on the pinned frontend in classic mode. Every
shipped workflow (tiny weights, N = 8, 16-digit seeds) is also run live and its layout checked right after the run,
on the pinned frontend in classic mode and on the newest with Nodes 2.0, each once across the runtime matrix
(CACHEDSEARCH_LIVE_LAYOUT); the other combinations run the Wan 2.1 one live."""

import copy
import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from scripts.graphs import combined_verifier_search, tiny_workflow_variant
from PIL import Image, ImageDraw

from cachedsearch_core.cost_formulas import fewer_calls_factor, skipped_share
from cachedsearch_core.panels import place_rows
from conftest import NEWEST_FRONTEND
from test_workflows import runs_on
from scripts import comfy_runtime, node_packs
from scripts.subgraph_workflow import subgraph_shape, wrap_in_subgraph
from scripts.workflow_format import api_to_gui, column_layout, gui_to_api, nodes_by_execution_id, subgraph_definitions
from report_text import says

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BROWSER_TESTS = REPO_ROOT / "tests" / "browser"
# Screenshots and what the checks saw, in a folder per ComfyUI runtime: scripts/test.sh runs the runtimes side by
# side, and each keeps its own.
ARTIFACTS = REPO_ROOT / "test-artifacts" / f"comfyui-{comfy_runtime.comfyui_version()}"
CHROMIUM = "/usr/bin/chromium"
CANDIDATES = 3
FIRST_SEED = 1000
UNKNOWN_NODE_TYPE = "CachedSearchNodeNoExtensionProvides"
SHIPPED_CANDIDATES = 8
# The distributed workflow needs ComfyUI-Distributed's nodes: tests/test_distributed.py loads it on its servers.
# The GGUF workflow needs ComfyUI-GGUF, which the test servers have wherever its snapshot is.
SHIPPED = sorted(path.stem for path in (REPO_ROOT / "workflows").glob("*.json")
                 if "several GPUs" not in path.stem
                 and not ("GGUF" in path.stem and node_packs.GGUF.find_archive() is None))
# The layout checks measure the graph shown: the shipped workflows whose panels lie on the top-level canvas (the one
# with its pipeline in a subgraph is checked inside it by test_templates_subgraph_browser.py).
LAID_OUT = [name for name in SHIPPED
            if subgraph_shape(json.loads((REPO_ROOT / "workflows" / f"{name}.json").read_text())) is None]
LIVE_LAYOUT_WORKFLOW = "01 Wan 2.1 (start here)"
LONG_SEED = 1125899906842000  # 16 digits, as `randomize` draws them
FRAMES = 8
# Test stand-ins for the text encoders and the VAE decode of the tiny runs (not in the shipped workflows): drawn
# collapsed so they take no more room than the node they replace.
STAND_INS = {"CachedSearchTestConditioning", "CachedSearchTestLatentFrames"}


def browser_available() -> bool:
    return os.path.exists(CHROMIUM) and (BROWSER_TESTS / "node_modules" / "playwright-core").exists() and \
        shutil.which("node") is not None


pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    not browser_available() and os.environ.get("CI") != "true",
    reason="needs Debian's chromium and `npm ci` in tests/browser (scripts/test.sh installs both when run as root)",
)]


def write_frames(server) -> list[dict]:
    """Eight small numbered frames in the server's temp folder, as a draft's decoded previews are."""
    frames = []
    for index in range(FRAMES):
        image = Image.new("RGB", (64, 48), (30 * index, 120, 255 - 30 * index))
        ImageDraw.Draw(image).text((24, 16), str(index + 1), fill=(255, 255, 255))
        name = f"cachedsearch_browser_frame_{index}.png"
        image.save(server.base_dir / "temp" / name)
        frames.append({"filename": name, "subfolder": "", "type": "temp"})
    return frames


def drafts_cost(skipped: int, calls: int, mean_seconds: float, stages: tuple = ()) -> dict:
    """The finished drafts' figures of a search's cachedsearch_cost, from the cost model's own functions; `stages`:
    (name, skipped, calls) per stage of a trajectory of several."""
    return {"draft_calls": calls, "skipped_calls": skipped, "skipped_share": skipped_share(skipped, calls),
            "fewer_calls_factor": fewer_calls_factor(skipped, calls), "mean_draft_seconds": mean_seconds,
            "stage_skipped_shares": [{"stage": name, "share": skipped_share(part, whole)}
                                     for name, part, whole in stages]}


IMAGE_REWARD_SCALE = "about -2 to 2, 0 an average image"  # the stored Verifier payload's scale


def stored_results_workflow(tiny: dict, object_info: dict, frames: list[dict]) -> dict:
    """The tiny workflow carrying results as a saved workflow does: an older CachedSearch's payload on the
    Recommit and, with the cost model's figures of the drafts, on the samplers (no frames, no calls ratio), the
    agreed newer one on the Verifier (frames, margins, the verifier's scale, a pruned candidate numbered in seed
    order)."""
    layout, _ = column_layout(tiny, {key: index % 5 for index, key in enumerate(tiny)}, object_info)
    gui = api_to_gui(tiny, object_info, layout)
    drafts = [{"candidate": i + 1, "seed": 7 + i, "seconds": 41.25, "skipped": 29, "calls": 50,
               "skipped_share": skipped_share(29, 50)} for i in range(3)]
    ranking = [dict(row, score=0.5 - 0.1 * index, winner=index == 0, rank=index + 1, frames=frames,
                    margin=0.1 if index == 0 else -0.1 * index) for index, row in enumerate(drafts)]
    ranking.append({"candidate": 4, "seed": 10, "preview_score": 0.125, "seconds": 16.5, "skipped": 8, "calls": 20,
                    "skipped_share": skipped_share(8, 20), "prune_step": 20, "pruned": True, "frames": frames[:4]})
    place_rows(ranking)
    # the cost figures the summary shows (no calls ratio: as a run without the commit's prediction saved them)
    cost = drafts_cost(skipped=3 * 29, calls=3 * 50, mean_seconds=41.25)
    stored = {
        "CachedSearchSampler": {"text": ["report"], "cachedsearch_drafts": drafts, "cachedsearch_cost": [cost]},
        "CachedSearchSamplerAdvanced": {"text": ["report"], "cachedsearch_drafts": drafts,
                                        "cachedsearch_cost": [cost]},
        "CachedSearchVerifier": {"text": ["scores"], "cachedsearch_ranking": ranking, "cachedsearch_verifier": [
            {"name": "ImageReward", "higher_is_better": True, "scale": IMAGE_REWARD_SCALE}]},
        "CachedSearchRecommit": {"text": ["report"], "cachedsearch_delivery": [{
            "seed": 7, "candidate": 1, "mode": "commit", "num_candidates": 3, "commit_seconds": 95.5,
            "relative_cost": 0.6123}]},
    }
    for node in gui["nodes"]:
        if node["type"] in stored:
            node["properties"]["cachedsearch_last_output"] = stored[node["type"]]
    return gui


ROUNDS_CANDIDATES = 16
ROUNDS = ((6, 8), (10, 4))  # (step, keep): 16 drafts, 8 kept at step 6, 4 of them at step 10


def pruned_in_rounds(frames: list[dict]) -> dict:
    """What the Sampler and the Verifier show after a search of N = 16 with 16-digit seeds pruned in two rounds
    (ROUNDS), in the payload the server sends: the rounds (cachedsearch_pruning) and every candidate's row with its
    preview score at each round it reached. The preview scores put the survivors apart from the seed order."""
    candidates = list(range(1, ROUNDS_CANDIDATES + 1))
    scores = [{c: round(0.9 - 0.05 * (7 * c % 16), 4) for c in candidates}]  # 7 c mod 16: a permutation
    rounds, running = [], candidates
    for number, (step, keep) in enumerate(ROUNDS, start=1):
        if number > 1:
            scores.append({c: round(0.6 - 0.07 * (5 * c % 8), 4) for c in running})
        kept = sorted(sorted(running, key=lambda c: -scores[-1][c])[:keep])
        rounds.append({"round": number, "step": step, "scored": running,
                       "preview_scores": [scores[-1][c] for c in running], "kept": kept,
                       "dropped": [c for c in running if c not in kept]})
        running = kept
    rows = []
    for candidate in candidates:
        reached = [{"step": step, "score": by_candidate[candidate]}
                   for (step, _), by_candidate in zip(ROUNDS, scores) if candidate in by_candidate]
        row = {"candidate": candidate, "seed": LONG_SEED + candidate - 1, "seconds": 12.5, "skipped": 21,
               "calls": 50, "skipped_share": skipped_share(21, 50), "frames": frames,
               "preview_score": reached[-1]["score"], "round_scores": reached}
        dropped_at = [record["step"] for record in rounds if candidate in record["dropped"]]
        if dropped_at:
            row.update(pruned=True, prune_step=dropped_at[0], frames=frames[:4], seconds=1.5)
        rows.append(row)
    finished = [row for row in rows if not row.get("pruned")]
    ranking = [dict(row, score=0.75 - 0.125 * index, rank=index + 1, winner=index == 0,
                    margin=0.125 if index == 0 else -0.125 * index) for index, row in enumerate(finished)]
    ranking += [dict(row, winner=False) for row in rows if row.get("pruned")]
    place_rows(ranking)  # the table's order, as the server sends it
    pruning = {"steps": 16, "num_candidates": ROUNDS_CANDIDATES, "preview_frames": 4, "rounds": rounds}
    pruned = [{key: row[key] for key in ("seed", "preview_score", "seconds", "skipped", "calls", "prune_step")}
              for row in rows if row.get("pruned")]
    drafts = {"text": ["report"], "cachedsearch_drafts": rows, "cachedsearch_pruned": pruned,
              "cachedsearch_pruning": [pruning],
              "cachedsearch_cost": [drafts_cost(skipped=21 * len(finished), calls=50 * len(finished),
                                                mean_seconds=12.5)]}
    return {
        "CachedSearchSampler": drafts, "CachedSearchSamplerAdvanced": drafts,
        "CachedSearchVerifier": {"text": ["scores"], "cachedsearch_ranking": ranking, "cachedsearch_pruned": pruned,
                                 "cachedsearch_pruning": [pruning], "cachedsearch_verifier": [
                                     {"name": "ImageReward", "higher_is_better": True,
                                      "scale": "about -2 to 2, 0 an average image"}]},
    }


def stored_rounds_workflow(tiny: dict, object_info: dict, frames: list[dict]) -> dict:
    """The tiny workflow as saved after a search pruned in rounds (pruned_in_rounds), the Sampler and the Verifier
    each alone in its column: a panel that grows wider than the room its node is laid out with reaches into the
    next column."""
    stored = pruned_in_rounds(frames)
    others = [key for key, node in tiny.items() if node["class_type"] not in stored]
    columns = {key: index % 3 for index, key in enumerate(others)}
    columns.update({key: 3 + index for index, key in enumerate(key for key in tiny if key not in columns)})
    layout, _ = column_layout(tiny, columns, object_info)
    gui = api_to_gui(tiny, object_info, layout)
    for node in gui["nodes"]:
        if node["type"] in stored:
            node["properties"]["cachedsearch_last_output"] = stored[node["type"]]
    return gui


def tiny_shipped(name: str, object_info: dict) -> dict:
    """A shipped workflow as laid out, on tiny weights with N = 8 and a 16-digit seed (GUI format)."""
    gui = json.loads((REPO_ROOT / "workflows" / f"{name}.json").read_text())
    api = gui_to_api(gui, object_info)
    if name == "13 HunyuanVideo 1.5 + 1080p":
        from test_workflow_hunyuan15 import tiny_variant  # its text encoders and VAE need their own stand-ins

        tiny = tiny_variant(api)
    else:
        tiny = tiny_workflow_variant(api, pooled="Hunyuan" in name)
    del tiny["frames"]  # the frame dump other tests read; not part of the workflow
    for node in tiny.values():
        if node["class_type"].startswith("CachedSearchSampler"):
            node["inputs"].update(num_candidates=SHIPPED_CANDIDATES, seed=LONG_SEED)
        if node["class_type"] == "CachedSearchPruningPlan":
            node["inputs"]["keep"] = SHIPPED_CANDIDATES // 2
    by_id = nodes_by_execution_id(gui)
    layout = {key: (*by_id[key]["pos"], *by_id[key]["size"]) for key in tiny}
    notes = [(node["widgets_values"][0], (*node["pos"], *node["size"])) for node in gui["nodes"]
             if node["type"] == "MarkdownNote"]
    groups = [(group["title"], group["bounding"], group["color"])
              for graph in (gui, *subgraph_definitions(gui).values()) for group in graph["groups"]]
    titles = {key: by_id[key]["title"] for key in tiny if "title" in by_id[key]}
    tiny_gui = api_to_gui(tiny, object_info, layout, titles, notes=notes, groups=groups)
    for node in tiny_gui["nodes"]:
        if node["type"] in STAND_INS:
            node["flags"]["collapsed"] = True
    shape = subgraph_shape(gui)
    if shape is not None:  # the same subgraph again, less what the stand-ins replaced (the text encoder's file)
        ids = {key: index + 1 for index, key in enumerate(tiny)}
        promoted = [(ids[key], name, label) for key, name, label in shape["promoted"]
                    if key in tiny and name in tiny[key]["inputs"]]
        tiny_gui = wrap_in_subgraph(tiny_gui, object_info, shape["name"], {ids[key] for key in tiny if ":" not in key},
                                    promoted)
    return tiny_gui


def shipped_results(name: str, frames: list[dict]) -> dict:
    """What the CachedSearch nodes of a shipped workflow show after a run of N = 8 with 16-digit seeds, in the
    agreed payload with every optional field (frames for every candidate, margins, the verifier's scale, preview
    scores, the cost in calls, who picked): the largest panels a run can show."""
    seeds = [LONG_SEED + index for index in range(SHIPPED_CANDIDATES)]
    pruned = "pruned" in name
    experts = any(node["type"] == "CachedSearchSamplerExperts"
                  for node in json.loads((REPO_ROOT / "workflows" / f"{name}.json").read_text())["nodes"])
    drafts = []
    for index, seed in enumerate(seeds):
        row = {"candidate": index + 1, "seed": seed, "seconds": 123.456, "skipped": 21, "calls": 50,
               "skipped_share": skipped_share(21, 50), "frames": frames, "preview_score": 1.2345 - 0.1 * index}
        if experts:
            row["stages"] = [{"stage": name, "skipped": skipped, "calls": 25, "skipped_share": skipped_share(skipped, 25)}
                             for name, skipped in (("high noise", 9), ("low noise", 12))]
        if pruned and index >= SHIPPED_CANDIDATES // 2:
            row.update(pruned=True, prune_step=20, frames=frames[:4])
        drafts.append(row)
    ranking = [dict(row, score=1.2345 - 0.25 * index, rank=index + 1, winner=index == 0,
                    margin=0.25 if index == 0 else -0.25 * index)
               for index, row in enumerate(drafts) if not row.get("pruned")]
    ranking += [row for row in drafts if row.get("pruned")]
    finished = sum(not row.get("pruned") for row in drafts)
    stages = (("high noise", 9 * finished, 25 * finished), ("low noise", 12 * finished, 25 * finished)) if experts else ()
    cost = {"calls_ratio": 0.5467, "seconds_ratio": 1.0712, "search_calls": 13120, "full_calls": 24000,
            "note": "on a GPU time follows the calls; tiny CPU runs are dominated by overhead",
            **drafts_cost(skipped=21 * finished, calls=50 * finished, mean_seconds=123.456, stages=stages)}
    return {
        "sampler": {"text": ["report"], "cachedsearch_drafts": drafts, "cachedsearch_cost": [cost]},
        "verifier": {"text": ["scores"], "cachedsearch_ranking": ranking, "cachedsearch_verifier": [
            {"name": "ImageReward", "higher_is_better": True,
             "scale": "about -2 to 2 on a prompt, 0 an average image"}]},
        "recommit": {"text": ["report"], "cachedsearch_delivery": [{
            "seed": seeds[2], "candidate": 3, "mode": "commit", "num_candidates": SHIPPED_CANDIDATES,
            "cost": cost | {"calls_ratio_with_commit": 0.6717, "seconds_ratio_with_commit": 1.1962,
                            "commit_ran": True, "kept": False},
            "picked_by": "you", "pick_among": SHIPPED_CANDIDATES,
            "verifier_choice": {"candidate": 4, "seed": seeds[3]}}]},
    }


def shipped_as_saved_after_run(name: str, frames: list[dict]) -> dict:
    """A shipped workflow as saved after a run (its results in its nodes' properties)."""
    gui = json.loads((REPO_ROOT / "workflows" / f"{name}.json").read_text())
    results = shipped_results(name, frames)
    for node in gui["nodes"]:
        kind = ("sampler" if node["type"].startswith("CachedSearchSampler") else
                "verifier" if node["type"] == "CachedSearchVerifier" else
                "recommit" if node["type"] == "CachedSearchRecommit" else None)
        if kind:
            node["properties"]["cachedsearch_last_output"] = results[kind]
    return gui


def frontend_version(frontend: str) -> str:
    """The frontend package's version: screenshots of the whole frontend matrix lie side by side in ARTIFACTS."""
    if frontend == "newest":
        return NEWEST_FRONTEND.name.split("-")[1]
    return importlib.metadata.version("comfyui-frontend-package")  # the one this runtime's venv pins


def run_browser_script(script: str, server, config: dict, config_path: pathlib.Path, vue_nodes: bool,
                       timeout: int = 1800) -> dict:
    """Runs tests/browser/`script` with `config` (written to `config_path`) against `server` in the renderer asked
    for (the setting put back after); returns what it saw (its last line of output)."""
    config_path.write_text(json.dumps(config))
    server.request("POST", "/settings/Comfy.TutorialCompleted", True)
    server.request("POST", "/settings/Comfy.VueNodes.Enabled", vue_nodes)
    try:
        completed = subprocess.run(["node", str(BROWSER_TESTS / script), server.url, str(config_path)],
                                   capture_output=True, text=True, timeout=timeout)
    finally:
        server.request("POST", "/settings/Comfy.VueNodes.Enabled", False)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run_browser(server, config: dict, config_path: pathlib.Path, vue_nodes: bool) -> dict:
    """Runs check_ui.mjs with `config` in the renderer asked for; returns what it saw."""
    return run_browser_script("check_ui.mjs", server, config, config_path, vue_nodes)


def assert_fits(layout: dict):
    kinds = ("overlaps", "panelsOutside", "outOfGroup", "groupOverlaps", "clipped")
    found = {name: {kind: problems[kind] for kind in kinds if problems[kind]} for name, problems in layout.items()}
    assert {name: problems for name, problems in found.items() if problems} == {}
    assert all(problems["panels"] >= 3 for problems in layout.values()), layout  # the check saw the panels


def check_ui(server, tmp_path, frontend: str, full: bool, vue_nodes: bool, live_layout: bool = False) -> dict:
    object_info = server.get("/object_info")
    frames = write_frames(server)
    api = json.loads((REPO_ROOT / "workflows" / "api" / "01 Wan 2.1 (start here).json")
                     .read_text())
    tiny = tiny_workflow_variant(api, pooled=False)
    layout, _ = column_layout(tiny, {key: index % 5 for index, key in enumerate(tiny)}, object_info)
    files = {"tiny": api_to_gui(tiny, object_info, layout),
             "tiny_fixed": api_to_gui(tiny, object_info, layout, seed_control="fixed"),
             "stored": stored_results_workflow(copy.deepcopy(tiny), object_info, frames),
             "stored_rounds": stored_rounds_workflow(copy.deepcopy(tiny), object_info, frames),
             "unknown_node": api_to_gui(tiny, object_info, layout)}
    files["unknown_node"]["nodes"][0]["type"] = UNKNOWN_NODE_TYPE
    combination = f"{frontend_version(frontend)}_{'nodes2' if vue_nodes else 'classic'}"
    checks = []
    for name in LAID_OUT:
        files[f"saved_{name}"] = shipped_as_saved_after_run(name, frames)
        checks.append({"name": name, "workflow": str(tmp_path / f"saved_{name}.json"), "live": False,
                       "screenshot": str(ARTIFACTS / f"layout_{name}_{combination}.png")})
    if live_layout:
        # one shipped workflow run through the Run button, where the frontend's own previews and progress share
        # the nodes' height with the panels (every shipped one: test_shipped_workflows_fit_after_a_live_run)
        files["live_layout"] = tiny_shipped(LIVE_LAYOUT_WORKFLOW, object_info)
        checks.append({"name": f"{LIVE_LAYOUT_WORKFLOW} (live)", "workflow": str(tmp_path / "live_layout.json"),
                       "live": True, "screenshot": str(ARTIFACTS / f"layout_{LIVE_LAYOUT_WORKFLOW}_{combination}_live.png")})
    for name, workflow in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(workflow))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shipped = [str(REPO_ROOT / "workflows" / f"{name}.json") for name in SHIPPED if runs_on(name, object_info)]
    # The missing-node check must see what this server lacks: an unknown type, and ComfyUI-Distributed's collector
    # (not installed on these servers).
    distributed = str(REPO_ROOT / "workflows" / "03 Wan 2.1 on several GPUs.json")
    missing_node_probes = {str(tmp_path / "unknown_node.json"): [UNKNOWN_NODE_TYPE],
                           distributed: ["DistributedCollector"]}
    config = {"workflows": shipped, "after_run": checks,
              "tiny_workflow": str(tmp_path / "tiny.json"), "tiny_workflow_fixed": str(tmp_path / "tiny_fixed.json"),
              "stored_workflow": str(tmp_path / "stored.json"),
              "stored_rounds": {"workflow": str(tmp_path / "stored_rounds.json"),
                                "screenshot": str(ARTIFACTS / f"rounds_{combination}.png")},
              "missing_node_probes": list(missing_node_probes),
              "distributed_workflow": distributed,
              "candidates": CANDIDATES, "first_seed": FIRST_SEED,
              "full": full, "live_pick": True,
              "screenshot": str(ARTIFACTS / f"verifier_ranking_{combination}.png")}
    if full:
        # ImageReward + VideoScore + Combine Scores: a table per verifier node with each verifier's column
        combined = combined_verifier_search(seed=50)
        combined_layout, _ = column_layout(combined, {key: index % 5 for index, key in enumerate(combined)},
                                           object_info)
        (tmp_path / "combined.json").write_text(json.dumps(api_to_gui(combined, object_info, combined_layout)))
        config["combined_workflow"] = str(tmp_path / "combined.json")
    # The live search must run every node: the same graph queued by an earlier combination on this server would be
    # served from ComfyUI's cache, and 0.3.75 then sends the Verifier no "executed".
    server.reset_caches()
    seen = run_browser(server, config, tmp_path / "config.json", vue_nodes)
    # every combination: shipped workflows load cleanly, stored results show, unclipped at the default width
    assert seen["vueNodes"] in (vue_nodes, None)
    assert seen["missingInProbes"] == missing_node_probes  # the check below is not blind on this frontend
    # the distributed workflow's missing collector carries its registry id: the details panel of frontends 1.49 and
    # 1.58 names the pack (without it: "Unknown pack"); 1.32's dialog lists node types only
    if frontend_version(frontend) != "1.32.9":
        assert "ComfyUI-Distributed" in seen["missingPackDetails"], seen["missingPackDetails"]
    assert seen["missing"] == {path: [] for path in config["workflows"]}
    assert seen["loadWarnings"] == {path: [] for path in config["workflows"]}
    assert seen["extensionErrors"] == []
    assert seen["clipped"] == []
    stored = " ".join(seen["storedPanels"])
    # the stored payloads' figures: 3 drafts, 87 of 150 calls skipped (58 %, 2.38x fewer), 41.25 s each; the
    # delivery's seed, candidate, mode and relative cost; the verifier's name and scale
    assert says(stored, 3, "58%", f"{fewer_calls_factor(87, 150):.2f}x", 41.25)
    assert says(stored, "seed 7", "candidate 1", "commit", "61.2%", "best-of-3")
    assert IMAGE_REWARD_SCALE in stored.split("ImageReward", 1)[1]
    # the winner with its margin; a pruned candidate keeps its number (seed order) and shows its preview score
    assert "★ 170.500+0.100-" in stored and "410pruned-0.12540%16.5commit" in stored
    assert_rounds_shown(seen["storedRounds"])
    # the shipped workflows as saved after a run: nothing overlaps, leaves its group or clips, in this renderer
    assert set(seen["layout"]) == set(LAID_OUT) | ({f"{LIVE_LAYOUT_WORKFLOW} (live)"} if live_layout else set())
    assert_fits(seen["layout"])
    # a stored draft plays as a loop, enlarges, pauses, steps and plays again
    player = seen["player"]
    assert player["frames"] == FRAMES and player["loops"] and player["overlay"] and player["closed"]
    assert player["picks"] == ["Commit this", "Keep this"]
    paused = int(player["paused"].split()[1])
    assert player["stillPaused"] == player["paused"]
    assert player["stepped"] == f"frame {paused % FRAMES + 1} / {FRAMES}"
    assert player["playing"] != player["stepped"]
    return seen


def assert_rounds_shown(seen: dict):
    """A search of N = 16 pruned in two rounds, as saved (pruned_in_rounds): both panels say what each round kept,
    every dropped row its step and round with the preview score that decided it (each round's on hover), the last
    round's dropped above the first's; nothing clipped or overlapping."""
    samplers = [text for text in seen["panels"] if text.startswith("4 of 16 drafts kept by preview score in 2 rounds")]
    verifiers = [text for text in seen["panels"] if text.startswith("‹ earlier")]
    assert len(samplers) == len(verifiers) == 1, seen["panels"]
    sampler, verifier = samplers[0], verifiers[0]
    rounds = "rounds: step 6 kept 8 of 16 · step 10 kept 4 of 8"
    assert rounds in sampler and rounds in verifier, seen["panels"]
    # candidate 3 (seed …842002) survived step 6 and was dropped at step 10 on its preview 0.110 there; candidate 2
    # dropped at step 6 on 0.200; both keep their numbers and commit buttons
    dropped_late = "3…842002✂ step 10 (round 2)0.11042%1.5commit"
    dropped_early = "2…842001✂ step 6 (round 1)0.20042%1.5commit"
    assert dropped_late in verifier and dropped_early in verifier, verifier
    assert verifier.index(dropped_late) < verifier.index(dropped_early)
    assert verifier.count("(round 2)") == 4 and verifier.count("(round 1)") == 8
    # the survivors: the winner first, with its score and margin
    assert "★ 5…8420040.750+0.125" in verifier, verifier
    # the sampler's strip: a dropped draft's caption names the step that dropped it
    assert "3 ✂10" in sampler and "2 ✂6" in sampler and "16 ✂" not in sampler, sampler
    assert "preview score at step 6: 0.6500; at step 10: 0.1100 (dropped here)" in seen["previewTitles"]
    assert "preview score at step 6: 0.9000; at step 10: 0.6000 (kept)" in seen["previewTitles"]
    assert seen["clipped"] == []
    problems = {kind: seen["layout"][kind] for kind in ("overlaps", "panelsOutside", "clipped")}
    assert problems == {"overlaps": [], "panelsOutside": [], "clipped": []}
    assert seen["layout"]["panels"] == 2


def key_of(prompt: dict, class_type: str) -> str:
    (key,) = [key for key, node in prompt.items() if node["class_type"] == class_type]
    return key


def assert_picked(queued: dict, source: dict, candidate: int, among: int, mode: str):
    """The queued prompt is the source run's, with only the Recommit's pick, pick_among and mode changed."""
    prompt = queued["prompt"]
    recommit = key_of(source, "CachedSearchRecommit")
    assert set(prompt) == set(source)
    assert {key: node for key, node in prompt.items() if key != recommit} == \
        {key: node for key, node in source.items() if key != recommit}
    assert prompt[recommit]["inputs"] == {**source[recommit]["inputs"], "pick": candidate, "pick_among": among,
                                          "mode": mode}
    assert queued["client_id"] and queued["extra_data"]["extra_pnginfo"]["workflow"]["nodes"]


def numbers_in(text: str) -> list[int]:
    """The whole numbers a sentence states, in order."""
    return [int(number) for number in re.findall(r"\d+", text)]


def commit_calls_of(cost: dict) -> list[int]:
    """The calls a pick note states for a commit: none where every draft already is full compute."""
    return [] if cost["commit_free"] else [cost["rollout_calls"]]


def assert_live_search_and_pick(seen: dict, sampler_panel_live: bool = True) -> str:
    """The live search through the Run button, "Commit this" on another draft and the wait mode (check_ui.mjs's
    live_pick part), as the server and the panels report them. `sampler_panel_live`: whether the Sampler's panel
    can show a live run's drafts in this frontend and renderer."""
    rows = seen["rows"]
    assert len(rows) == CANDIDATES and [row["winner"] for row in rows].count(True) == 1
    assert rows[0]["winner"] and rows[0]["score"] == max(row["score"] for row in rows)  # ranked, winner first
    served = seen["served"]  # the Verifier's UI payload as the server sent it over the websocket
    assert len(served) == CANDIDATES
    shown = {row["seed"]: row["score"] for row in rows}
    assert shown == {row["seed"]: pytest.approx(row["score"]) for row in served}
    winner = max(served, key=lambda row: row["score"])
    assert [row["seed"] for row in rows if row["winner"]] == [winner["seed"]] and winner["winner"]
    delivered = (f"delivered seed {winner['seed']} (candidate {winner['candidate']}, commit); picked by the verifier; "
                 "search cost")
    assert delivered in " ".join(seen["panels"])
    cost = seen["samplerCost"]
    if sampler_panel_live:
        summary = next(panel for panel in seen["panels"] if panel.startswith("3 drafts, "))
        # short sentences with the cost model's numbers; the rest is on the doc page the summary links to
        # an earlier run of this graph on this server saved its drafts on disk: a later run reads them back
        reused = (f"{cost['reused_drafts']} of 3 drafts reused from an earlier run (saved on disk), at no cost. "
                  if cost.get("reused_drafts") else "")
        # the search's cost whichever run computed its drafts, and what this run computed where some were read back
        this_run = f"; this run computed {cost['search_calls']}" if cost["drafted_calls"] != cost["search_calls"] else ""
        drafts_cost = (f"per draft. {reused}The drafts cost {int(100 * cost['drafted_ratio'] + 0.5)}% of full best-of-3 "
                       f"({cost['drafted_calls']} of {cost['full_calls']} transformer calls{this_run}). A commit adds ")
        assert drafts_cost in summary and summary.endswith("cost details"), summary
    # before a click the note says what is known then, in the cost model's numbers: a commit's calls (none where
    # every draft already is full compute) and, should ComfyUI no longer hold the drafts, the search's own drafting
    # calls (drafted_calls: whichever run computed them, so never 0 where an earlier run's drafts were read back)
    commit_calls = commit_calls_of(cost)
    note = seen["pickNoteAfterRun"]
    assert note["state"] == "queue" and numbers_in(note["text"]) == [*commit_calls, cost["drafted_calls"]], note
    # the run is over: no "draft 3 / 3 (seed ...)" stays above the results
    assert seen["progressTextsAfterRun"] == []
    assert seen["overlay"]
    # "Commit this" on a row the verifier did not choose re-queues that run's exact prompt (not the graph, whose
    # seed `randomize` has changed since) with the pick; the search and the verifier come from ComfyUI's cache
    pick = seen["pick"]
    source = pick["sourcePrompt"]
    assert pick["candidate"] != winner["candidate"] and 1 <= pick["candidate"] <= CANDIDATES
    assert_picked(pick["queued"], source, pick["candidate"], CANDIDATES, "commit")
    assert pick["end"] == "execution_success"
    assert {key_of(source, "CachedSearchSampler"), key_of(source, "CachedSearchVerifier")} <= set(pick["cached"])
    # after the click the panel says what happened: ComfyUI reused the drafts (its execution_cached named the Sampler)
    assert pick["outcomes"] == ["reused"], pick["outcomes"]
    assert key_of(source, "CachedSearchRecommit") not in pick["cached"]
    delivery = pick["executed"][key_of(source, "CachedSearchRecommit")]["cachedsearch_delivery"][0]
    assert (delivery["candidate"], delivery["seed"], delivery["picked_by"]) == (pick["candidate"], pick["seed"], "you")
    assert says(" ".join(pick["panels"]), "picked by you", f"candidate {pick['candidate']}", f"seed {pick['seed']}")
    # the picked seed's video, decoded and saved by the workflow's own nodes in that run
    saved = pick["executed"][key_of(source, "SaveVideo")]["images"]
    assert len(saved) == 1 and (saved[0]["subfolder"], saved[0]["filename"][:9]) == ("cachedsearch", "wan21_t2v")
    # the wait mode, live: the Recommit waits in the run, Keep on a draft answers it and that run delivers the
    # draft from the cached search; Cancel ends a wait and the next run completes
    wait = seen["wait"]
    assert wait["banner"].startswith("Waiting") and numbers_in(wait["banner"])[0] == CANDIDATES, wait["banner"]
    # only the wait shows on the Recommit: its last delivery was another run's
    assert "delivered seed" not in wait["recommitPanel"], wait["recommitPanel"]
    # what a click does and costs while the run waits: it answers the wait, and a commit still renders once
    assert wait["pickNote"]["state"] == "waiting" and numbers_in(wait["pickNote"]["text"]) == commit_calls, \
        wait["pickNote"]
    assert wait["answersTheWait"] and wait["pickTitles"] and \
        all(title.endswith(wait["answersTheWait"]) for title in wait["pickTitles"]), wait
    assert wait["end"] == "execution_success" and not wait["afterAnswer"]
    assert {key_of(source, "CachedSearchSampler"), key_of(source, "CachedSearchVerifier")} <= set(wait["cached"])
    assert wait["recommit"] not in wait["cached"]
    assert (wait["delivery"]["candidate"], wait["delivery"]["seed"], wait["delivery"]["picked_by"]) == \
        (pick["candidate"], pick["seed"], "you")
    assert says(" ".join(wait["panels"]), "picked by you", f"candidate {pick['candidate']}", f"seed {pick['seed']}")
    assert wait["cancelEnd"] == "execution_interrupted" and not wait["afterCancel"]
    assert wait["nextEnd"] == "execution_success"
    # right after the live search (the frontend's progress text and image preview share the node's height) nothing is
    # clipped either: each panel asks for its content plus the DOM widget's margins
    assert seen["clippedAfterRun"] == []
    return delivered


def live_layout_combinations() -> set[str]:
    """Where every shipped workflow runs live in this run: CACHEDSEARCH_LIVE_LAYOUT (comma-separated, e.g.
    "pinned-classic"), which scripts/test.sh sets so that across the runtime matrix each combination runs once;
    unset, both."""
    chosen = os.environ.get("CACHEDSEARCH_LIVE_LAYOUT", "pinned-classic,newest-nodes2")
    return {combination.strip() for combination in chosen.split(",") if combination.strip()}


@pytest.mark.slow
@pytest.mark.timeout(1800)  # twelve searches of 8 drafts (about 5 minutes here)
@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", False), ("newest", True)])
def test_shipped_workflows_fit_after_a_live_run(request, tmp_path, frontend, vue_nodes):
    """Every shipped workflow on tiny weights (N = 8, 16-digit seeds, the shipped `randomize`) run through the Run
    button, on the pinned frontend in classic mode and on the newest with Nodes 2.0: right after the run (the
    frontend's own progress text, image and video previews included) nothing overlaps, leaves its group or clips.
    The other combinations run the Wan 2.1 workflow live (check_ui's live_layout)."""
    combination = f"{frontend}-{'nodes2' if vue_nodes else 'classic'}"
    if combination not in live_layout_combinations():
        pytest.skip(f"{combination} runs every shipped workflow live on another runtime of the matrix "
                    "(CACHEDSEARCH_LIVE_LAYOUT)")
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    object_info = server.get("/object_info")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    combination = f"{frontend_version(frontend)}_{'nodes2' if vue_nodes else 'classic'}"
    checks = []
    for name in LAID_OUT:
        (tmp_path / f"{name}.json").write_text(json.dumps(tiny_shipped(name, object_info)))
        checks.append({"name": name, "workflow": str(tmp_path / f"{name}.json"), "live": True,
                       "screenshot": str(ARTIFACTS / f"layout_{name}_{combination}_live.png")})
    server.reset_caches()  # every workflow really runs, whatever ran on this server before
    seen = run_browser(server, {"workflows": [], "after_run": checks, "missing_node_probes": []},
                       tmp_path / "config.json", vue_nodes=vue_nodes)
    assert seen["vueNodes"] in (vue_nodes, None)
    assert set(seen["layout"]) == set(LAID_OUT)
    assert all(problems["measuredOnDom"] == vue_nodes for problems in seen["layout"].values())
    assert_fits(seen["layout"])
    assert seen["extensionErrors"] == []


@pytest.mark.slow
@pytest.mark.timeout(1800)  # five searches, a pick, a combined-verifier search and the Wan 2.1 workflow live
def test_results_appear_in_the_browser_survive_a_reload_and_a_cached_requeue(comfy_server, tmp_path):
    seen = check_ui(comfy_server, tmp_path, "pinned", full=True, vue_nodes=False, live_layout=True)
    assert seen["toleranceErrors"] == []
    delivered = assert_live_search_and_pick(seen)
    assert seen["rowsAfterReload"] == CANDIDATES
    # a freshly loaded copy queued again is served from ComfyUI's cache, and still shows that search
    assert seen["reusedRows"] == CANDIDATES
    assert delivered in " ".join(seen["reusedPanels"])
    # two queues of the shipped seed control (randomize) search two disjoint seed ranges
    first, second = seen["seedRuns"]
    assert first == list(range(FIRST_SEED, FIRST_SEED + CANDIDATES))
    assert len(second) == CANDIDATES and not set(first) & set(second)
    assert (ARTIFACTS / f"verifier_ranking_{frontend_version('pinned')}_classic.png").stat().st_size > 0
    # the panels show the newest of the two queued searches; the earlier one opens from the history, says a pick
    # there drafts it again (or may), and its pick queues that search's own prompt (its seed)
    earlier = seen["earlier"]
    assert earlier["newest"] == sorted(second) and earlier["shown"] == first
    # counted among this workflow's runs only (the live, pick and wait runs above were another load's), and the
    # Recommit follows to that run's delivery
    assert earlier["label"].endswith("earlier run 1 of 1"), earlier["label"]
    assert any(f"delivered seed {seed} " in earlier["recommitPanel"] for seed in first), earlier["recommitPanel"]
    # (ComfyUI 0.3's cache no longer holds it; 0.33's may, while memory lasts: the note gives that search's calls
    # for the case it does not, and once the pick ran the panel says which it was)
    assert len(numbers_in(earlier["note"])) == len(commit_calls_of(seen["samplerCost"])) + 1, earlier["note"]
    queued = earlier["queued"]["prompt"]
    reused = key_of(queued, "CachedSearchSampler") in earlier["cached"]
    assert earlier["outcomes"] == ["reused" if reused else "drafted again"], (earlier["outcomes"], earlier["cached"])
    assert queued[key_of(queued, "CachedSearchSampler")]["inputs"]["seed"] == FIRST_SEED
    assert queued[key_of(queued, "CachedSearchRecommit")]["inputs"]["pick_among"] == CANDIDATES
    assert earlier["end"] == "execution_success"
    # the combined search: a table per verifier node, each verifier's column beside the combined score
    by_headers = {tuple(table["headers"]): table["rows"] for table in seen["tables"]}
    aspects = ("visual quality", "temporal consistency", "dynamic degree", "text-to-video alignment",
               "factual consistency")
    by_headers = {tuple(h for h in headers if h not in ("margin", "preview")): rows
                  for headers, rows in by_headers.items()}
    combined_rows = by_headers[("", "#", "seed", "ImageReward", "VideoScore", "score", "skipped", "time", "pick")]
    video_rows = by_headers[("", "#", "seed", *aspects, "score", "skipped", "time", "pick")]
    assert len(combined_rows) == len(video_rows) == 3
    assert combined_rows[0]["winner"] and combined_rows[0]["score"] == max(row["score"] for row in combined_rows)
    video_by_seed = {row["seed"]: row["score"] for row in video_rows}
    for row in combined_rows:
        assert row["columns"]["VideoScore"] == pytest.approx(video_by_seed[row["seed"]], abs=1e-3)
    for row in video_rows:
        assert row["score"] == pytest.approx(sum(row["columns"][a] for a in aspects) / 5, abs=2e-3)


@pytest.mark.slow
@pytest.mark.parametrize("frontend, vue_nodes", [("pinned", True), ("newest", False), ("newest", True)])
def test_workflows_stored_results_and_a_live_pick_on_each_frontend_and_node_renderer(request, tmp_path, frontend,
                                                                                       vue_nodes):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    seen = check_ui(server, tmp_path, frontend, full=False, vue_nodes=vue_nodes,
                    live_layout=frontend == "newest" and not vue_nodes)
    # Nodes 2.0 on frontend 1.32.9 (an early version of it) mostly stops redrawing the Sampler's widgets once the
    # frontend has added its own progress text there during the run: neither that text nor the Sampler's panel
    # appears (3 of 4 runs here), while the Verifier's table, whose buttons pick, and the Recommit's summary do.
    # Stored results show on every combination (above); 1.49.6 and 1.58.1 show the live summary.
    assert_live_search_and_pick(seen, sampler_panel_live=not (vue_nodes and frontend_version(frontend) == "1.32.9"))
    if frontend == "newest":
        assert seen["frontend"] == NEWEST_FRONTEND.name.split("-")[1]
