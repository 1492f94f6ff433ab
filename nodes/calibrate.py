"""CachedSearch Calibrate: which tau keeps this verifier's ranking on this model and prompt, and what it saves.

Each rollout is one stock KSampler call (``search.run_stage``), decoded by the stock VAEDecode and scored as the
Verifier node scores a draft; only its score and costs are kept, so one rollout is in memory at a time. The table
comes from ``cachedsearch_core.calibration`` (the audit's own evaluation).
"""

from __future__ import annotations

import os
import time

import comfy.model_management
import comfy.samplers
import folder_paths
import nodes as comfy_nodes
import torch
from comfy_api.latest import io

from ..cachedsearch_core import StepCacheConfig
from ..cachedsearch_core.audit import FULL_ARM, ScoreStore, tau_arm
from ..cachedsearch_core.calibration import (
    DEFAULT_CAPTURE_TARGET,
    DEFAULT_SEEDS,
    DEFAULT_TAUS,
    Calibration,
    CalibrationMemory,
    CalibrationPlan,
    describe_remembered,
    parse_taus,
    setup_key,
)
from ..cachedsearch_core.image_reward import mean_frame_score
from .cache_patch import attach_step_cache
from .search import CandidateState, KSamplerStage, SearchProgress, StagedRecipe, progress_text_sender, run_stage
from .search_nodes import _check_latent
from .ui_results import SHOW_RESULTS_WHEN_CACHED
from .verifier_nodes import Verifier

MEMORY_FILE = os.path.join("cachedsearch", "calibrations.json")
# Inputs of a KSampler-style node that make a calibration's setup.
_SETUP_INPUTS = ("steps", "sampler_name", "scheduler")
_MODEL_FILE_SUFFIXES = (".safetensors", ".gguf", ".ckpt", ".pt", ".pth", ".sft", ".bin")


def calibration_memory() -> CalibrationMemory:
    """Remembered calibrations, in ComfyUI's user directory."""
    return CalibrationMemory(os.path.join(folder_paths.get_user_directory(), MEMORY_FILE))


def _model_file(prompt: dict, node_id: str, input_name: str = "model") -> str | None:
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


def _downstream_setup(prompt: dict, node_id: str) -> tuple | None:
    """(steps, sampler_name, scheduler) of the first KSampler-style node that samples with ``node_id``'s model
    output, directly or through MODEL -> MODEL nodes; None when no such node has them as plain values."""
    frontier, seen = [node_id], set()
    while frontier:
        current = frontier.pop(0)
        seen.add(current)
        for other_id, node in (prompt or {}).items():
            link = node.get("inputs", {}).get("model")
            if not (isinstance(link, list) and str(link[0]) == current) or other_id in seen:
                continue
            values = tuple(node["inputs"].get(name) for name in _SETUP_INPUTS)
            if all(value is not None and not isinstance(value, list) for value in values):
                return values
            frontier.append(str(other_id))
    return None


def remembered_calibration(prompt: dict | None, node_id: str | None) -> str | None:
    """Apply Cache's line for a calibration remembered for its setup (its model file, and the steps, sampler and
    scheduler of the sampler it feeds), or None."""
    if not prompt or node_id is None:
        return None
    model_file = _model_file(prompt, str(node_id))
    setup = _downstream_setup(prompt, str(node_id))
    if model_file is None or setup is None:
        return None
    entry = calibration_memory().recall(setup_key(model_file, *setup))
    return describe_remembered(entry) if entry is not None else None


_COST = ("It costs S full rollouts plus S cached rollouts per tau (defaults: 4 + 4 x 5 = 24 rollouts, about 14 "
         "full-rollout times at ~2x cache speed-up), each decoded and scored by the verifier.")


class Calibrate(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchCalibrate",
            display_name="CachedSearch Calibrate",
            category="CachedSearch",
            description="Measures which tau keeps your verifier's ranking on your model and prompt, and what it "
            "saves: S seeds at full compute and cached at each tau, all scored; per tau the calls skipped, speed-up, "
            "rank correlation, top-1 agreement, capture of the search's gain and regret. Outputs the largest tau "
            f"whose capture meets the target (0: keep the cache off). {_COST} Wire the tau into Apply Cache.",
            inputs=[
                io.Model.Input("model", tooltip="The diffusion model to calibrate (after LoRAs and ModelSamplingSD3), "
                               "without a cache: the node applies it itself on a copy."),
                io.Conditioning.Input("positive", tooltip="A prompt typical of what you will search."),
                io.Conditioning.Input("negative", tooltip="What the videos should avoid."),
                io.Latent.Input("latent_image", tooltip="A batch-1 latent of the size you will search at."),
                io.Vae.Input("vae", tooltip="Decodes each rollout for the verifier."),
                Verifier.Input("verifier", tooltip="From CachedSearch Load ImageReward or Load CLIP Verifier: the "
                               "judge your search will use."),
                io.String.Input("prompt", multiline=True, default="",
                                tooltip="The prompt text the verifier compares the videos with (the encoder's text)."),
                io.Int.Input("first_seed", default=0, min=0, max=0xFFFF_FFFF_FFFF_FFFF,
                             tooltip="The calibration uses seeds first_seed ... first_seed + seeds - 1. It stays "
                             "fixed, so queueing again reuses the calibration instead of recomputing it."),
                io.Int.Input("seeds", default=DEFAULT_SEEDS, min=1, max=64,
                             tooltip="S, how many seeds are compared (at least 2). 4 is cheap but its intervals are "
                             "wide; 8 gives a steadier recommendation at twice the cost."),
                io.Int.Input("steps", default=50, min=1, max=10000, tooltip="Sampling steps, as you will search."),
                io.Float.Input("cfg", default=5.0, min=0.0, max=100.0, step=0.1, round=0.01,
                               tooltip="Classifier-free guidance scale."),
                io.Combo.Input("sampler_name", options=comfy.samplers.KSampler.SAMPLERS, default="uni_pc",
                               tooltip="Sampling algorithm, as in KSampler."),
                io.Combo.Input("scheduler", options=comfy.samplers.KSampler.SCHEDULERS, default="simple",
                               tooltip="Sigma schedule, as in KSampler."),
                io.Float.Input("denoise", default=1.0, min=0.0, max=1.0, step=0.01,
                               tooltip="1.0 samples from pure noise; lower keeps part of the input latent."),
                io.String.Input("taus", default=" ".join(f"{tau:.2f}" for tau in DEFAULT_TAUS),
                                tooltip="The cache thresholds to measure, smallest first, separated by spaces "
                                "(Apply Cache's range 0 to 2). Each adds S cached rollouts."),
                io.Float.Input("capture_target", default=DEFAULT_CAPTURE_TARGET, min=0.0, max=1.0, step=0.01,
                               tooltip="Share of best-of-S's gain (over a random seed) a tau must keep to be "
                               "recommended. 0.90 is cautious; the audit's tau* uses 0.85."),
                io.Int.Input("warmup_steps", default=5, min=0, max=1000,
                             tooltip="Always-computed first steps, as on Apply Cache (use the value you will use)."),
                io.Int.Input("cooldown_steps", default=5, min=0, max=1000,
                             tooltip="Always-computed last steps, as on Apply Cache (use the value you will use)."),
                io.Int.Input("frames_per_candidate", default=8, min=1, max=256,
                             tooltip="K frames the verifier scores per rollout, as on the Verifier node."),
            ],
            outputs=[
                io.Float.Output(display_name="tau", tooltip="The recommended tau (0: leave the cache off); wire it "
                                "into Apply Cache's tau."),
                io.String.Output(display_name="report", tooltip="The table per tau and the recommendation."),
                io.Image.Output(display_name="chart", tooltip="Capture and speed-up against tau with the target; "
                                "connect a Preview Image."),
            ],
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def validate_inputs(cls, taus=None, seeds=None, first_seed=None, capture_target=None, denoise=None):
        if denoise is not None and not 0.0 < denoise <= 1.0:
            return f"denoise: got {denoise}; use a value above 0 and at most 1 (1.0 samples from pure noise)"
        if None in (taus, seeds, first_seed, capture_target):
            return True
        try:
            CalibrationPlan(parse_taus(taus), seeds, first_seed, capture_target)
        except ValueError as error:
            return str(error)
        return True

    @classmethod
    def execute(cls, model, positive, negative, latent_image, vae, verifier, prompt, first_seed, seeds, steps, cfg,
                sampler_name, scheduler, denoise, taus, capture_target, warmup_steps, cooldown_steps,
                frames_per_candidate) -> io.NodeOutput:
        plan = CalibrationPlan(parse_taus(taus), seeds, first_seed, capture_target)
        if not 0.0 < denoise <= 1.0:
            raise ValueError(cls.validate_inputs(denoise=denoise))
        _check_latent(latent_image)
        stage = KSamplerStage(model, positive, negative, steps, cfg, sampler_name, scheduler, denoise)
        announce = progress_text_sender(cls.hidden.unique_id) or (lambda text: None)
        score = _scorer(vae, verifier, prompt, frames_per_candidate, latent_image)

        def cache(mode, tau=0.0):
            return attach_step_cache(model, StepCacheConfig(mode=mode, tau=tau, warmup_steps=warmup_steps,
                                                            cooldown_steps=cooldown_steps))

        # The full rollouts run through the cache in "off" mode: bit-identical to no cache, and it counts the calls.
        arms = [(FULL_ARM, cache("off")), *((tau_arm(tau), cache("adaptive", tau)) for tau in plan.taus)]
        cost = plan.cost(stage.step_count)
        announce(f"calibrating: {cost}")
        progress = SearchProgress(plan.rollouts * stage.step_count)
        store = ScoreStore(None)
        start = time.perf_counter()
        done = 0
        for arm, arm_model in arms:
            recipe = StagedRecipe.single(stage.with_model(arm_model), latent_image)
            for index, rollout_seed in enumerate(plan.seed_list):
                comfy.model_management.throw_exception_if_processing_interrupted()
                done += 1
                announce(f"rollout {done} / {plan.rollouts}: {arm if arm != FULL_ARM else 'full compute'}, "
                         f"seed {rollout_seed} ({index + 1} / {plan.seeds})")
                (state,) = run_stage(recipe, 0, [CandidateState(rollout_seed, latent_image)], progress)
                draft = state.draft()
                store.add(arm, 0, rollout_seed, score(state.latent), draft.seconds,
                          calls=draft.calls_computed + draft.calls_skipped, skipped=draft.calls_skipped)
        calibration = Calibration.from_store(store, plan)
        header = [f"CachedSearch calibration: seeds {plan.seed_list[0]}-{plan.seed_list[-1]}, {steps} steps, "
                  f"{sampler_name}/{scheduler}, cfg {cfg:g}, warmup {warmup_steps}, cooldown {cooldown_steps}; "
                  f"verifier {verifier.name}",
                  f"cost: {cost}; took {time.perf_counter() - start:.1f} s (a full rollout "
                  f"{calibration.full_seconds:.2f} s)", ""]
        remembered = cls._remember(calibration, steps, sampler_name, scheduler)
        report = "\n".join([*header, calibration.report(), *remembered])
        chart = torch.from_numpy(calibration.chart()).float().div(255).unsqueeze(0)
        shown = {"text": (report,), "cachedsearch_calibration": [{
            "rows": calibration.rows(), "recommended_tau": calibration.recommended_tau,
            "capture_target": plan.capture_target, "seeds": plan.seeds, "steps": steps,
            "intervals": calibration.has_intervals}]}
        return io.NodeOutput(calibration.recommended_tau, report, chart, ui=shown)

    @classmethod
    def _remember(cls, calibration: Calibration, steps, sampler_name, scheduler) -> list[str]:
        model_file = _model_file(cls.hidden.prompt, str(cls.hidden.unique_id)) if cls.hidden.prompt else None
        if model_file is None:
            return []
        key = setup_key(model_file, steps, sampler_name, scheduler)
        calibration_memory().remember(key, calibration)
        return ["", f"Remembered for {key}: Apply Cache on this setup shows it."]


def _scorer(vae, verifier, prompt: str, frames_per_candidate: int, latent_image: dict):
    """``score(latent) -> float`` as the Verifier node scores a draft decoded by VAEDecode. Tried first on the
    input latent, so a verifier that cannot read the VAE's frames fails before any rollout is spent."""
    decoder = comfy_nodes.VAEDecode()

    def score(latent: dict) -> float:
        (frames,) = decoder.decode(vae, latent)
        return mean_frame_score(verifier.score, prompt, frames, frames_per_candidate)

    try:
        score(latent_image)
    except comfy.model_management.InterruptProcessingException:
        raise
    except Exception as error:
        raise ValueError(f"verifier: {verifier.name} could not score the frames this vae decodes ({error}); connect "
                         "a verifier and a VAE that belong together (a video model's VAE with ImageReward or a CLIP "
                         "verifier)") from error
    return score
