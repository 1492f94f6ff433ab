"""The two small routes of #53 over HTTP on the real server: GET /cachedsearch/docs/<path> serves the pack's
documentation (README.md, docs/, web/docs/ and their images) and nothing else; POST /cachedsearch/pruning_schedule
answers with the Pruning Plan's own check of a schedule."""

import pytest
from test_routes import post_json, send

from cachedsearch_core.pruning import PruningSchedule

REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent
DOCS = "/cachedsearch/docs/"
SCHEDULE = "/cachedsearch/pruning_schedule"


@pytest.mark.parametrize("path", ["README.md", "docs/method.md", "web/docs/CachedSearchSampler.md"])
def test_the_docs_route_serves_the_packs_documentation_as_it_is(comfy_server, path):
    status, text = send(comfy_server, "GET", DOCS + path)
    assert status == 200 and text == (REPO_ROOT / path).read_text()


@pytest.mark.parametrize("path", ["nodes/__init__.py", "pyproject.toml", "docs/../nodes/pick.py",
                                  "docs/%2E%2E/pyproject.toml", "web/js/cachedsearch_panel.js", "docs/missing.md"])
def test_the_docs_route_serves_nothing_else(comfy_server, path):
    status, answer = send(comfy_server, "GET", DOCS + path)
    # a path with ".." is normalised before routing (aiohttp's own 404), the others are refused by the route
    assert status == 404 and (".." in path or "2E" in path or answer["error"].startswith("path: ")), (path, answer)


def test_an_image_of_the_docs_comes_with_its_type(comfy_server):
    status, _ = send(comfy_server, "GET", DOCS + "web/docs/images/verifier_panel.png")
    assert status == 200


def test_the_schedule_route_answers_with_the_nodes_own_check(comfy_server):
    assert post_json(comfy_server, SCHEDULE, {"schedule": "20%:4, 40%:2"}) == (200, {"rounds": 2})
    assert post_json(comfy_server, SCHEDULE, {"schedule": ""}) == (200, {"rounds": 0})
    with pytest.raises(ValueError) as refused:
        PruningSchedule("10:4, 5:2")
    assert post_json(comfy_server, SCHEDULE, {"schedule": "10:4, 5:2"}) == (400, {"error": str(refused.value)})
    status, answer = post_json(comfy_server, SCHEDULE, {"schedule": 5})
    assert status == 400 and answer["error"].startswith("schedule: got 5 ")
    status, answer = post_json(comfy_server, SCHEDULE, {"schedule": "", "keep": 4})
    assert status == 400 and answer["error"].startswith("keep: not a field of this request")
