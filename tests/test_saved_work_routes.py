"""The saved drafts in the artist's hands, over a real server's HTTP routes (what the ComfyUI setting and the
CachedSearch > Saved drafts dialog call): the listing says what is kept, where and under which cap; a new cap is
the one the running server's next search keeps on disk; clearing one model's drafts, then all, deletes their files
and records and frees the bytes it says."""

import json

import pytest

from test_draft_store_comfy import drafts_folder, search

ROUTE = "/cachedsearch/saved_work"
GIGABYTE = 1024**3


def on_disk(folder) -> int:
    """The bytes of the index and the tensor files, measured."""
    return sum(path.stat().st_size for path in folder.iterdir() if path.name == "index.jsonl"
               or path.name.endswith(".safetensors"))


def draft_records(folder) -> list[dict]:
    lines = (folder / "index.jsonl").read_text().splitlines()[1:]
    return [record for record in map(json.loads, lines) if record["kind"] == "draft"]


def run(server, graph) -> dict:
    (entry,) = server.run_batch([graph])
    assert entry["status"]["status_str"] == "success", entry["status"]
    return entry


@pytest.mark.server
def test_over_http_the_cap_applies_to_the_running_server_and_clearing_frees_the_bytes(comfy_server):
    server, folder = comfy_server, drafts_folder(comfy_server)
    run(server, search(seed=7100, num_candidates=2))
    listing = server.get(ROUTE)
    assert listing["folder"] == str(folder) and listing["bytes"] == on_disk(folder)
    assert listing["default_max_bytes"] == 4 * GIGABYTE
    (model,) = {record["model"] for record in draft_records(folder)}
    assert model.endswith(".safetensors")
    (entry,) = [entry for entry in listing["drafts"] if entry["model"] == model]
    assert entry["drafts"] == len(draft_records(folder)) >= 2
    one_draft = max(record["size"] for record in draft_records(folder))

    cap = 3 * one_draft
    try:
        status, body = server.request("POST", f"{ROUTE}/cap", {"gigabytes": cap / GIGABYTE})
        assert status == 200 and abs(body["max_bytes"] - cap) <= 1
        run(server, search(seed=7200, num_candidates=4))  # four new drafts into room for three
        assert on_disk(folder) <= cap + 1 and len(draft_records(folder)) <= 3
    finally:
        assert server.request("POST", f"{ROUTE}/cap", {"gigabytes": 4})[0] == 200
    assert server.get(ROUTE)["max_bytes"] == 4 * GIGABYTE

    run(server, search(seed=7300, num_candidates=2))
    before = on_disk(folder)
    status, body = server.request("POST", f"{ROUTE}/clear", {"model": "not a model of this folder.safetensors"})
    assert status == 200 and body == {"removed": 0, "freed_bytes": 0}
    status, body = server.request("POST", f"{ROUTE}/clear", {"model": model})
    assert status == 200 and body["removed"] >= 2 and body["freed_bytes"] == before - on_disk(folder) > 0
    assert [record for record in draft_records(folder) if record["model"] == model] == []
    others = draft_records(folder)  # other tests' drafts of other models, on this shared server
    assert sorted(path.name for path in folder.glob("*.safetensors")) == sorted(record["file"] for record in others)
    run(server, search(seed=7400, num_candidates=2))
    before = on_disk(folder)
    status, body = server.request("POST", f"{ROUTE}/clear", {})
    assert status == 200 and body["removed"] == len(others) + 2 and body["freed_bytes"] == before - on_disk(folder)
    assert draft_records(folder) == [] and not list(folder.glob("*.safetensors")) and server.get(ROUTE)["drafts"] == []


@pytest.mark.server
def test_over_http_the_saved_work_routes_refuse_bad_input_by_name(comfy_server):
    status, body = comfy_server.request("POST", f"{ROUTE}/cap", {"gigabytes": 0})
    assert status == 400 and body["error"].startswith("gigabytes: got 0 (a whole number); use the cap in GB")
    status, body = comfy_server.request("POST", f"{ROUTE}/cap", {"gb": 4})
    assert status == 400 and body["error"].startswith("gigabytes: missing")
    status, body = comfy_server.request("POST", f"{ROUTE}/clear", {"model": 5})
    assert status == 400 and body["error"].startswith("model: got 5")
