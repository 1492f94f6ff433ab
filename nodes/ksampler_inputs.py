"""A KSampler's settings as the nodes that sample like one take them (the Sampler, the Distributed Sampler, the
two-expert Sampler and both Calibrates).

Each input's kind, range, step, rounding and options are read from ComfyUI's own KSampler node
(``nodes.KSampler.INPUT_TYPES``, whose sampler and scheduler lists are ``comfy.samplers.KSampler.SAMPLERS`` and
``SCHEDULERS``), so they follow the runtime and cannot drift from it. What is the extension's own is set here once:
the defaults, which suit the video models it searches rather than ComfyUI's image defaults, and the tooltips.
"""

from __future__ import annotations

import nodes as comfy_nodes
from comfy_api.latest import io

# Wan 2.1's recommended settings for one model (the Sampler, Calibrate), and Wan 2.2 A14B's official two-expert
# graph (two KSamplerAdvanced nodes, the high-noise expert to split_step).
ONE_MODEL_DEFAULTS = {"steps": 50, "cfg": 5.0, "sampler_name": "uni_pc", "scheduler": "simple", "denoise": 1.0}
EXPERTS_DEFAULTS = {"steps": 20, "split_step": 10, "cfg": 3.5, "sampler_name": "euler", "scheduler": "simple"}
# The settings of a stock input that a V3 input takes (its tooltip is the extension's own).
_SETTINGS = ("default", "min", "max", "step", "round", "control_after_generate")
_KINDS = {"INT": io.Int, "FLOAT": io.Float}


def stock_ksampler_input(name: str, **settings):
    """ComfyUI's KSampler input ``name`` as a V3 input: kind, range and options from the stock node, ``settings``
    (default, tooltip, a narrower range) over them."""
    kind, stock = comfy_nodes.KSampler.INPUT_TYPES()["required"][name]
    if isinstance(kind, list):
        return io.Combo.Input(name, options=kind, **settings)
    return _KINDS[kind].Input(name, **({key: value for key, value in stock.items() if key in _SETTINGS} | settings))


def stock_range(name: str) -> dict:
    """The default, min and max of ComfyUI's KSampler input ``name``, for an input of another name (Calibrate's
    first_seed takes the seed's)."""
    _, stock = comfy_nodes.KSampler.INPUT_TYPES()["required"][name]
    return {key: stock[key] for key in ("default", "min", "max")}


def ksampler_settings_inputs(steps_tooltip: str) -> list:
    """A KSampler's steps, cfg, sampler, scheduler and denoise on one model."""
    defaults = ONE_MODEL_DEFAULTS
    return [
        stock_ksampler_input("steps", default=defaults["steps"], tooltip=steps_tooltip),
        stock_ksampler_input("cfg", default=defaults["cfg"], tooltip="Classifier-free guidance scale."),
        stock_ksampler_input("sampler_name", default=defaults["sampler_name"],
                             tooltip="Sampling algorithm, as in KSampler."),
        stock_ksampler_input("scheduler", default=defaults["scheduler"], tooltip="Sigma schedule, as in KSampler."),
        stock_ksampler_input("denoise", default=defaults["denoise"],
                             tooltip="1.0 samples from pure noise; lower keeps part of the input latent."),
    ]


def expert_settings_inputs(steps_tooltip: str, split_step_tooltip: str, cfg_tooltip: str) -> list:
    """The settings of Wan 2.2 A14B's two KSamplerAdvanced nodes: their steps, the step where the low-noise expert
    takes over, and the cfg, sampler and scheduler both use. Two steps at least, one for each expert."""
    defaults = EXPERTS_DEFAULTS
    steps = stock_ksampler_input("steps", default=defaults["steps"], min=2, tooltip=steps_tooltip)
    return [
        steps,
        io.Int.Input("split_step", default=defaults["split_step"], min=1, max=steps.max - 1,
                     tooltip=split_step_tooltip),
        stock_ksampler_input("cfg", default=defaults["cfg"], tooltip=cfg_tooltip),
        stock_ksampler_input("sampler_name", default=defaults["sampler_name"],
                             tooltip="Sampling algorithm, as in KSamplerAdvanced."),
        stock_ksampler_input("scheduler", default=defaults["scheduler"],
                             tooltip="Sigma schedule, as in KSamplerAdvanced."),
    ]
