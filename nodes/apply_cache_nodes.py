from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core import CacheMode, StepCacheConfig
from ..cachedsearch_core.calibration import TAU_MAX, cache_window_problem
from .cache_patch import attach_step_cache
from .calibration_graph import remembered_calibration, sampled_steps


class ApplyStepCache(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchApplyCache",
            display_name="CachedSearch Apply Cache",
            category="CachedSearch",
            description=(
                "Wraps the model with the adaptive transformation-vector step cache: transformer calls whose input "
                "has drifted little since the last computed one reuse that call's output change, so drafts compute "
                "fewer calls (how many fewer per tau: this node's help page). The input model is not modified."
            ),
            inputs=[
                io.Model.Input("model", tooltip="The diffusion model to speed up (after LoRAs and ModelSamplingSD3)."),
                io.Combo.Input(
                    "mode",
                    options=[mode.value for mode in CacheMode],
                    default=CacheMode.ADAPTIVE.value,
                    tooltip="adaptive: skip while the accumulated input drift stays under tau. static: compute every "
                    "k-th step (baseline). off: compute every call (bit-identical to no cache).",
                ),
                io.Float.Input(
                    "tau", default=0.10, min=0.0, max=TAU_MAX, step=0.01,
                    tooltip="Skip threshold on accumulated relative drift. Higher is faster and rougher; 0 never "
                    "skips. CachedSearch Calibrate measures it for your model and verifier (its tau output can be "
                    "wired here); the speed-ups and the report's calibrated values per model: this node's help page.",
                ),
                io.Int.Input(
                    "warmup_steps", default=5, min=0, max=1000,
                    tooltip="The first steps of every sampling run are always computed (layout is decided early).",
                ),
                io.Int.Input(
                    "cooldown_steps", default=5, min=0, max=1000,
                    tooltip="The last steps of every sampling run are always computed (fine detail is decided late).",
                ),
                io.Int.Input(
                    "static_interval", default=2, min=1, max=100,
                    tooltip="Static mode only: compute every k-th step between warmup and cooldown.",
                ),
            ],
            outputs=[io.Model.Output(tooltip="A copy of the model with the step cache attached.")],
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
        )

    @classmethod
    def execute(cls, model, mode, tau, warmup_steps, cooldown_steps, static_interval) -> io.NodeOutput:
        config = StepCacheConfig(
            mode=mode, tau=tau, warmup_steps=warmup_steps, cooldown_steps=cooldown_steps,
            static_interval=static_interval,
        )
        prompt, node_id = cls.hidden.prompt, cls.hidden.unique_id
        steps = sampled_steps(prompt, node_id)
        window = None if steps is None or config.mode == CacheMode.OFF else cache_window_problem(
            steps, warmup_steps, cooldown_steps)
        remembered = remembered_calibration(prompt, node_id, tau if config.mode == CacheMode.ADAPTIVE else None)
        # each line a sentence: the next one follows it on the panel
        lines = [remembered and f"{remembered.rstrip('.')}.", window and f"This cache skips nothing here: {window}."]
        shown = {"cachedsearch_calibrated": [" ".join(filter(None, lines))]} if any(lines) else None
        return io.NodeOutput(attach_step_cache(model, config), ui=shown)
