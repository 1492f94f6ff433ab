"""A calibration's setup as the API prompt's graph says it, and the calibrations remembered by it: the model file
at the root of a model input, the sampler a model feeds, and the graph that builds an input. Calibrate remembers
its result under that setup; Apply Cache finds it by walking the same graph."""

from __future__ import annotations

import os

import folder_paths

from ..cachedsearch_core.calibration_experts import HIGH_NOISE, LOW_NOISE
from ..cachedsearch_core.calibration_memory import (
    CalibrationMemory,
    describe_remembered,
    experts_setup_key,
    setup_key,
)

MEMORY_FILE = os.path.join("cachedsearch", "calibrations.json")
# Inputs of a KSampler-style node that make a calibration's setup.
_SETUP_INPUTS = ("steps", "sampler_name", "scheduler")
_MODEL_FILE_SUFFIXES = (".safetensors", ".gguf", ".ckpt", ".pt", ".pth", ".sft", ".bin")


def calibration_memory() -> CalibrationMemory:
    """Remembered calibrations, in ComfyUI's user directory."""
    return CalibrationMemory(os.path.join(folder_paths.get_user_directory(), MEMORY_FILE))


def root_model_file(prompt: dict, node_id: str, input_name: str = "model") -> str | None:
    """The file of the loader at the root of ``node_id``'s model input in the API prompt (through LoRA loaders,
    ModelSamplingSD3 and other MODEL -> MODEL nodes), or None."""
    seen = set()
    while prompt and node_id in prompt and node_id not in seen:
        seen.add(node_id)
        link = prompt[node_id]["inputs"].get(input_name)
        if not (isinstance(link, list) and len(link) == 2):
            return None
        node_id, input_name = str(link[0]), "model"
        inputs = prompt.get(node_id, {}).get("inputs", {})
        if not isinstance(inputs.get("model"), list):
            return next((value for value in inputs.values()
                         if isinstance(value, str) and value.lower().endswith(_MODEL_FILE_SUFFIXES)), None)
    return None


# A two-expert sampler's model inputs and the expert each one is.
EXPERT_INPUTS = {"model_high": HIGH_NOISE, "model_low": LOW_NOISE}


def _plain(values) -> bool:
    return all(value is not None and not isinstance(value, list) for value in values)


def _downstream_sampler(prompt: dict, node_id: str) -> tuple[str, str] | None:
    """(node id, model input) of the first KSampler-style node (or two-expert sampler) that samples with
    ``node_id``'s model output, directly or through MODEL -> MODEL nodes; None when no such node has its steps,
    sampler and scheduler as plain values."""
    frontier, seen = [node_id], set()
    while frontier:
        current = frontier.pop(0)
        seen.add(current)
        for other_id, node in (prompt or {}).items():
            inputs = node.get("inputs", {})
            for name in ("model", *EXPERT_INPUTS):
                link = inputs.get(name)
                if not (isinstance(link, list) and str(link[0]) == current) or other_id in seen:
                    continue
                if _plain(inputs.get(setup) for setup in _SETUP_INPUTS):
                    return str(other_id), name
                if name == "model":
                    frontier.append(str(other_id))
    return None


def sampled_steps(prompt: dict | None, node_id: str | None) -> int | None:
    """The steps the sampler downstream of ``node_id``'s model runs with it (on an expert of a two-expert sampler,
    that expert's share of the split); None when the graph does not say them as plain values."""
    found = _downstream_sampler(prompt, str(node_id)) if prompt and node_id is not None else None
    if found is None:
        return None
    sampler_id, model_input = found
    inputs = prompt[sampler_id]["inputs"]
    if model_input not in EXPERT_INPUTS:
        return inputs["steps"]
    split = inputs.get("split_step")
    if not _plain([split]):
        return None
    return split if EXPERT_INPUTS[model_input] == HIGH_NOISE else inputs["steps"] - split


def remembered_calibration(prompt: dict | None, node_id: str | None, tau: float | None = None) -> str | None:
    """Apply Cache's line for a calibration remembered for its setup (its model file, and the steps, sampler and
    scheduler of the sampler it feeds; on an expert of a two-expert sampler both experts' files and the split),
    saying whether the node's ``tau`` (None: it uses none) is that one, after the line saying the memory file was set
    aside when it could not be read; None when there is neither."""
    if not prompt or node_id is None:
        return None
    found = _downstream_sampler(prompt, str(node_id))
    if found is None:
        return None
    sampler_id, model_input = found
    inputs = prompt[sampler_id]["inputs"]
    setup = [inputs[name] for name in _SETUP_INPUTS]
    if model_input in EXPERT_INPUTS:
        files = [root_model_file(prompt, sampler_id, name) for name in EXPERT_INPUTS]
        if None in files or not _plain([inputs.get("split_step")]):
            return None
        key = experts_setup_key(*files, setup[0], inputs["split_step"], *setup[1:])
        expert = EXPERT_INPUTS[model_input]
    else:
        model_file = root_model_file(prompt, str(node_id))
        if model_file is None:
            return None
        key, expert = setup_key(model_file, *setup), None
    memory = calibration_memory()
    try:
        entry = memory.recall(key)
    except OSError as error:  # a memory that could not be moved aside: say so, the sampling goes on
        return str(error)
    if entry is None or (expert is not None) != (HIGH_NOISE in entry):
        return " ".join(memory.problems) or None
    return " ".join([*memory.problems, describe_remembered(entry, expert, tau)])


def remember(hidden, calibration, key_of, *model_inputs) -> list[str]:
    """Stores the calibration under ``key_of(*model files)``, the files of the loaders at the root of the node's
    ``model_inputs`` in a server run's prompt; the report's line saying so (nothing outside a server run)."""
    if not hidden.prompt:
        return []
    files = [root_model_file(hidden.prompt, str(hidden.unique_id), name) for name in model_inputs]
    if None in files:
        return []
    key = key_of(*files)
    memory = calibration_memory()
    try:
        memory.remember(key, calibration)
    except OSError as error:  # the calibration's outputs stand; only remembering it failed
        return ["", *memory.problems, f"Not remembered for {key}: {error}"]
    return ["", *memory.problems, f"Remembered for {key}: Apply Cache on this setup shows it."]
