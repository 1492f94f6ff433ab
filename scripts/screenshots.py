"""The docs' GUI pictures, generated: the shipped Wan 2.1 workflow's tiny variant run on a real ComfyUI server in
headless Chromium, photographed once its result panels are filled.

    .venv/bin/python -m scripts.screenshots [--frontend newest|pinned]

Writes docs/images/first_run.png (the whole graph after the run) and web/docs/images/verifier_panel.png (the
Verifier's ranked table, in its node doc). The graph is the tiny test variant of
workflows/api/01 Wan 2.1 (start here).json
(scripts/graphs.py tiny_workflow_variant: random-weight tiny models, synthetic conditioning instead of the text
encoder, 3 candidates of 8 steps; the cache's warmup and cooldown lowered to 2 steps so it can skip) laid out as the
shipped GUI workflow, with its groups. Needs the browser tools of
scripts/setup_browser.sh (Debian's chromium, playwright-core in tests/browser) and, for the newest frontend, its
folder in .runtimes/.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, tiny_image_reward, tiny_models  # noqa: E402
from scripts.graphs import tiny_workflow_variant  # noqa: E402
from scripts.workflow_format import api_to_gui  # noqa: E402

WORKFLOW = "01 Wan 2.1 (start here)"
IMAGES = REPO_ROOT / "docs" / "images"
NODE_DOC_IMAGES = REPO_ROOT / "web" / "docs" / "images"  # served by ComfyUI with the node docs
BROWSER_TOOLS = REPO_ROOT / "tests" / "browser"
NEWEST_FRONTEND = REPO_ROOT / ".runtimes" / "frontend-1.58.1"  # fetched by scripts/setup_browser.sh
VIEWPORT = (1800, 1000)
SHORT_CACHE_WINDOW = 2  # cache warmup and cooldown steps of the 8-step tiny run
EXTRA_NODE_BELOW = 40  # graph units between the shipped workflow's last save node and the tiny variant's frame saver


def shipped_layout(tiny: dict) -> tuple[dict, dict, list]:
    """Positions, titles and groups of the shipped GUI workflow for the tiny variant's nodes (same node ids)."""
    gui = json.loads((REPO_ROOT / "workflows" / f"{WORKFLOW}.json").read_text())
    by_id = {str(node["id"]): node for node in gui["nodes"]}
    layout, titles = {}, {}
    for key in tiny:
        if key in by_id:
            node = by_id[key]
            layout[key] = (*node["pos"], *node["size"])
            if "title" in node:
                titles[key] = node["title"]
    # the variant's extra SaveImage of the delivered frames goes below the last node of the save group
    save_x, save_y, save_width, save_height = max((box for box in layout.values()), key=lambda box: (box[0], box[1]))
    for key in tiny:
        if key not in layout:
            layout[key] = (save_x, save_y + save_height + EXTRA_NODE_BELOW, save_width, 300)
    groups = [(group["title"], group["bounding"], group["color"]) for group in gui["groups"]]
    return layout, titles, groups


def models_folder(folder: pathlib.Path) -> pathlib.Path:
    tiny_models.generate_tiny_models(folder)
    tiny_image_reward.write_tiny_image_reward(folder / "image_reward")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", choices=["newest", "pinned"], default="newest",
                        help="newest: the frontend in .runtimes/ (what artists install today); "
                             "pinned: the runtime's own")
    args = parser.parse_args()
    if not (BROWSER_TOOLS / "node_modules" / "playwright-core").exists():
        sys.exit("[screenshots] no playwright-core in tests/browser: run `bash scripts/setup_browser.sh`")
    extra_args = []
    if args.frontend == "newest":
        if not (NEWEST_FRONTEND / "index.html").exists():
            sys.exit(f"[screenshots] no {NEWEST_FRONTEND}: run `bash scripts/setup_browser.sh` "
                     "or use --frontend pinned")
        extra_args = ["--front-end-root", str(NEWEST_FRONTEND)]
    IMAGES.mkdir(parents=True, exist_ok=True)
    NODE_DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cachedsearch_screenshots_") as temporary:
        temporary = pathlib.Path(temporary)
        models = models_folder(temporary / "models_source")
        base = comfy_runtime.prepare_base_directory(temporary / "base")
        for entry in models.glob("*/*"):
            (base / "models" / entry.parent.name).mkdir(exist_ok=True)
            (base / "models" / entry.parent.name / entry.name).symlink_to(entry)
        with comfy_runtime.ComfyServer(base, extra_args=extra_args) as server:
            server.request("POST", "/settings/Comfy.TutorialCompleted", True)
            server.request("POST", "/settings/Comfy.Minimap.Visible", False)
            api = json.loads((REPO_ROOT / "workflows" / "api" / f"{WORKFLOW}.json").read_text())
            tiny = tiny_workflow_variant(api, pooled=False)
            for node in tiny.values():  # the shipped warmup and cooldown (5 + 5) would leave none of 8 steps to skip
                if node["class_type"] == "CachedSearchApplyCache":
                    node["inputs"].update(warmup_steps=SHORT_CACHE_WINDOW, cooldown_steps=SHORT_CACHE_WINDOW)
            layout, titles, groups = shipped_layout(tiny)
            workflow = api_to_gui(tiny, server.get("/object_info"), layout, titles=titles, groups=groups)
            (temporary / "workflow.json").write_text(json.dumps(workflow))
            config = {"workflow": str(temporary / "workflow.json"), "viewport": VIEWPORT,
                      "graph_png": str(IMAGES / "first_run.png"), "close_up_type": "CachedSearchVerifier",
                      "close_up_png": str(NODE_DOC_IMAGES / "verifier_panel.png")}
            (temporary / "config.json").write_text(json.dumps(config))
            completed = subprocess.run(["node", str(BROWSER_TOOLS / "docs_screenshots.mjs"), server.url,
                                        str(temporary / "config.json")], capture_output=True, text=True, timeout=900)
            if completed.returncode != 0:
                sys.exit(f"[screenshots] the browser run failed:\n{completed.stderr[-4000:]}\n{server.log_tail()}")
    print(f"[screenshots] wrote {config['graph_png']} and {config['close_up_png']}")


if __name__ == "__main__":
    main()
