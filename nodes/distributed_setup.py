"""What ComfyUI-Distributed's orchestration tells each participant of a distributed search (``distributed_search``):
its orchestrator fills the hidden inputs of its Distributed Collector (job id, master URL, this participant's worker
id, the active workers), and an on-prompt handler copies them onto the CachedSearch Distributed Sampler that feeds
the collector, so each participant knows its seed slice (cachedsearch_core/seed_slices.py)."""

from __future__ import annotations

import dataclasses
import json

NODE_ID = "CachedSearchDistributedSampler"
COLLECTOR_CLASS = "DistributedCollector"
SETUP_INPUT = "cachedsearch_distributed"  # added to the sampler's prompt entry by the on-prompt handler
MASTER = "master"


def participant_label(participant: str) -> str:
    return MASTER if participant == MASTER else f"worker {participant}"


@dataclasses.dataclass(frozen=True)
class DistributedSetup:
    """What ComfyUI-Distributed's orchestrator told this participant about the run."""

    job_id: str
    is_worker: bool
    master_url: str
    worker_id: str
    worker_ids: tuple[str, ...]

    @property
    def participant(self) -> str:
        return self.worker_id if self.is_worker else MASTER

    @property
    def participants(self) -> tuple[str, ...]:
        return (MASTER, *self.worker_ids)

    @classmethod
    def from_collector(cls, collector_inputs: dict) -> DistributedSetup | None:
        """None when the collector was not filled in by the orchestrator (a plain Queue without workers)."""
        job_id = str(collector_inputs.get("multi_job_id") or "")
        if not job_id:
            return None
        worker_ids = collector_inputs.get("enabled_worker_ids") or "[]"
        if isinstance(worker_ids, str):
            worker_ids = json.loads(worker_ids)
        return cls(job_id=job_id, is_worker=bool(collector_inputs.get("is_worker")),
                   master_url=str(collector_inputs.get("master_url") or "").rstrip("/"),
                   worker_id=str(collector_inputs.get("worker_id") or ""),
                   worker_ids=tuple(dict.fromkeys(str(worker) for worker in worker_ids)))


def attach_distributed_setup(json_data: dict) -> dict:
    """On-prompt handler: copy each Distributed Collector's orchestration inputs onto the sampler feeding it.

    Being an input of the sampler's prompt entry, the setup is also part of ComfyUI's cache key, so every
    distributed run drafts afresh on every participant (a worker never answers from its cache).
    """
    prompt = json_data.get("prompt") if isinstance(json_data, dict) else None
    if not isinstance(prompt, dict):
        return json_data
    for node in prompt.values():
        if not isinstance(node, dict) or node.get("class_type") != COLLECTOR_CLASS:
            continue
        inputs = node.get("inputs") or {}
        source = inputs.get("images")
        if not (isinstance(source, list) and len(source) == 2):
            continue
        sampler = prompt.get(str(source[0]))
        if not isinstance(sampler, dict) or sampler.get("class_type") != NODE_ID:
            continue
        setup = DistributedSetup.from_collector(inputs)
        if setup is not None:
            sampler.setdefault("inputs", {})[SETUP_INPUT] = json.dumps(dataclasses.asdict(setup))
    return json_data


def setup_from_prompt(prompt, unique_id) -> DistributedSetup | None:
    entry = (prompt or {}).get(str(unique_id)) or {}
    raw = (entry.get("inputs") or {}).get(SETUP_INPUT)
    if not raw:
        return None
    fields = json.loads(raw)
    fields["worker_ids"] = tuple(fields["worker_ids"])
    return DistributedSetup(**fields)
