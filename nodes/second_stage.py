"""The second stage of a two-stage pipeline (LTX-2.3's official templates: the first stage's latent upsampled x2 and
refined by a stock SamplerCustomAdvanced; HunyuanVideo 1.5's 1080p super-resolution): the stock samplers after the
Recommit that work on its delivered latent only, and the transformer calls they make, read from the API prompt.

Why planned from the graph, not counted as it runs: ComfyUI runs the Recommit before the nodes its latent feeds, so
its report and panel are written before the refine pass starts. The refine's calls are fixed by its graph, though:
one per sigma step of a sampler that evaluates the model once a step (cond and uncond batched in one call, as the
search's own calls are counted; a step cache on that model would compute fewer of them). Where a later sampler's steps or its kind are not
plain widgets (a schedule other than Manual Sigmas, Basic Scheduler or Split Sigmas of them, a sampler that
evaluates twice a step), nothing is planned and the report says nothing of a second stage.
"""

from __future__ import annotations

import nodes as comfy_nodes

# k-diffusion samplers that evaluate the model once per step of the schedule.
ONE_CALL_A_STEP = frozenset({"euler", "euler_ancestral", "dpmpp_2m", "dpmpp_2m_sde", "lcm", "ddpm", "lms", "ipndm"})
# The stock sampler nodes; those not planned below (KSamplerAdvanced, SamplerCustom) leave the second stage unplanned.
SAMPLERS = ("SamplerCustomAdvanced", "KSampler", "KSamplerAdvanced", "SamplerCustom")


def _feeds(prompt: dict) -> dict[str, set[str]]:
    """node id -> the ids of the nodes one of its outputs is linked into."""
    feeds: dict[str, set[str]] = {}
    for key, node in prompt.items():
        for value in node.get("inputs", {}).values():
            if isinstance(value, list) and len(value) == 2 and str(value[0]) in prompt:
                feeds.setdefault(str(value[0]), set()).add(str(key))
    return feeds


def downstream(prompt: dict, node_id: str, output: int) -> set[str]:
    """Every node that a link path leads to from output ``output`` of ``node_id``."""
    feeds, found = _feeds(prompt), set()
    frontier = [str(key) for key, node in prompt.items()
                if any(isinstance(value, list) and value[:1] == [node_id] and value[1:] == [output]
                       for value in node.get("inputs", {}).values())]
    found.update(frontier)
    while frontier:
        for later in feeds.get(frontier.pop(), ()):
            if later not in found:
                found.add(later)
                frontier.append(later)
    return found


def _linked(prompt: dict, value) -> dict | None:
    return prompt.get(str(value[0])) if isinstance(value, list) and len(value) == 2 else None


def _schedule_length(prompt: dict, sigmas) -> int | None:
    """How many sigmas the schedule linked at ``sigmas`` holds, where its widgets say: Manual Sigmas (parsed by
    ComfyUI's own node), Basic Scheduler (steps + 1 at any denoise above 0) and either half of Split Sigmas."""
    node = _linked(prompt, sigmas)
    inputs = node.get("inputs", {}) if node else {}
    kind = node.get("class_type") if node else None
    if kind == "ManualSigmas" and isinstance(inputs.get("sigmas"), str):
        return len(comfy_nodes.NODE_CLASS_MAPPINGS["ManualSigmas"].execute(sigmas=inputs["sigmas"]).result[0])
    if kind == "BasicScheduler" and isinstance(inputs.get("steps"), int):
        return inputs["steps"] + 1 if inputs.get("denoise", 1.0) > 0 else 0
    if kind == "SplitSigmas" and isinstance(inputs.get("step"), int):
        whole = _schedule_length(prompt, inputs.get("sigmas"))
        if whole is None:
            return None
        return min(inputs["step"] + 1, whole) if sigmas[1] == 0 else max(whole - inputs["step"], 0)
    return None


def _planned_calls(prompt: dict, node: dict) -> int | None:
    """A stock sampler's transformer calls as its widgets plan them, or None where they do not."""
    inputs = node.get("inputs", {})
    if node.get("class_type") == "SamplerCustomAdvanced":
        select = _linked(prompt, inputs.get("sampler"))
        name = select["inputs"].get("sampler_name") if select and select.get("class_type") == "KSamplerSelect" else None
        length = _schedule_length(prompt, inputs.get("sigmas"))
        steps = None if length is None else max(length - 1, 0)
    elif node.get("class_type") == "KSampler":
        name, steps = inputs.get("sampler_name"), inputs.get("steps")
    else:
        return None
    return steps if name in ONE_CALL_A_STEP and isinstance(steps, int) else None


def second_stage_calls(prompt: dict | None, recommit_id) -> int | None:
    """The calls of the stock samplers the Recommit's delivered latent feeds in ``prompt``, each planned by its
    widgets; None when none does, or when one of them cannot be planned."""
    if not prompt or recommit_id is None or str(recommit_id) not in prompt:
        return None
    # Only what its latent feeds: a stock sampler given the delivered seed is a pipeline of its own.
    samplers = [prompt[key] for key in downstream(prompt, str(recommit_id), 0)
                if prompt[key].get("class_type") in SAMPLERS]
    planned = [_planned_calls(prompt, node) for node in samplers]
    return sum(planned) if planned and None not in planned else None
