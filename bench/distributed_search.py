"""Distributed search on ComfyUI-Distributed: master + 1 worker vs master alone (tiny Wan 2.1, CPU).

    .venv/bin/python -m bench.distributed_search [--repeats 2] [--size 256] [--steps 20]

Two real ComfyUI servers on loopback (worker and master, each with ComfyUI-Distributed
1.4.4 from ../shared/runtimes/). The graph is the drafting part only (Apply Cache ->
Distributed Sampler N = 4 -> SaveLatent), so the wall time is drafting plus gathering.
Arms alternate, each run with new seeds (nothing cached): "alone" is a plain Queue on the
master, "master + 1 worker" goes through POST /distributed/queue. Prints the median wall
times, the bytes one draft moves, the loopback transfer time of one draft, and the
scaling model's inputs. With --cuda the servers run on the GPU (both on the same device).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time
import urllib.request

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, distributed_runtime, graphs, tiny_models  # noqa: E402
from scripts.comfy_runtime import ServerError  # noqa: E402


def drafting_graph(seed: int, num_candidates: int, steps: int, size: int) -> dict:
    graph = graphs.cached_wan_sampling(seed=seed, steps=steps, tau=0.3, warmup_steps=2, cooldown_steps=2,
                                       width=size, height=size)
    for key in ("sampler", "decode", "save", "vae"):
        del graph[key]
    graph["search"] = {"class_type": "CachedSearchDistributedSampler", "inputs": {
        "model": ["cache", 0], "positive": ["positive", 0], "negative": ["negative", 0],
        "latent_image": ["latent", 0], "seed": seed, "num_candidates": num_candidates, "steps": steps, "cfg": 5.0,
        "sampler_name": "euler", "scheduler": "simple", "denoise": 1.0, "worker_timeout": 120.0}}
    graph["collector"] = {"class_type": "DistributedCollector", "inputs": {"images": ["search", 3],
                                                                           "load_balance": False}}
    graph["save_drafts"] = {"class_type": "SaveLatent", "inputs": {"samples": ["search", 0],
                                                                   "filename_prefix": "bench_drafts"}}
    return graph


def wall_seconds(entry: dict) -> float:
    stamps = {message[0]: message[1]["timestamp"] for message in entry["status"]["messages"]}
    return (stamps["execution_success"] - stamps["execution_start"]) / 1000.0


def run(master, graph, workers: list[str] | None) -> dict:
    if workers is None:
        return master.run_prompt(graph, timeout=1800)
    entry = master.wait_for(distributed_runtime.queue_distributed(master, graph, workers), 1800)
    if entry["status"].get("status_str") != "success":
        raise ServerError(f"distributed run failed: {entry['status']}\n{master.log_tail()}")
    return entry


def post_seconds(master, blob: bytes) -> float:
    """Loopback time of one draft's POST (to a job no master opens; the inbox forgets it)."""
    request = urllib.request.Request(f"{master.url}/cachedsearch/distributed/draft", data=blob, method="POST",
                                     headers={"Content-Type": "application/octet-stream"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        json.loads(response.read())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--size", type=int, default=256, help="video width = height in pixels")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--num-candidates", type=int, default=4)
    parser.add_argument("--cuda", action="store_true", help="run both servers on the GPU")
    args = parser.parse_args()
    archive = distributed_runtime.PACK.find_archive()
    if archive is None:
        sys.exit(distributed_runtime.PACK.absent_reason())
    import torch

    from cachedsearch_core import Draft
    from cachedsearch_core.draft_exchange import DraftMessage, encode_draft

    root = comfy_runtime.scratch_directory("cachedsearch_distributed_bench_")
    models = root / "models"
    tiny_models.generate_tiny_models(models)
    bases = {}
    for name in ("worker", "master"):
        base = comfy_runtime.prepare_base_directory(root / name)
        for entry in models.glob("*/*"):
            (base / "models" / entry.parent.name).mkdir(exist_ok=True)
            (base / "models" / entry.parent.name / entry.name).symlink_to(entry)
        bases[name] = base
    worker = distributed_runtime.distributed_server(bases["worker"], archive)
    master = distributed_runtime.distributed_server(bases["master"], archive, workers={"1": worker.port})
    if args.cuda:
        worker.extra_args = master.extra_args = [argument for argument in master.extra_args if argument != "--cpu"]
    n = args.num_candidates
    with worker, master:
        run(master, drafting_graph(1, n, args.steps, args.size), ["1"])  # loads the model on both servers
        times = {"alone": [], "master + 1 worker": []}
        draft_seconds = []
        seed = 1000
        for _ in range(args.repeats):
            for arm, workers in (("alone", None), ("master + 1 worker", ["1"])):
                seed += 100
                entry = run(master, drafting_graph(seed, n, args.steps, args.size), workers)
                times[arm].append(wall_seconds(entry))
                if workers is None:
                    report = entry["outputs"]["search"]["text"][0]
                    draft_seconds += [float(line.split()[-1]) for line in report.splitlines()[2 : 2 + n]]
        drafts = distributed_runtime.saved_latent(master, entry, "save_drafts")
        _, claim = master.request("POST", "/cachedsearch/distributed/claim",
                                  {"job_id": "bench_unopened", "participant": "1", "seeds": list(range(5))})
        blobs = [encode_draft(DraftMessage("bench_unopened", "1", Draft(seed, 0.0, 0, 0), drafts[0:1].clone(),
                                           claim["token"])) for seed in range(5)]
        transfer = statistics.median(post_seconds(master, blob) for blob in blobs)
        blob = blobs[0]
    device = "CUDA (both servers on one GPU)" if args.cuda else f"CPU, {torch.get_num_threads()} torch threads here"
    print(f"# tiny Wan 2.1, {args.size}x{args.size}x9 video (latent {list(drafts.shape[1:])}), {args.steps} steps, "
          f"N = {n}, tau 0.3, {args.repeats} interleaved repeats, {device}")
    print("| arm | wall s (median) | runs |")
    print("|---|---|---|")
    for arm, values in times.items():
        print(f"| {arm} | {statistics.median(values):.2f} | {', '.join(f'{v:.2f}' for v in values)} |")
    alone, pair = (statistics.median(values) for values in times.values())
    print(f"\nspeed-up with 1 worker: {alone / pair:.2f}x (ideal for N = {n} on W = 2: "
          f"{n / -(-n // 2):.2f}x)")
    print(f"bytes per draft: {len(blob)} (latent {drafts[0:1].numel() * drafts.element_size()} + header "
          f"{len(blob) - drafts[0:1].numel() * drafts.element_size()}); one POST on loopback {1000 * transfer:.1f} ms")
    print(f"per-draft seconds alone (C_c): median {statistics.median(draft_seconds):.2f}")


if __name__ == "__main__":
    main()
