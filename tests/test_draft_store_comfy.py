"""Drafts kept on disk in a real ComfyUI server: a search cancelled and re-queued in a fresh server process computes
only the drafts it lacks and ends as an uninterrupted run; widening reuses every draft it has; a changed prompt,
LoRA, sampler or cache setting reuses nothing; a pick after ComfyUI dropped the drafts computes only the commit;
keep after a restart delivers the stored draft; a budget search reuses and stops where it did; a pruned search
resumes after its round."""

import json
import shutil

import pytest

from scripts import comfy_runtime
from scripts.graphs import stock_wan_ksampler, wan_search
from scripts.tiny_models import WAN21_LORA_FILE

STEPS = 6
DRAFTS_FOLDER = ("user", "cachedsearch", "saved")  # the store drafts share with Calibrate's rollouts


def drafts_folder(server):
    return server.base_dir.joinpath(*DRAFTS_FOLDER)


def saved_seeds(server) -> list[int]:
    """The seeds of the drafts in the store's index, in the order they were saved (after its header line)."""
    records = [json.loads(line) for line in (drafts_folder(server) / "index.jsonl").read_text().splitlines()[1:]]
    return [record["seed"] for record in records if record["kind"] == "draft"]


def search(seed: int, num_candidates: int, **changes) -> dict:
    graph = wan_search(seed=seed, num_candidates=num_candidates, steps=STEPS, verifier_prompt="a red ball",
                       filename_prefix=f"drafts_on_disk_{seed}")
    for node, inputs in changes.items():
        graph[node]["inputs"].update(inputs)
    graph["save_drafts_latent"] = {"class_type": "SaveLatent", "inputs": {"samples": ["search", 0],
                                                                           "filename_prefix": f"drafts_{seed}"}}
    return graph


def with_lora(graph: dict) -> dict:
    graph = json.loads(json.dumps(graph))
    graph["lora"] = {"class_type": "LoraLoaderModelOnly", "inputs": {"model": ["shift", 0], "lora_name":
                                                                     WAN21_LORA_FILE, "strength_model": 1.0}}
    graph["cache"]["inputs"]["model"] = ["lora", 0]
    return graph


def pressing_cancel(graph: dict) -> dict:
    """``graph`` with the test pack's PressCancel between the cache and the Sampler: Cancel is then pressed inside the
    server at the sampling run and transformer call ``press_cancel_in`` names, however slow the machine (a Cancel sent
    on a progress event lands wherever the server has got to by then). It is no input, so every run of a test uses
    this graph and the saved drafts' key stays the same."""
    graph = json.loads(json.dumps(graph))
    graph["press_cancel"] = {"class_type": "CachedSearchTestPressCancel", "inputs": {"model": ["cache", 0]}}
    graph["search"]["inputs"]["model"] = ["press_cancel", 0]
    return graph


def press_cancel_in(server, run: int, call: int = 1) -> None:
    """Cancel at transformer call ``call`` of the ``run``-th sampling run from now (a search's draft, a pruned
    search's segment) of a graph made by ``pressing_cancel``."""
    status, answer = server.request("POST", "/cachedsearch_test/press_cancel", {"run": run, "call": call})
    assert status == 200, answer


def run(server, graph):
    """The run's history entry and how many drafts the Sampler computed, counted from the progress bar: a computed
    draft moves it over its own STEPS steps, a reused one moves nothing."""
    events = []

    def watch(index, node, value, maximum):
        events.append((node, value))

    (entry,) = server.run_batch([graph], watch)
    return entry, len({(value - 1) // STEPS for node, value in events if node == "search" and value > 0})


def saved_frames(server, entry):
    return [(server.base_dir / "output" / image["subfolder"] / image["filename"]).read_bytes()
            for image in entry["outputs"]["save"]["images"]]


def saved_drafts(server, entry) -> bytes:
    """The drafts latent as SaveLatent wrote it (raw bytes of the tensor)."""
    from safetensors.torch import load_file

    (latent,) = entry["outputs"]["save_drafts_latent"]["latents"]
    tensors = load_file(server.base_dir / "output" / latent["subfolder"] / latent["filename"])
    return tensors["latent_tensor"].numpy().tobytes()


def outcome(server, entry) -> dict:
    """What the search delivered, without timings: the drafts (their latents, seeds and calls), the ranking and the
    committed frames."""
    rows = [{key: row[key] for key in ("seed", "skipped", "calls")}
            for row in entry["outputs"]["search"]["cachedsearch_drafts"]]
    return {"drafts": rows, "latents": saved_drafts(server, entry), "ranking": entry["outputs"]["ranking"]["text"][0],
            "delivered": saved_frames(server, entry)}


def reused(entry) -> tuple[int, int]:
    """How many of the search's finished drafts an earlier run had saved, and of how many (its cost payload)."""
    (cost,) = entry["outputs"]["search"]["cachedsearch_cost"]
    return cost["reused_drafts"], cost["finished_drafts"]


@pytest.mark.slow  # two server processes
def test_over_http_a_cancelled_search_resumes_in_a_fresh_server_with_only_the_missing_drafts(base_with_models):
    """Cancel a search of 8 during draft 5, stop the server, start a new server process on the same base directory
    and queue the same graph: it computes exactly the drafts the store lacks (counted from the progress bar) and its
    drafts, ranking and commit equal an uninterrupted run's bit for bit; keep after a restart delivers the stored
    draft."""
    graph, width = pressing_cancel(search(seed=500, num_candidates=8)), 8
    keep = pressing_cancel(search(seed=500, num_candidates=8, recommit={"mode": "keep", "pick": 3}))
    first = comfy_runtime.ComfyServer(base_with_models("drafts_restart"))
    try:
        first.start()
        alone, computed = run(first, graph)
        assert computed == width
        assert reused(alone) == (0, width)
        kept_alone, computed = run(first, keep)  # ComfyUI's cache serves the search: nothing computed
        assert computed == 0
        shutil.rmtree(drafts_folder(first))
        first.reset_caches()  # the same graph again must run, not come from ComfyUI's cache
        press_cancel_in(first, run=5)
        cancelled, computed = run(first, graph)
        saved = saved_seeds(first)
    finally:
        first.stop()
    assert "execution_interrupted" in [message[0] for message in cancelled["status"]["messages"]]
    assert saved == list(range(500, 504))  # the 4 drafts before the cancel in draft 5

    second = comfy_runtime.ComfyServer(first.base_dir)
    try:
        second.start()
        resumed, computed = run(second, graph)
        assert computed == width - len(saved)  # exactly the missing drafts
        assert saved_seeds(second) == list(range(500, 500 + width))  # appended, nothing twice
        second.reset_caches()  # as a restart would: nothing of the search left in ComfyUI's memory
        kept, computed = run(second, keep)
    finally:
        second.stop()
    assert resumed["status"]["status_str"] == "success", resumed["status"]
    assert outcome(second, resumed) == outcome(first, alone)
    assert reused(resumed) == (len(saved), width)
    (cost,) = resumed["outputs"]["search"]["cachedsearch_cost"]
    (cost_alone,) = alone["outputs"]["search"]["cachedsearch_cost"]
    assert cost["reused_drafts"] == len(saved) and cost["drafts_saved"]
    assert cost["search_calls"] == cost_alone["search_calls"] * (width - len(saved)) // width
    assert computed == 0 and reused(kept) == (width, width)
    assert saved_frames(second, kept) == saved_frames(first, kept_alone)  # the stored draft, bit for bit


@pytest.mark.slow  # eight searches
def test_over_http_widening_reuses_every_draft_and_a_changed_setup_reuses_nothing(comfy_server):
    shutil.rmtree(drafts_folder(comfy_server), ignore_errors=True)
    comfy_server.reset_caches()
    _, computed = run(comfy_server, search(seed=600, num_candidates=3))
    assert computed == 3
    widened, computed = run(comfy_server, search(seed=600, num_candidates=5))
    assert computed == 2 and reused(widened) == (3, 5)
    moved, computed = run(comfy_server, search(seed=602, num_candidates=4))  # seeds 602-605: 3 of them saved
    assert computed == 1 and reused(moved) == (3, 4)
    for change in ({"positive": {"text_seed": 3}}, {"search": {"cfg": 4.0}}, {"search": {"scheduler": "normal"}},
                   {"cache": {"tau": 0.2}}, {"cache": {"warmup_steps": 3}}):
        changed, computed = run(comfy_server, search(seed=600, num_candidates=5, **change))
        assert computed == 5, change
        assert reused(changed) == (0, 5), change
    changed, computed = run(comfy_server, with_lora(search(seed=600, num_candidates=5)))
    assert computed == 5 and reused(changed) == (0, 5)


def test_over_http_a_pick_after_comfyui_dropped_the_drafts_computes_only_the_commit(comfy_server):
    shutil.rmtree(drafts_folder(comfy_server), ignore_errors=True)
    comfy_server.reset_caches()
    graph = search(seed=650, num_candidates=4)
    _, computed = run(comfy_server, graph)
    assert computed == 4
    comfy_server.run_prompt(stock_wan_ksampler(seed=1, steps=STEPS))  # an unrelated prompt
    comfy_server.reset_caches()  # and ComfyUI's cache freed
    events = []
    (picked,) = comfy_server.run_batch([search(seed=650, num_candidates=4, recommit={"pick": 2, "pick_among": 4})],
                                       lambda index, node, value, maximum: events.append((node, value)))
    assert picked["status"]["status_str"] == "success", picked["status"]
    assert [value for node, value in events if node == "search"] == []  # no draft computed
    # one commit (ComfyUI 0.33 may send fewer progress events than steps, never more than the commit's steps)
    assert max(value for node, value in events if node == "recommit") == STEPS
    assert reused(picked) == (4, 4)
    (delivery,) = picked["outputs"]["recommit"]["cachedsearch_delivery"]
    assert (delivery["candidate"], delivery["seed"]) == (2, 651)


def test_over_http_save_drafts_off_saves_and_reuses_nothing(comfy_server):
    shutil.rmtree(drafts_folder(comfy_server), ignore_errors=True)
    comfy_server.reset_caches()
    graph = search(seed=680, num_candidates=2, search={"save_drafts": False})
    entry, _ = run(comfy_server, graph)
    assert not drafts_folder(comfy_server).exists()
    assert entry["outputs"]["search"]["cachedsearch_cost"][0]["drafts_saved"] is False
    comfy_server.reset_caches()
    _, computed = run(comfy_server, graph)
    assert computed == 2


def with_budget(graph: dict, rollouts: int) -> dict:
    graph["budget"] = {"class_type": "CachedSearchBudget", "inputs": {"budget_rollouts": rollouts, "budget_unit":
                                                                     "transformer calls", "max_candidates": 8}}
    graph["search"]["inputs"]["budget"] = ["budget", 0]
    return graph


@pytest.mark.slow  # four searches
def test_over_http_a_budget_search_reuses_saved_drafts_stops_where_it_did_and_computes_only_the_rest(comfy_server):
    """A budget search whose first seeds were drafted earlier (by a plain search of the same setup) reads them back,
    charges them to the budget as when they were drafted, and so chooses the same width and delivers the same
    drafts, ranking and commit as an uninterrupted budget search, computing only the drafts it lacks."""
    shutil.rmtree(drafts_folder(comfy_server), ignore_errors=True)
    comfy_server.reset_caches()
    budgeted = with_budget(search(seed=700, num_candidates=1), rollouts=4)
    alone, computed_alone = run(comfy_server, budgeted)
    width = len(alone["outputs"]["search"]["cachedsearch_drafts"])
    assert width >= 4 and reused(alone) == (0, width)

    shutil.rmtree(drafts_folder(comfy_server), ignore_errors=True)
    comfy_server.reset_caches()
    _, computed = run(comfy_server, search(seed=700, num_candidates=3))  # as a search stopped after 3 drafts
    assert computed == 3
    resumed, computed = run(comfy_server, budgeted)
    assert resumed["status"]["status_str"] == "success", resumed["status"]
    assert computed == computed_alone - 3  # the stopped draft, if any, is computed again in both
    assert outcome(comfy_server, resumed) == outcome(comfy_server, alone)
    assert reused(resumed) == (3, width)  # charged as when drafted: the same width N as the uninterrupted run
    assert resumed["outputs"]["search"]["cachedsearch_budget"][0]["width"] == width
    (cost,) = resumed["outputs"]["search"]["cachedsearch_cost"]
    assert cost["reused_drafts"] == 3 and cost["drafts_saved"]


def with_pruning(graph: dict) -> dict:
    graph["pruning"] = {"class_type": "CachedSearchPruningPlan", "inputs": {
        "vae": ["vae", 0], "verifier": ["load_verifier", 0], "prompt": "a red ball", "keep": 2, "prune_fraction": 0.5,
        "prune_step": 3, "preview_frames": 1, "schedule": ""}}
    graph["search"]["inputs"]["pruning"] = ["pruning", 0]
    return graph


def steps_run(server, graph):
    """The run's history entry and how many sampler steps the pruned search ran (its bar moves only for those)."""
    reached = [0]

    def watch(index, node, value, maximum):
        if node == "search":
            reached[0] = max(reached[0], value)

    (entry,) = server.run_batch([graph], watch)
    return entry, reached[0]


@pytest.mark.slow  # three pruned searches
def test_over_http_a_pruned_search_cancelled_after_its_round_resumes_with_only_the_survivors_ends(comfy_server):
    """A pruned search (4 seeds to step 3 of 6, the best 2 on) cancelled after its round re-queued reads every
    candidate's state at the round back, re-scores the previews from the saved x0 estimates and computes only the
    survivors' ends, ending as the uninterrupted run bit for bit."""
    graph = pressing_cancel(with_pruning(search(seed=800, num_candidates=4)))
    shutil.rmtree(drafts_folder(comfy_server), ignore_errors=True)
    comfy_server.reset_caches()
    alone, steps_alone = steps_run(comfy_server, graph)
    assert alone["status"]["status_str"] == "success", alone["status"]
    assert steps_alone == 4 * 3 + 2 * 3

    shutil.rmtree(drafts_folder(comfy_server), ignore_errors=True)
    comfy_server.reset_caches()
    press_cancel_in(comfy_server, run=6)  # in the second survivor's end: runs 1-4 draft to the round, 5 is an end
    cancelled, _ = steps_run(comfy_server, graph)
    assert "execution_interrupted" in [message[0] for message in cancelled["status"]["messages"]]
    assert len(saved_seeds(comfy_server)) == 4 + 1  # the 4 states at the round and the first survivor's end
    comfy_server.reset_caches()
    resumed, steps = steps_run(comfy_server, graph)
    assert resumed["status"]["status_str"] == "success", resumed["status"]
    assert steps == 3  # only the second survivor's end
    assert outcome(comfy_server, resumed) == outcome(comfy_server, alone)
    assert pruned_rows(resumed) == pruned_rows(alone)  # the pruned seeds, their preview scores and calls


def pruned_rows(entry) -> list[dict]:
    return [{key: value for key, value in row.items() if key != "seconds"}
            for row in entry["outputs"]["search"]["cachedsearch_pruned"]]
