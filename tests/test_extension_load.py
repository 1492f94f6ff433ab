"""The extension's load step: the model folders, routes and on-prompt handler are registered by the extension when
ComfyUI loads it (not when its module is imported), once per server however ComfyUI loads it: 0.33 awaits on_load
and then get_node_list, 0.3.75 only get_node_list (in process, on a real PromptServer that is never started)."""

import asyncio
import json
import os

import pytest


@pytest.fixture
def new_server(engine):
    """Makes real ComfyUI PromptServers (each becomes PromptServer.instance, as main.py's does); the one before is
    put back afterwards."""
    import server

    previous = getattr(server.PromptServer, "instance", None)
    loops = []

    def make():
        loops.append(asyncio.new_event_loop())
        return server.PromptServer(loops[-1])

    yield make
    server.PromptServer.instance = previous
    for loop in loops:
        loop.close()


def expected_routes(nodes) -> list[tuple[str, str]]:
    distributed = nodes.distributed_search.ROUTE
    return sorted([("GET", nodes.pick.ROUTE), ("POST", nodes.pick.ROUTE),
                   ("POST", nodes.calibration_cost.COST_ROUTE), ("POST", f"{distributed}/claim"),
                   ("POST", f"{distributed}/heartbeat"), ("POST", f"{distributed}/draft"),
                   ("GET", f"{distributed}/jobs"), ("GET", nodes.saved_work_routes.ROUTE),
                   ("POST", f"{nodes.saved_work_routes.ROUTE}/cap"), ("POST", f"{nodes.saved_work_routes.ROUTE}/clear"),
                   ("POST", nodes.schedule_route.SCHEDULE_ROUTE), ("GET", nodes.docs_route.DOCS_ROUTE + "/{path:.+}")])


def extension_routes(prompt_server) -> list[tuple[str, str]]:
    return sorted((route.method, route.path) for route in prompt_server.routes
                  if route.path.startswith("/cachedsearch"))


def distributed_handlers(prompt_server, nodes) -> int:
    return prompt_server.on_prompt_handlers.count(nodes.distributed_setup.attach_distributed_setup)


def load(extension, *steps: str) -> None:
    for step in steps:
        asyncio.run(getattr(extension, step)())


@pytest.mark.parametrize("steps", [("get_node_list",), ("on_load", "get_node_list")],
                         ids=["as ComfyUI 0.3.75 loads it", "as ComfyUI 0.33 loads it"])
def test_a_server_gets_every_route_and_the_handler_once_however_often_the_extension_loads(engine, new_server, steps):
    from aiohttp import web

    package = engine.extension
    prompt_server = new_server()
    extension = asyncio.run(package.comfy_entrypoint())
    load(extension, *steps)
    assert extension_routes(prompt_server) == expected_routes(package.nodes)
    assert distributed_handlers(prompt_server, package.nodes) == 1
    load(extension, *steps)
    load(asyncio.run(package.comfy_entrypoint()), "on_load", "get_node_list")  # another instance of the extension
    assert extension_routes(prompt_server) == expected_routes(package.nodes)
    assert distributed_handlers(prompt_server, package.nodes) == 1
    web.Application().add_routes(prompt_server.routes)  # what main.py's add_routes does: no route twice

    another_server = new_server()
    load(extension, *steps)
    assert extension_routes(another_server) == expected_routes(package.nodes)


def test_the_verifier_folders_are_registered_by_the_load_step(engine):
    import folder_paths

    nodes = engine.extension.nodes
    saved = folder_paths.folder_names_and_paths.pop(nodes.verifier_models.VIDEO_SCORE_FOLDER)
    try:
        asyncio.run(engine.extension.comfy_entrypoint())  # making the extension registers nothing
        assert nodes.verifier_models.VIDEO_SCORE_FOLDER not in folder_paths.folder_names_and_paths
        load(asyncio.run(engine.extension.comfy_entrypoint()), "get_node_list")
        paths, extensions = folder_paths.folder_names_and_paths[nodes.verifier_models.VIDEO_SCORE_FOLDER]
        assert paths[0] == os.path.join(folder_paths.models_dir, nodes.verifier_models.VIDEO_SCORE_FOLDER)
        assert ".json" in extensions
    finally:
        folder_paths.folder_names_and_paths[nodes.verifier_models.VIDEO_SCORE_FOLDER] = saved


def test_a_server_lists_only_the_picks_waiting_on_it(engine, new_server):
    """The pick mailbox is per server: a Recommit waiting on one server is listed (and answered) by that server's
    route only."""
    from aiohttp.test_utils import make_mocked_request

    package = engine.extension
    pick = package.nodes.pick
    servers = []
    for _ in range(2):
        servers.append(new_server())
        load(asyncio.run(package.comfy_entrypoint()), "get_node_list")

    def waiting_on(prompt_server) -> list[dict]:
        handler = next(route.handler for route in prompt_server.routes
                       if route.method == "GET" and route.path == pick.ROUTE)
        response = asyncio.run(handler(make_mocked_request("GET", pick.ROUTE)))
        return json.loads(response.text)["waiting"]

    choices = package.cachedsearch_core.pick.PickChoices((7, 8), (0, 1))
    with pick.MAILBOXES.of(servers[0]).waiting("run-1", "12", choices, 1, "commit"):
        assert [entry["prompt_id"] for entry in waiting_on(servers[0])] == ["run-1"]
        assert waiting_on(servers[1]) == []
        with pytest.raises(pick.PickRefused):
            pick.MAILBOXES.of(servers[1]).answer("run-1", "12", 2)
    assert waiting_on(servers[0]) == []
