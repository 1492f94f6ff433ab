"""ComfyUI-Distributed for tests, benchmarks and the workflow builder: unpack it, configure a master.

ComfyUI-Distributed is not on the registries reachable here; a checked copy of
version 1.4.4 is found and unpacked by ``scripts/node_packs.py``.
"""

from __future__ import annotations

import json
import pathlib

from scripts import comfy_runtime, node_packs
from scripts.graphs import wan_search

PACK = node_packs.DISTRIBUTED


def write_master_config(package: pathlib.Path, workers: dict[str, int], worker_timeout: int = 60) -> None:
    """ComfyUI-Distributed's gpu_config.json for a master whose workers listen on 127.0.0.1 at ``workers[id]``."""
    config = {
        "master": {"host": "127.0.0.1"},
        "workers": [{"id": worker_id, "name": f"worker {worker_id}", "host": "127.0.0.1", "port": port,
                     "type": "local", "enabled": True} for worker_id, port in workers.items()],
        "settings": {"debug": True, "auto_launch_workers": False, "master_delegate_only": False,
                     "worker_timeout_seconds": worker_timeout},
    }
    (package / "gpu_config.json").write_text(json.dumps(config, indent=2))


def distributed_server(base: pathlib.Path, archive: pathlib.Path,
                       workers: dict[str, int] | None = None) -> comfy_runtime.ComfyServer:
    """A ComfyServer with ComfyUI-Distributed installed: a master when ``workers`` is given, else a worker."""
    server = comfy_runtime.ComfyServer(base, env=None if workers is not None else {"COMFYUI_IS_WORKER": "1"})
    package = PACK.install(server.base_dir / "custom_nodes", archive)
    if workers is not None:
        write_master_config(package, workers)
    return server


def distributed_wan_search(*, worker_timeout: float = 60.0, **search) -> dict:
    """``scripts.graphs.wan_search`` with the Distributed Sampler feeding a Distributed Collector, latents saved."""
    graph = save_latents(wan_search(**search))
    graph["search"]["class_type"] = "CachedSearchDistributedSampler"
    graph["search"]["inputs"]["worker_timeout"] = worker_timeout
    graph["collector"] = {"class_type": "DistributedCollector",
                          "inputs": {"images": ["search", 3], "load_balance": False}}
    return graph


def save_latents(graph: dict) -> dict:
    """Adds SaveLatent for the drafts ("save_drafts") and the delivered latent ("save_delivered")."""
    prefix = graph["save"]["inputs"]["filename_prefix"]
    graph["save_drafts"] = {"class_type": "SaveLatent",
                            "inputs": {"samples": ["search", 0], "filename_prefix": f"{prefix}_drafts"}}
    graph["save_delivered"] = {"class_type": "SaveLatent",
                               "inputs": {"samples": ["recommit", 0], "filename_prefix": f"{prefix}_delivered"}}
    return graph


def saved_latent(server: comfy_runtime.ComfyServer, entry: dict, node: str):
    from safetensors.torch import load_file

    (saved,) = entry["outputs"][node]["latents"]
    return load_file(server.base_dir / "output" / saved["subfolder"] / saved["filename"])["latent_tensor"]


def queue_distributed(master: comfy_runtime.ComfyServer, graph: dict, worker_ids: list[str]) -> str:
    """POST /distributed/queue as ComfyUI-Distributed's panel does; returns the master's prompt id."""
    status, body = master.request("POST", "/distributed/queue", {
        "prompt": graph, "client_id": master.client_id, "enabled_worker_ids": worker_ids, "delegate_master": False})
    if status != 200:
        raise comfy_runtime.ServerError(f"/distributed/queue -> {status}: {body}\n{master.log_tail()}")
    return body["prompt_id"]
