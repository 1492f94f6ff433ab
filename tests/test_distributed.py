"""Distributed search on ComfyUI-Distributed 1.4.4: a master and one worker, two real ComfyUI servers on loopback.

Each server gets its own unpacked copy of ComfyUI-Distributed (from ../shared/runtimes/) and the tiny models;
searches are queued through ComfyUI-Distributed's own ``POST /distributed/queue`` and compared with the
single-machine CachedSearch Sampler on the master: drafts, ranking and delivered latent, bit for bit.
"""

import copy
import json
import pathlib
import time

import pytest
import torch

from report_text import line_of, numbers
from scripts import distributed_runtime
from scripts.comfy_runtime import ServerError, _free_port
from scripts.graphs import tiny_workflow_variant, wan_search
from scripts.workflow_format import declared_inputs, gui_to_api

ARCHIVE = distributed_runtime.PACK.find_archive()
pytestmark = pytest.mark.skipif(
    ARCHIVE is None, reason=distributed_runtime.PACK.absent_reason())

WAIT_SECONDS = 300
STARTUP_SECONDS = 600  # a loaded 2-core machine can take minutes to boot ComfyUI 0.33
VERIFIER_PROMPT = "a red fox in the snow"
UNREACHABLE = "9"
NODE_CLASS = "CachedSearchDistributedSampler"


@pytest.fixture(scope="module")
def cluster(base_with_models):
    """Master (worker "1" enabled, worker "9" configured on a port nobody listens on) and worker "1"."""
    worker = distributed_runtime.distributed_server(base_with_models("worker"), ARCHIVE)
    master = distributed_runtime.distributed_server(base_with_models("master"), ARCHIVE,
                                                    workers={"1": worker.port, UNREACHABLE: _free_port()})
    try:
        worker.start(timeout=STARTUP_SECONDS)
        master.start(timeout=STARTUP_SECONDS)
        yield master, worker
    finally:
        master.stop()
        worker.stop()


def search_graphs(seed, num_candidates, steps, worker_timeout=60.0, verifier=True):
    """The single-machine search and its distributed twin; ranked by the tiny ImageReward, or by fixed scores."""
    scores = " ".join(str((7 * index) % 5) for index in range(num_candidates))
    search = dict(seed=seed, num_candidates=num_candidates, steps=steps, filename_prefix=f"dist_{seed}",
                  **({"verifier_prompt": VERIFIER_PROMPT} if verifier else {"scores": scores}))
    single = distributed_runtime.save_latents(wan_search(**search))
    return single, distributed_runtime.distributed_wan_search(worker_timeout=worker_timeout, **search)


def outcome(server, entry):
    """What must match between searches: drafts, ranking rows (exact scores) and the delivered latent."""
    ranked = entry["outputs"].get("ranking", {}).get("cachedsearch_ranking")
    rows = [{key: row[key] for key in ("candidate", "seed", "score", "winner", "skipped", "calls")}
            for row in ranked] if ranked else entry["outputs"]["recommit"]["text"][0].split("winner: ")[1].splitlines()[0]
    return {"drafts": distributed_runtime.saved_latent(server, entry, "save_drafts"), "ranking": rows,
            "delivered": distributed_runtime.saved_latent(server, entry, "save_delivered")}


def assert_same_search(distributed, single):
    assert distributed["ranking"] == single["ranking"]
    assert torch.equal(distributed["drafts"], single["drafts"])
    assert torch.equal(distributed["delivered"], single["delivered"])


def run_distributed(master, graph, worker_ids):
    prompt_id = distributed_runtime.queue_distributed(master, graph, worker_ids)
    entry = master.wait_for(prompt_id, WAIT_SECONDS)
    if entry["status"].get("status_str") != "success":
        raise ServerError(f"distributed search failed: {entry['status']}\n{master.log_tail()}")
    return entry


def saved_draft_seeds(server) -> list[int]:
    """The seeds of the drafts saved on ``server``, in the order they were saved."""
    index = server.base_dir / "user" / "cachedsearch" / "saved" / "index.jsonl"
    records = [json.loads(line) for line in index.read_text().splitlines()[1:]] if index.exists() else []
    return [record["seed"] for record in records if record["kind"] == "draft"]


def search_report(entry):
    return entry["outputs"]["search"]["text"][0]


def test_distributed_search_equals_single_machine_search(cluster):
    master, worker = cluster
    single, distributed = search_graphs(seed=100, num_candidates=4, steps=8)
    reference = master.run_prompt(single, timeout=WAIT_SECONDS)
    saved_before = saved_draft_seeds(master)
    assert {100, 101, 102, 103} <= set(saved_before)  # the single-machine search saved its drafts
    entry = run_distributed(master, distributed, ["1"])
    report = search_report(entry)
    # the master drafted 100 and 101, worker 1 drafted 102 and 103
    assert numbers(line_of(report, "drafted by")) == [100, 101, 1, 102, 103], report
    assert "re-drafted" not in report
    # the master's slice comes from the single-machine search's saved drafts (its orchestration entry, which
    # changes every run, is not part of a draft's key); the worker, on its own disk, drafts its slice
    assert "2 of 4 drafts reused from an earlier run" in report, report
    # the master saved what the worker sent, beside its own drafts
    saved = saved_draft_seeds(master)
    assert saved[:len(saved_before)] == saved_before and {102, 103} <= set(saved[len(saved_before):])
    assert_same_search(outcome(master, entry), outcome(master, reference))
    assert numbers(line_of(entry["outputs"]["recommit"]["text"][0], "drafted by")) == [100, 101, 1, 102, 103]
    history = worker.get("/history")
    worker_runs = [item for item in history.values() if "search" in item["prompt"][2]]
    assert worker_runs and worker_runs[-1]["status"]["status_str"] == "success"
    assert "worker 1 of 2 participants" in worker_runs[-1]["outputs"]["search"]["text"][0]


def test_unreachable_worker_is_left_out_and_the_result_is_the_same(cluster):
    master, _ = cluster
    single, distributed = search_graphs(seed=200, num_candidates=3, steps=8, verifier=False)
    reference = master.run_prompt(single, timeout=WAIT_SECONDS)
    entry = run_distributed(master, distributed, ["1", UNREACHABLE])
    report = search_report(entry)
    assert "drafted by: master 200, 201; worker 1 202" in report, report
    assert f"worker {UNREACHABLE}" not in report
    assert_same_search(outcome(master, entry), outcome(master, reference))

    alone = run_distributed(master, copy.deepcopy(distributed), [UNREACHABLE])  # every worker unreachable
    assert "drafted by: master 200, 201, 202" in search_report(alone)
    assert_same_search(outcome(master, alone), outcome(master, reference))


def test_queued_without_orchestration_the_node_searches_alone(cluster):
    master, _ = cluster
    single, distributed = search_graphs(seed=300, num_candidates=2, steps=6, verifier=False)
    entry = master.run_prompt(distributed, timeout=WAIT_SECONDS)  # plain POST /prompt: no workers
    assert line_of(search_report(entry), "no workers")  # the note that it searched alone
    assert_same_search(outcome(master, entry), outcome(master, master.run_prompt(single, timeout=WAIT_SECONDS)))


WORKFLOW = "03 Wan 2.1 on several GPUs"


def load_workflow():
    folder = pathlib.Path(__file__).resolve().parents[1] / "workflows"
    return (json.loads((folder / f"{WORKFLOW}.json").read_text()),
            json.loads((folder / "api" / f"{WORKFLOW}.json").read_text()))


def test_shipped_distributed_workflow_gui_file_matches_its_api_twin(cluster):
    master, _ = cluster
    gui, api = load_workflow()
    object_info = master.get("/object_info")
    # built on the newest runtime: an older one's frontend leaves out the inputs its nodes do not declare
    assert gui_to_api(gui, object_info) == declared_inputs(api, object_info)
    note = [node for node in gui["nodes"] if node["type"] == "MarkdownNote"][0]["widgets_values"][0]
    assert "ComfyUI-Distributed" in note and "enabled" in note
    (sampler,) = [key for key, node in api.items() if node["class_type"] == NODE_CLASS]
    (collector,) = [node for node in api.values() if node["class_type"] == "DistributedCollector"]
    assert collector["inputs"]["images"] == [sampler, 3]  # the sampler's to_collector output


def test_shipped_distributed_workflow_runs_on_master_and_worker(cluster):
    master, _ = cluster
    _, api = load_workflow()
    graph = tiny_workflow_variant(api, pooled=False)
    (search_key,) = [key for key, node in graph.items() if node["class_type"] == NODE_CLASS]
    graph[search_key]["inputs"].update(num_candidates=3, steps=8)
    entry = run_distributed(master, graph, ["1"])
    report = entry["outputs"][search_key]["text"][0]
    assert report.startswith("CachedSearch: 3 candidate(s)") and "; worker 1 " in report, report


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def interrupted(entry):
    return any(message[0] == "execution_interrupted" for message in entry["status"]["messages"])


def test_cancel_on_the_master_stops_the_workers_drafts(cluster):
    master, worker = cluster
    _, distributed = search_graphs(seed=500, num_candidates=4, steps=40, verifier=False)
    worker_runs_before = len(worker.get("/history"))
    prompt_id = distributed_runtime.queue_distributed(master, distributed, ["1"])

    def open_job_with_worker_heartbeat():
        jobs = master.get("/cachedsearch/distributed/jobs")["open"]
        return next((job_id for job_id, job in jobs.items() if job["opened"] and "1" in job["silent_seconds"]),
                    None)

    job_id = wait_until(open_job_with_worker_heartbeat, WAIT_SECONDS, "the worker's first heartbeat")
    master.interrupt(prompt_id)
    assert interrupted(master.wait_for(prompt_id, WAIT_SECONDS))
    assert master.get("/cachedsearch/distributed/jobs")["closed"][job_id] == "cancelled"
    finished = wait_until(lambda: len(worker.get("/history")) > worker_runs_before and worker.get("/history"),
                          60, "the worker's run to stop")
    worker_entry = list(finished.values())[-1]
    assert interrupted(worker_entry), worker_entry["status"]


def test_worker_killed_mid_search_has_its_missing_seeds_redrafted_by_the_master(cluster):
    """Runs last in this module: it kills the worker."""
    master, worker = cluster
    single, distributed = search_graphs(seed=400, num_candidates=4, steps=16, worker_timeout=4.0)
    reference = master.run_prompt(single, timeout=WAIT_SECONDS)
    prompt_id = distributed_runtime.queue_distributed(master, distributed, ["1"])

    def worker_delivered_one():
        jobs = master.get("/cachedsearch/distributed/jobs")["open"]
        return any(job["received"].get("1") for job in jobs.values())

    wait_until(worker_delivered_one, WAIT_SECONDS, "the worker's first draft")
    worker.process.kill()
    worker.process.wait(timeout=30)
    entry = master.wait_for(prompt_id, WAIT_SECONDS)
    assert entry["status"]["status_str"] == "success", master.log_tail()
    report = search_report(entry)
    assert "worker 1 was silent for" in report, report
    redrafted = numbers(line_of(report, "re-drafted").split(" (")[0])  # the seeds, before whose they were
    assert redrafted and set(redrafted) <= {402, 403}
    assert_same_search(outcome(master, entry), outcome(master, reference))
