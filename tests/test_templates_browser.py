"""The template browser in headless Chromium on each runtime's pinned frontend and the newest: Templates >
Extensions shows this extension by its name, and every shipped workflow's card loads its thumbnail (the frontends
show nothing else of ours on a card), titled by file names that read as titles, in the order an artist should meet
them (the start-here search first), and the first card loads a CachedSearch search. Screenshots:
test-artifacts/comfyui-<version>/template_browser_<frontend>.png."""

import json
import re
import pathlib
import subprocess

import pytest
from test_browser import ARTIFACTS, BROWSER_TESTS, browser_available, frontend_version

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
# numbered file names: sorted is the order the cards should come in
SHIPPED = sorted(path.stem for path in (REPO_ROOT / "workflows").glob("*.json"))
THUMBNAIL_SIZE = 400  # scripts/template_thumbnails.py SIZE

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not browser_available(), reason="needs chromium and tests/browser's npm ci")]


@pytest.mark.parametrize("frontend", ["pinned", "newest"])
def test_the_template_browser_shows_every_workflow_with_its_thumbnail(request, frontend):
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    server.request("POST", "/settings/Comfy.TutorialCompleted", True)  # else 1.5x opens its own first-run templates
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / f"template_browser_{frontend_version(frontend)}.png"
    completed = subprocess.run(["node", str(BROWSER_TESTS / "template_browser.mjs"), server.url, str(screenshot)],
                               check=False, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-4000:]
    seen = json.loads(completed.stdout.strip().splitlines()[-1])
    screenshot.with_suffix(".json").write_text(json.dumps(seen, indent=1))  # what the cards said, beside the picture
    assert seen["named"], "the Extensions entry shows the folder name, not locales/en/main.json's CachedSearch"
    # every card, each with its own picture as fetched from the server (the cards show it through a blob: URL)
    assert {card["name"]: card["width"] for card in seen["cards"]} == dict.fromkeys(SHIPPED, THUMBNAIL_SIZE), seen
    assert seen["fetched"] == dict.fromkeys(SHIPPED, "200 image/jpeg"), seen["fetched"]
    # the cards in the order shown: the numbered names' order, start-here first, no raw snake_case file name
    titles = [card["name"] for card in seen["cards"]]
    assert titles == SHIPPED, titles
    assert "(start here)" in titles[0], titles
    assert not [title for title in titles if re.search(r"[a-z0-9]_[a-z0-9]", title)], titles
    assert "CachedSearchSampler" in seen["loaded"], seen["loaded"]
