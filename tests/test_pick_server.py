"""The artist's pick through a live ComfyUI server, as the panel drives it: a re-queued prompt that changes only the
Recommit's pick runs only the Recommit (ComfyUI's cache serves the search and the verifier) and delivers the stock
frames of the picked seed; a Recommit that waits for a click is answered over POST /cachedsearch/pick, and Cancel
ends the wait."""

import asyncio
import json
import re

import pytest

from report_text import refusal
from scripts.graphs import stock_wan_ksampler, wan_search

SEED = 600
PICKED = 3  # candidate 3: seed SEED + 2
PROMPT = "a red ball on the grass"
AFTER_THE_RECOMMIT = {"recommit", "decode", "save"}


def pick_graph(filename_prefix="pick", **recommit_inputs) -> dict:
    graph = wan_search(seed=SEED, verifier_prompt=PROMPT, filename_prefix=filename_prefix)
    graph["recommit"]["inputs"].update(recommit_inputs)
    return graph


def saved_frames(server, entry):
    import numpy
    from PIL import Image

    return [numpy.asarray(Image.open(server.base_dir / "output" / image["subfolder"] / image["filename"]))
            for image in entry["outputs"]["save"]["images"]]


def delivery(entry) -> dict:
    (delivered,) = entry["outputs"]["recommit"]["cachedsearch_delivery"]
    return delivered


def run_answering(server, graphs, on_awaiting=None, timeout=300.0):
    """Queue ``graphs`` back to back over a websocket as the GUI does; ``on_awaiting(index, event_data)`` answers
    each cachedsearch.awaiting_pick event of prompt ``index``. Returns, per prompt in queue order, its history
    entry, the nodes it executed (its "executing" events) and the awaiting events it sent."""
    return asyncio.run(_run_answering(server, graphs, on_awaiting, timeout))


async def _run_answering(server, graphs, on_awaiting, timeout):
    import aiohttp

    finished = {"execution_success", "execution_error", "execution_interrupted"}
    socket_url = f"ws://127.0.0.1:{server.port}/ws?clientId={server.client_id}"
    async with aiohttp.ClientSession() as session, session.ws_connect(socket_url) as socket:
        prompt_ids = []
        for graph in graphs:
            status, body = server.queue_prompt(graph)
            assert status == 200, json.dumps(body, indent=1)
            prompt_ids.append(body["prompt_id"])
        index_of = {prompt_id: index for index, prompt_id in enumerate(prompt_ids)}
        executed = [set() for _ in graphs]
        awaiting = [[] for _ in graphs]
        pending = set(prompt_ids)
        while pending:
            message = await socket.receive(timeout=timeout)
            if message.type != aiohttp.WSMsgType.TEXT:
                assert message.type not in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR), server.log_tail()
                continue
            event = json.loads(message.data)
            data = event.get("data") or {}
            index = index_of.get(data.get("prompt_id"))
            if index is None:
                continue
            if event["type"] == "executing" and data.get("node") is not None:
                executed[index].add(data["node"])
            elif event["type"] == "cachedsearch.awaiting_pick":
                awaiting[index].append(data)
                if on_awaiting is not None:
                    on_awaiting(index, data)
            elif event["type"] in finished:
                pending.discard(data["prompt_id"])
    entries = [server.wait_for(prompt_id, timeout) for prompt_id in prompt_ids]
    return entries, executed, awaiting


@pytest.fixture(scope="module")
def stock_frames(comfy_server):
    """The frames a stock KSampler makes with the picked candidate's seed."""
    return saved_frames(comfy_server, comfy_server.run_prompt(stock_wan_ksampler(seed=SEED + PICKED - 1,
                                                                                 filename_prefix="pick_stock")))


def test_the_pick_inputs_are_optional_with_tooltips_so_old_api_prompts_never_wait(comfy_server):
    info = comfy_server.get("/object_info/CachedSearchRecommit")["CachedSearchRecommit"]["input"]
    assert set(info["required"]) == {"candidates", "mode"}
    optional = info["optional"]
    assert set(optional) == {"ranking", "model", "model_high", "model_low", "pick", "pick_among", "wait_for_pick",
                             "pick_timeout"}
    assert all(options[1].get("tooltip") for options in optional.values())
    assert optional["wait_for_pick"][1]["default"] is False
    assert (optional["pick"][1]["default"], optional["pick"][1]["min"], optional["pick"][1]["max"]) == (0, 0, 64)


def test_a_requeue_with_only_the_pick_changed_runs_only_the_recommit_and_delivers_the_stock_frames(
        comfy_server, stock_frames):
    (first, second), executed, awaiting = run_answering(comfy_server, [
        pick_graph("pick_requeue"), pick_graph("pick_requeue", pick=PICKED, pick_among=3)])
    assert awaiting == [[], []]  # the API never waits unless asked
    assert delivery(first)["picked_by"] == "verifier"
    assert "search" in executed[0] and "ranking" in executed[0]

    cached = sum((message[1]["nodes"] for message in second["status"]["messages"]
                  if message[0] == "execution_cached"), [])
    assert {"search", "ranking", "load_verifier", "decode_drafts"} <= set(cached)
    assert executed[1] == AFTER_THE_RECOMMIT
    picked = delivery(second)
    assert (picked["candidate"], picked["seed"], picked["picked_by"]) == (PICKED, SEED + PICKED - 1, "you")
    assert picked["verifier_choice"] == {"candidate": delivery(first)["candidate"], "seed": delivery(first)["seed"]}
    frames = saved_frames(comfy_server, second)
    assert len(frames) == len(stock_frames) == 9
    assert all((a == b).all() for a, b in zip(frames, stock_frames))


def test_a_waiting_recommit_delivers_the_candidate_clicked_on_the_panel(comfy_server, stock_frames):
    answers = []

    def click(index, event):
        answers.append(comfy_server.get("/cachedsearch/pick"))
        answers.append(comfy_server.request("POST", "/cachedsearch/pick", dict(event, node="nowhere", candidate=1)))
        answers.append(comfy_server.request("POST", "/cachedsearch/pick", dict(event, candidate=4, mode="commit")))
        answers.append(comfy_server.request("POST", "/cachedsearch/pick", dict(event, candidate=PICKED,
                                                                              mode="commit")))
        answers.append(comfy_server.request("POST", "/cachedsearch/pick", dict(event, candidate=1, mode="keep")))

    (entry,), executed, (events,) = run_answering(comfy_server, [pick_graph("pick_wait", wait_for_pick=True)],
                                                  click)
    assert entry["status"]["status_str"] == "success"
    (event,) = events
    assert event == {"prompt_id": event["prompt_id"], "node": "recommit", "candidates": 3,
                     "preselected": delivery(entry)["verifier_choice"]["candidate"]}
    listing, elsewhere, out_of_range, clicked, too_late = answers
    assert listing == {"waiting": [event]}
    assert elsewhere[0] == 409 and "node 'nowhere'" in elsewhere[1]["error"]
    assert out_of_range[0] == 400 and re.match(refusal("candidate", 4, 3), out_of_range[1]["error"]), out_of_range
    assert clicked == (200, {"ok": True})
    assert too_late[0] == 409  # the first click was taken
    assert (delivery(entry)["candidate"], delivery(entry)["picked_by"]) == (PICKED, "you")
    assert "recommit" in executed[0]
    assert all((a == b).all() for a, b in zip(saved_frames(comfy_server, entry), stock_frames))
    assert comfy_server.get("/cachedsearch/pick") == {"waiting": []}

    (timed_out,), _, (timeout_events,) = run_answering(comfy_server, [
        pick_graph("pick_timeout", wait_for_pick=True, pick_timeout=1)])
    assert len(timeout_events) == 1 and delivery(timed_out)["picked_by"] == "verifier"


def test_cancel_while_waiting_ends_the_run_and_the_pick_queued_behind_it_runs_clean(comfy_server, stock_frames):
    def press_cancel(index, event):
        comfy_server.interrupt(event["prompt_id"])

    (cancelled, after), executed, awaiting = run_answering(comfy_server, [
        pick_graph("pick_cancelled", wait_for_pick=True), pick_graph("pick_after_cancel", pick=PICKED)],
        press_cancel)
    (stop,) = [message[1] for message in cancelled["status"]["messages"] if message[0] == "execution_interrupted"]
    assert stop["node_id"] == "recommit" and "save" not in cancelled["outputs"]
    assert len(awaiting[0]) == 1 and awaiting[1] == []
    assert after["status"]["status_str"] == "success" and executed[1] == AFTER_THE_RECOMMIT
    assert all((a == b).all() for a, b in zip(saved_frames(comfy_server, after), stock_frames))
    assert comfy_server.get("/cachedsearch/pick") == {"waiting": []}
