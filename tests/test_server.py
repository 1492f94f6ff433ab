"""The extension inside a real ComfyUI server, driven over HTTP like the GUI does."""

import re

import pytest

from cachedsearch_core.calibration import OUR_ENGINE
from cachedsearch_core.records import MAX_CANDIDATES
from cachedsearch_core.search_report import DELIVERED_BY, WINNER_LINE_PREFIX
from report_text import refusal, says
from scripts.graphs import cached_wan_sampling, stock_wan_ksampler, wan_search


def test_nodes_are_registered_with_tooltips_on_every_input(comfy_server):
    info = comfy_server.get("/object_info/CachedSearchApplyCache")["CachedSearchApplyCache"]
    assert info["display_name"] == "CachedSearch Apply Cache"
    assert info["category"] == "CachedSearch"
    inputs = info["input"]["required"]
    assert set(inputs) == {"model", "mode", "tau", "warmup_steps", "cooldown_steps", "static_interval"}
    assert all(options[1].get("tooltip") for options in inputs.values())
    assert inputs["mode"][1]["options"] == ["adaptive", "static", "off"]
    assert inputs["tau"][1]["default"] == 0.10 and inputs["tau"][1]["min"] == 0.0


def test_cached_sampling_runs_end_to_end_through_http(comfy_server):
    entry = comfy_server.run_prompt(cached_wan_sampling(seed=3, steps=12, tau=0.3, warmup_steps=2, cooldown_steps=2,
                                                        filename_prefix="e2e"))
    (image,) = entry["outputs"]["save"]["images"][:1]
    saved = comfy_server.base_dir / "output" / image["subfolder"] / image["filename"]
    assert saved.stat().st_size > 0
    assert len(entry["outputs"]["save"]["images"]) == 9  # one PNG per decoded frame
    # the cache's log line: the engine, its mode and tau, then what it computed
    assert says(comfy_server.log_tail(20000), f"{OUR_ENGINE} (adaptive, tau 0.3): computed")


@pytest.mark.parametrize("field, value", [("tau", -0.1), ("warmup_steps", -1), ("cooldown_steps", -2)])
def test_negative_settings_are_rejected_at_validation_naming_the_input(comfy_server, field, value):
    graph = cached_wan_sampling(**{field: value})
    status, body = comfy_server.queue_prompt(graph)
    assert status == 400
    errors = body["node_errors"]["cache"]["errors"]
    assert any(field in (error.get("details", "") + str(error.get("extra_info", ""))) for error in errors)
    assert any("smaller than min" in error["message"] + error.get("details", "") for error in errors)


def saved_frames(server, entry, node="save"):
    import numpy
    from PIL import Image

    return [numpy.asarray(Image.open(server.base_dir / "output" / image["subfolder"] / image["filename"]))
            for image in entry["outputs"][node]["images"]]


def test_search_and_recommit_deliver_what_a_stock_ksampler_makes_for_the_winner(comfy_server):
    entry = comfy_server.run_prompt(wan_search(seed=20, scores="0.1 0.9 0.5", filename_prefix="search"))
    report = entry["outputs"]["recommit"]["text"][0]
    assert f"{WINNER_LINE_PREFIX}candidate 2, seed 21, delivered by {DELIVERED_BY['commit']}" in report
    assert len(entry["outputs"]["preview_drafts"]["images"]) == 3 * 9  # N x F draft frames
    assert "CachedSearch: 3 candidate(s), cache adaptive tau 0.3" in entry["outputs"]["search"]["text"][0]
    stock = comfy_server.run_prompt(stock_wan_ksampler(seed=21, filename_prefix="stock"))
    delivered, reference = saved_frames(comfy_server, entry), saved_frames(comfy_server, stock)
    assert len(delivered) == len(reference) == 9
    assert all((a == b).all() for a, b in zip(delivered, reference))


def test_a_new_ranking_reruns_only_what_depends_on_it(comfy_server):
    first = comfy_server.run_prompt(wan_search(seed=30, scores="3 1 2", filename_prefix="rerank"))
    second = comfy_server.run_prompt(wan_search(seed=30, scores="1 2 3", filename_prefix="rerank"))
    assert "seed 30, delivered" in first["outputs"]["recommit"]["text"][0]
    assert "seed 32, delivered" in second["outputs"]["recommit"]["text"][0]
    cached_nodes = [message[1]["nodes"] for message in second["status"]["messages"]
                    if message[0] == "execution_cached"][0]
    assert "search" in cached_nodes  # the drafts were reused, not regenerated
    assert "recommit" not in cached_nodes


@pytest.mark.parametrize("inputs, message", [
    (dict(denoise=0.0), "denoise: got 0.0"),
    (dict(num_candidates=0), refusal("num_candidates", 0, 1, MAX_CANDIDATES)),
    (dict(num_candidates=65), refusal("num_candidates", 65, 1, MAX_CANDIDATES)),
])
def test_search_validation_errors_come_back_as_json(comfy_server, inputs, message):
    status, body = comfy_server.queue_prompt(wan_search(**inputs))
    assert status == 400
    details = [error.get("details", "") for error in body["node_errors"]["search"]["errors"]]  # "input - refusal"
    assert any(re.search(message, detail.split(" - ", 1)[-1]) for detail in details), details


def test_mismatched_ranking_fails_the_run_with_a_clear_message(comfy_server):
    graph = wan_search(num_candidates=2, scores="1 2 3", filename_prefix="mismatch")
    status, body = comfy_server.queue_prompt(graph)
    assert status == 200
    entry = comfy_server.wait_for(body["prompt_id"])
    assert entry["status"]["status_str"] == "error"
    errors = [message[1] for message in entry["status"]["messages"] if message[0] == "execution_error"]
    assert re.match(refusal("ranking", 3, 2), errors[0]["exception_message"])  # 3 scores for 2 candidates


def test_verifier_ranks_the_drafts_and_recommit_delivers_the_argmax(comfy_server):
    entry = comfy_server.run_prompt(wan_search(seed=50, verifier_prompt="a red ball on the grass",
                                               filename_prefix="verified"))
    lines = entry["outputs"]["ranking"]["text"][0].splitlines()
    scores = [float(line.rsplit(":", 1)[1]) for line in lines]
    winner = next(index for index, line in enumerate(lines) if line.startswith("*"))
    # the starred winner holds the highest score as printed (4 decimals: a near-tie may print equal)
    assert len(scores) == 3 and scores[winner] == max(scores)
    # the panel's rows, each with the frames the verifier scored (and no separate preview grid)
    rows = entry["outputs"]["ranking"]["cachedsearch_ranking"]
    assert len(rows) == 3 and all(row["frames"] for row in rows) and "images" not in entry["outputs"]["ranking"]
    report = entry["outputs"]["recommit"]["text"][0]
    assert f"winner: candidate {winner + 1}, seed {50 + winner}, delivered by recommit" in report
    for line, score in zip(report.splitlines()[2:5], scores):
        assert float(line.split()[-4]) == pytest.approx(score, abs=1e-4)


def test_missing_verifier_checkpoint_is_a_validation_error_naming_the_folder(comfy_server):
    graph = wan_search(verifier_prompt="a cat")
    graph["load_verifier"]["inputs"]["ckpt_name"] = "nowhere.pt"
    del graph["preview_drafts"]  # otherwise ComfyUI still runs that valid output and answers 200
    status, body = comfy_server.queue_prompt(graph)
    assert status == 400
    details = " ".join(error.get("details", "") for error in body["node_errors"]["load_verifier"]["errors"])
    assert says(details, "ckpt_name: 'nowhere.pt'", "models/image_reward", "ImageReward.pt")


def test_batch_queue_with_cancels_runs_each_prompt_as_if_alone_without_memory_growth(comfy_server):
    import psutil

    server_process = psutil.Process(comfy_server.process.pid)
    graphs = [wan_search(seed=100 + 10 * index, scores="0.3 0.9 0.1", steps=16, filename_prefix=f"batch{index}")
              for index in range(10)]
    cancel = {2, 6}
    interrupted, memory = set(), []

    def on_progress(index, node, value, maximum):
        if index in cancel and node == "search" and value >= 2 and index not in interrupted:
            interrupted.add(index)  # Cancel pressed on this prompt during its first draft
            return True
        return False

    entries = comfy_server.run_batch(graphs, on_progress)
    memory.append(server_process.memory_info().rss)
    assert interrupted == cancel
    for index, entry in enumerate(entries):
        kinds = [message[0] for message in entry["status"]["messages"]]
        if index in cancel:
            assert "execution_interrupted" in kinds and "recommit" not in entry["outputs"]
        else:
            assert entry["status"]["status_str"] == "success"
            assert "winner: candidate 2, seed" in entry["outputs"]["recommit"]["text"][0]
    # every prompt, cancelled ones included, gives the same frames when run alone afterwards
    for index in (0, 2, 5, 6, 9):
        alone = comfy_server.run_prompt(dict(graphs[index], save=dict(graphs[index]["save"], inputs=dict(
            graphs[index]["save"]["inputs"], filename_prefix=f"alone{index}"))))
        memory.append(server_process.memory_info().rss)
        if index not in cancel:
            assert all((a == b).all() for a, b in zip(saved_frames(comfy_server, entries[index]),
                                                      saved_frames(comfy_server, alone)))
        assert len(saved_frames(comfy_server, alone)) == 9
    growth_mib = (memory[-1] - memory[0]) / 2**20
    assert growth_mib < 64, f"server memory grew {growth_mib:.1f} MiB over 5 more prompts"


def test_searches_queued_around_a_cancelled_one_leave_comfyuis_progress_bar_to_the_next_ksampler(comfy_server):
    steps, candidates = 6, 2
    graphs = [wan_search(seed=500 + 10 * index, steps=steps, num_candidates=candidates, scores="0.2 0.1",
                         filename_prefix=f"progress{index}") for index in range(3)]
    graphs.append(stock_wan_ksampler(seed=7, steps=steps, filename_prefix="progress_stock"))
    seen = {index: [] for index in range(len(graphs))}

    def on_progress(index, node, value, maximum):
        seen[index].append((node, value, maximum))
        return index == 1 and node == "search" and value >= steps + 2  # Cancel inside the second draft

    entries = comfy_server.run_batch(graphs, on_progress)
    kinds = [[message[0] for message in entry["status"]["messages"]] for entry in entries]
    assert ["execution_interrupted" in entry_kinds for entry_kinds in kinds] == [False, True, False, False]
    assert [entries[index]["status"]["status_str"] for index in (0, 2, 3)] == ["success"] * 3
    for index in (0, 2):  # one bar over the whole search, filled
        search_bar = [(value, maximum) for node, value, maximum in seen[index] if node == "search"]
        assert {maximum for _, maximum in search_bar} == {candidates * steps}
        assert search_bar[-1] == (candidates * steps, candidates * steps)
    # After them ComfyUI's own hook reports the stock KSampler's own steps on its own bar.
    assert {(node, maximum) for node, _, maximum in seen[3]} == {("sampler", steps)}
    assert max(value for _, value, _ in seen[3]) == steps


def search_outcome(server, entry) -> dict:
    """What a verified search delivered, without timings: frames, drafts (seeds, skipped calls), scores."""
    drafts = [{key: row[key] for key in ("seed", "skipped", "calls")}
              for row in entry["outputs"]["search"]["cachedsearch_drafts"]]
    return {"frames": [frame.tobytes() for frame in saved_frames(server, entry)], "drafts": drafts,
            "scores": entry["outputs"]["ranking"]["text"][0]}


@pytest.mark.parametrize("stage", ["search", "ranking", "recommit"])  # a draft, the verifier's scoring, the commit
def test_cancel_inside_a_stage_leaves_the_next_queued_search_equal_to_a_clean_run(comfy_server, stage):
    prompt = "a red ball on the grass"
    cancelled = wan_search(seed=300, verifier_prompt=prompt, filename_prefix=f"cancelled_{stage}")
    following = wan_search(seed=400, verifier_prompt=prompt, filename_prefix=f"after_cancel_{stage}")
    pressed = []

    def press_cancel(index, node):
        if index == 0 and node == stage and not pressed:
            pressed.append(node)  # Cancel pressed as the stage starts: POST /interrupt with this prompt's id
            return True
        return False

    comfy_server.reset_caches()
    interrupted, after = comfy_server.run_batch([cancelled, following], on_executing=press_cancel)
    assert pressed == [stage]
    (stop,) = [message[1] for message in interrupted["status"]["messages"] if message[0] == "execution_interrupted"]
    assert stop["node_id"] == stage  # the run stopped inside that stage, not before or after it
    assert "recommit" not in interrupted["outputs"]
    assert after["status"]["status_str"] == "success"

    comfy_server.reset_caches()
    clean = comfy_server.run_prompt(dict(following, save=dict(following["save"], inputs=dict(
        following["save"]["inputs"], filename_prefix=f"clean_{stage}"))))
    cached = [message[1]["nodes"] for message in clean["status"]["messages"] if message[0] == "execution_cached"]
    assert "search" not in sum(cached, [])  # recomputed from scratch, not served from ComfyUI's cache
    assert search_outcome(comfy_server, after) == search_outcome(comfy_server, clean)
