"""The shipped workflows as ComfyUI's template browser shows them: every workflow has its thumbnail (frontends
1.32 to 1.58 load `<name>.jpg` beside the workflow and show nothing else of ours on the card), the thumbnail says
what its card in scripts/template_thumbnails.py says, and the real server lists the workflows and serves the
thumbnails and the extension's name where the frontends fetch them."""

import json
import pathlib
import urllib.parse
import urllib.request

import pytest
from PIL import Image

from scripts.comfy_runtime import EXTENSION_FOLDER
from scripts.template_thumbnails import MAX_BYTES, TEMPLATE_CARDS

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKFLOWS = REPO_ROOT / "workflows"
SHIPPED = sorted(path.stem for path in WORKFLOWS.glob("*.json"))
REGENERATE = "run `.venv/bin/python scripts/template_thumbnails.py`"


def test_every_shipped_workflow_has_a_template_card():
    assert sorted(TEMPLATE_CARDS) == SHIPPED, f"add the workflow's card to TEMPLATE_CARDS, then {REGENERATE}"
    assert [name for name, card in TEMPLATE_CARDS.items() if card.start_here] == [
        "01 Wan 2.1 (start here)"]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_workflow_has_a_small_square_thumbnail_of_its_card(name):
    path = WORKFLOWS / f"{name}.jpg"
    assert path.is_file(), f"no {path.name}: {REGENERATE}"
    assert path.stat().st_size <= MAX_BYTES, path.stat().st_size
    with Image.open(path) as image:
        assert image.format == "JPEG" and image.width == image.height >= 256, (image.format, image.size)
        # the card's text, written into the file with its picture: a card changed here needs its picture made again
        assert image.info.get("comment") == TEMPLATE_CARDS[name].comment(), f"{path.name} is stale: {REGENERATE}"


def test_every_workflow_is_named_as_a_card_title_that_fits_on_one_line():
    """The file name is the card's title on every frontend (1.32 to 1.58): numbered in the order to meet the
    workflows, and short enough that the card (about 30 characters at 1600 px) does not cut it."""
    assert [name[:3] for name in SHIPPED] == [f"{number:02d} " for number in range(1, len(SHIPPED) + 1)], SHIPPED
    assert [name for name in SHIPPED if len(name) > 28] == []


def test_the_workflows_folder_holds_only_what_the_browser_should_list():
    """The server lists every *.json directly in workflows/ as a template (workflows/api/ is not scanned): an index
    or metadata .json here would show up as a template of its own."""
    assert {path.suffix for path in WORKFLOWS.iterdir() if path.is_file()} == {".json", ".jpg"}
    assert sorted(path.stem for path in WORKFLOWS.glob("*.jpg")) == SHIPPED


def test_the_locale_names_the_extension_in_the_template_browser():
    messages = json.loads((REPO_ROOT / "locales" / "en" / "main.json").read_text())
    assert messages["templateWorkflows"]["category"][EXTENSION_FOLDER] == "CachedSearch"


def test_the_server_lists_the_workflows_and_serves_their_thumbnails(comfy_server):
    listed = comfy_server.get("/api/workflow_templates")[EXTENSION_FOLDER]
    assert sorted(listed) == SHIPPED
    for name in SHIPPED:  # the URL every frontend builds: /api/workflow_templates/<folder>/<name>.jpg
        quoted = urllib.parse.quote(name)  # spaces and parentheses, as a browser's fetch sends them
        with urllib.request.urlopen(f"{comfy_server.url}/api/workflow_templates/{EXTENSION_FOLDER}/{quoted}.jpg",
                                    timeout=30) as response:
            assert response.headers["Content-Type"] == "image/jpeg"
            assert response.read() == (WORKFLOWS / f"{name}.jpg").read_bytes()
    assert comfy_server.get("/api/i18n")["en"]["templateWorkflows"]["category"][EXTENSION_FOLDER] == "CachedSearch"
