"""The docs: every node the extension registers has its page in web/docs/ (served where ComfyUI's node docs panel
fetches it, and shown in that panel on each frontend of the matrix), every relative link and image in the README,
docs/ and web/docs/ resolves, and the README stays short."""

import json
import os
import pathlib
import re
import subprocess
import tempfile
import urllib.request

import pytest
from test_browser import ARTIFACTS, BROWSER_TESTS, browser_available

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
NODE_DOCS = REPO_ROOT / "web" / "docs"
README_MAX_LINES = 300
PANEL_NODE = "CachedSearchSampler"

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HTML_SOURCE = re.compile(r"<(?:img|video|source)\b[^>]*\bsrc=\"([^\"]+)\"")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def documents() -> list[pathlib.Path]:
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md")), *sorted(NODE_DOCS.rglob("*.md"))]


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _FENCE.sub("", markdown), flags=re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return anchors


def broken_links(document: pathlib.Path, root: pathlib.Path = REPO_ROOT) -> list[str]:
    text = _FENCE.sub("", document.read_text())
    broken = []
    for target in _LINK.findall(text) + _HTML_SOURCE.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not a file of the repository
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (document.parent / path_part).resolve() if path_part else document
        if not resolved.is_relative_to(root) or not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in heading_anchors(resolved.read_text()):
            broken.append(f"{target} (no heading with that anchor)")
    return broken


def test_every_relative_link_and_image_resolves():
    broken = {str(doc.relative_to(REPO_ROOT)): links for doc in documents() if (links := broken_links(doc))}
    assert broken == {}


def test_the_link_check_sees_a_missing_file_a_missing_anchor_and_a_file_outside(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("# A heading: with `code`\n")
    (tmp_path / "outside.md").write_text("# Outside\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text("[ok](there.md#a-heading-with-code) ![gone](missing.png) [bad](there.md#nowhere) "
                    "<img src=\"gone.svg\"> [web](https://example.org/x) [up](../outside.md)\n"
                    "```\n[in code](ignored.md)\n```\n")
    assert broken_links(page, root=tmp_path / "docs") == [
        "missing.png (no such file)", "there.md#nowhere (no heading with that anchor)", "../outside.md (no such file)",
        "gone.svg (no such file)"]


def test_readme_stays_short():
    lines = (REPO_ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move details into a docs/ page"


@pytest.fixture(scope="module")
def registered_nodes(comfy_server) -> dict[str, dict]:
    """The nodes this extension registered on the real server, as /object_info lists them."""
    object_info = comfy_server.get("/object_info")
    ours = {name: info for name, info in object_info.items()
            if info.get("python_module", "").split(".")[-1] == "cachedsearch"}
    assert "CachedSearchSampler" in ours, "the extension's nodes are missing from /object_info"
    return ours


def fetch_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def fetch_text(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def test_every_registered_node_has_its_page_served_where_the_docs_panel_reads_it(comfy_server, registered_nodes):
    missing = sorted(node for node in registered_nodes if not (NODE_DOCS / f"{node}.md").is_file())
    assert missing == [], f"add web/docs/<NodeId>.md for {missing}"
    for node, info in registered_nodes.items():
        page = (NODE_DOCS / f"{node}.md").read_text()
        assert page.startswith(f"# {info['display_name']}\n"), f"web/docs/{node}.md: title is not the node's name"
        # the frontend's node help reads /extensions/<custom node folder>/docs/<NodeId>.md
        folder = info["python_module"].split(".")[-1]
        assert fetch_text(f"{comfy_server.url}/extensions/{folder}/docs/{node}.md") == (200, page)
    # pictures in a node doc are fetched by the frontend beside the page, so they must be served from web/docs too
    for path in NODE_DOCS.glob("*.md"):
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", path.read_text()):
            assert fetch_status(f"{comfy_server.url}/extensions/cachedsearch/docs/{target}") == 200, (path.name, target)
    extra = sorted(path.stem for path in NODE_DOCS.glob("*.md") if path.stem not in registered_nodes)
    assert extra == [], f"web/docs pages for nodes the extension does not register: {extra}"


@pytest.mark.browser
@pytest.mark.skipif(not browser_available() and os.environ.get("CI") != "true",
                    reason="needs Debian's chromium and `npm ci` in tests/browser (scripts/test.sh installs both)")
@pytest.mark.parametrize("frontend", ["pinned", "newest"])
def test_node_docs_panel_shows_the_page(request, frontend):
    """Selecting the node and pressing the selection toolbox's info button shows its web/docs page."""
    server = request.getfixturevalue("comfy_server" if frontend == "pinned" else "newest_frontend_server")
    server.request("POST", "/settings/Comfy.TutorialCompleted", True)
    server.request("POST", "/settings/Comfy.Canvas.SelectionToolbox", True)  # its default; the info button is on it
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / f"node_docs_{frontend}.png"
    # The script's temporary folder, where its Chromium profile must not outlive it; short, since Chromium puts a
    # socket in the profile and a socket's path has at most 107 characters.
    with tempfile.TemporaryDirectory(prefix="cs-") as scratch:
        completed = subprocess.run(["node", str(BROWSER_TESTS / "check_node_docs.mjs"), server.url, PANEL_NODE,
                                    str(screenshot)], capture_output=True, text=True, timeout=600,
                                   env={**os.environ, "TMPDIR": scratch})
        assert completed.returncode == 0, completed.stderr[-4000:]
        assert list(pathlib.Path(scratch).glob("cachedsearch-chromium-*")) == []
    seen = json.loads(completed.stdout.strip().splitlines()[-1])
    if seen["panel"] is None:
        pytest.skip(f"frontend {seen['frontend']} has no selection toolbox, so no info button for the node docs panel")
    heading = (NODE_DOCS / f"{PANEL_NODE}.md").read_text().splitlines()[0].removeprefix("# ")
    assert seen["headings"][:1] == [heading], seen
    # the page's own text, not the frontend's fallback built from the node's description
    assert "Queueing again." in seen["text"], seen
