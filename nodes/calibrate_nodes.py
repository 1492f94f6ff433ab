"""CachedSearch Calibrate (one stage, and two experts): which tau keeps this verifier's ranking on this model and
prompt (or prompts, pooled as the audit pools them), and what it saves.

Each rollout runs through the search's own trajectory runner (``search.run_stages``: one KSampler, or Wan 2.2
A14B's two KSamplerAdvanced; the full arm checked to compute every call), is decoded by the stock VAEDecode and
scored by the verifier nodes' own ``FrameJudge``; only its score and costs are kept, so one rollout is in memory
at a time. Both nodes run their rollouts through
``_Rollouts`` and take their tables from ``cachedsearch_core.calibration`` (the audit's own evaluation). Every
finished rollout is saved at once in ComfyUI's user directory (``cachedsearch_core.saved_rollouts``), so a
calibration re-queued after Cancel, a crash or a restart computes only what is missing.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time

import comfy.model_management
import comfy.samplers
import folder_paths
import torch
from comfy_api.latest import io

import nodes as comfy_nodes

from ..cachedsearch_core import StepCacheConfig
from ..cachedsearch_core.audit import FULL_ARM, ScoreStore, tau_arm
from ..cachedsearch_core.calibration import (
    COMFYUI_ENGINES,
    DEFAULT_CAPTURE_TARGET,
    DEFAULT_SEEDS,
    DEFAULT_TAUS,
    EXPERTS,
    HIGH_NOISE,
    LOW_NOISE,
    OUR_ENGINE,
    Calibration,
    CalibrationMemory,
    CalibrationPlan,
    EnginesCalibration,
    ExpertsCalibration,
    ExpertsPlan,
    describe_remembered,
    expert_arm_prefix,
    experts_setup_key,
    parse_taus,
    prompt_lines,
    setup_key,
    sweep_cost,
    together_arm,
)
from ..cachedsearch_core.combine import VerifierCombination
from ..cachedsearch_core.judge import FrameJudge
from ..cachedsearch_core.saved_rollouts import SavedRollout, SavedRollouts, fingerprint, rollout_key
from ..cachedsearch_core.video_score import AVERAGE
from .cache_patch import attach_step_cache
from .full_compute import full_compute_model
from .input_checks import check_latent, check_same_latent_format, denoise_message, split_step_message
from .search import (
    CandidateState,
    FullComputeCheck,
    KSamplerStage,
    SearchProgress,
    StagedRecipe,
    progress_text_sender,
    run_stages,
)
from .search_nodes import ksampler_settings_inputs, official_expert_stages
from .types import ADVANCED_INPUT, SHOW_RESULTS_WHEN_CACHED, CombinedVerifier, Verifier, VideoVerifier
from .verifier_nodes import DEFAULT_ASPECT_WEIGHTS, video_score_ranking_inputs

MEMORY_FILE = os.path.join("cachedsearch", "calibrations.json")
ROLLOUTS_FOLDER = os.path.join("cachedsearch", "calibration_rollouts")
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


# A two-expert sampler's model inputs and the expert each one is.
_EXPERT_INPUTS = {"model_high": HIGH_NOISE, "model_low": LOW_NOISE}


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
            for name in ("model", *_EXPERT_INPUTS):
                link = inputs.get(name)
                if not (isinstance(link, list) and str(link[0]) == current) or other_id in seen:
                    continue
                if _plain(inputs.get(setup) for setup in _SETUP_INPUTS):
                    return str(other_id), name
                if name == "model":
                    frontier.append(str(other_id))
    return None


def remembered_calibration(prompt: dict | None, node_id: str | None) -> str | None:
    """Apply Cache's line for a calibration remembered for its setup (its model file, and the steps, sampler and
    scheduler of the sampler it feeds; on an expert of a two-expert sampler both experts' files and the split),
    after the line saying the memory file was set aside when it could not be read; None when there is neither."""
    if not prompt or node_id is None:
        return None
    found = _downstream_sampler(prompt, str(node_id))
    if found is None:
        return None
    sampler_id, model_input = found
    inputs = prompt[sampler_id]["inputs"]
    setup = [inputs[name] for name in _SETUP_INPUTS]
    if model_input in _EXPERT_INPUTS:
        files = [_model_file(prompt, sampler_id, name) for name in _EXPERT_INPUTS]
        if None in files or not _plain([inputs.get("split_step")]):
            return None
        key = experts_setup_key(*files, setup[0], inputs["split_step"], *setup[1:])
        expert = _EXPERT_INPUTS[model_input]
    else:
        model_file = _model_file(prompt, str(node_id))
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
    return " ".join([*memory.problems, describe_remembered(entry, expert)])


_SAVED = ("Every finished rollout is saved, so queueing it again after Cancel, a crash or a restart computes only "
          "the missing ones.")
_COST = ("It costs, per prompt, S full rollouts plus S cached rollouts per tau (defaults: 4 + 4 x 5 = 24 rollouts, "
         "about 14 full-rollout times at ~2x cache speed-up), each decoded and scored by the verifier. " + _SAVED)
_EXPERTS_COST = ("It costs, per prompt, S full rollouts, S cached rollouts per tau of each expert and S with both "
                 "picks (defaults: 4 + 4 x (5 + 5) + 4 = 48 rollouts, about 26 full-rollout times at ~2x cache "
                 "speed-up), each decoded and scored by the verifier. " + _SAVED)
_TAUS_TOOLTIP = ("The cache thresholds to measure, smallest first, separated by spaces (Apply Cache's range 0 to 2). "
                 "Each adds S cached rollouts.")


def _scene_inputs() -> list:
    return [
        io.Conditioning.Input("positive", optional=True,
                              tooltip="One prompt typical of what you will search (a text encoder's output). Leave "
                              "it unconnected and connect clip to calibrate on several prompts."),
        io.Conditioning.Input("negative", tooltip="What the videos should avoid (shared by every prompt)."),
        io.Latent.Input("latent_image", tooltip="A batch-1 latent of the size you will search at."),
        io.Vae.Input("vae", tooltip="Decodes each rollout for the verifier."),
        io.MultiType.Input("verifier", types=[Verifier, VideoVerifier, CombinedVerifier],
                           tooltip="The judge your search will use: CachedSearch Load ImageReward, Load CLIP Verifier "
                           "or Load VideoScore, or several through CachedSearch Combine Verifiers (as Combine Scores "
                           "ranks a search)."),
        io.String.Input("prompt", multiline=True, default="",
                        tooltip="With positive: the prompt text the verifier compares the videos with (the "
                        "encoder's text). With clip: the prompts to calibrate on, one per line, each encoded by clip "
                        "and rolled out on every seed and tau (about 25 of the kinds you make calibrate a model "
                        "family)."),
        io.Int.Input("first_seed", default=0, min=0, max=0xFFFF_FFFF_FFFF_FFFF,
                     tooltip="The calibration uses seeds first_seed ... first_seed + seeds - 1. It stays fixed, so "
                     "queueing again reuses the calibration instead of recomputing it."),
        io.Int.Input("seeds", default=DEFAULT_SEEDS, min=1, max=64,
                     tooltip="S, how many seeds are compared (at least 2). 4 is cheap but its intervals are wide; 8 "
                     "gives a steadier recommendation at twice the cost."),
    ]


def _judging_inputs() -> list:
    return [
        io.Float.Input("capture_target", default=DEFAULT_CAPTURE_TARGET, min=0.0, max=1.0, step=0.01,
                       tooltip="Share of best-of-S's gain (over a random seed) a tau must keep to be recommended. "
                       "0.90 is cautious; the audit's tau* uses 0.85."),
    ]


def _ranking_inputs() -> list:
    """A VideoScore verifier judges as the search's VideoScore Verifier ranks, and a text encoder makes several
    prompts. Last, so a saved workflow's widget values keep their places."""
    return [*video_score_ranking_inputs(optional=True, **ADVANCED_INPUT),
            io.Clip.Input("clip", optional=True,
                          tooltip="A text encoder (CLIPLoader) to calibrate on several prompts: each line of prompt "
                          "is encoded as CLIPTextEncode encodes it, with negative shared. Leave positive unconnected "
                          "then.")]


@dataclasses.dataclass(frozen=True)
class CalibrationPrompt:
    """A prompt the calibration rolls out: its text (what the verifier reads) and its conditioning."""

    text: str
    positive: list

    @functools.cached_property
    def fingerprint(self) -> str:
        """Its content's digest, taken once: a saved rollout's key holds it."""
        return fingerprint([self.text, self.positive])


def calibration_prompts(positive, clip, prompt: str) -> list[CalibrationPrompt]:
    """The prompts to calibrate on: the connected conditioning with the prompt text, or each line of the text
    encoded by ``clip`` (the stock CLIPTextEncode)."""
    if positive is not None and clip is not None:
        raise ValueError("positive and clip: both are connected; connect positive for one prompt, or clip (with the "
                         "prompts one per line in prompt) for several, not both")
    if clip is not None:
        encoder = comfy_nodes.CLIPTextEncode()
        return [CalibrationPrompt(line, encoder.encode(clip, line)[0]) for line in prompt_lines(prompt)]
    if positive is None:
        raise ValueError("positive: not connected; connect a prompt's conditioning, or a text encoder to clip with "
                         "the prompts one per line in prompt")
    return [CalibrationPrompt(prompt, positive)]


def _frames_input():
    return io.Int.Input("frames_per_candidate", default=8, min=1, max=256,
                        tooltip="K frames the verifier scores per rollout, as on the Verifier node (a VideoScore "
                        "verifier reads up to this many, its max_frames).")


def _cache_window_inputs(suffix: str = "", warmup: int = 5, cooldown: int = 5, whose: str = "") -> list:
    return [
        io.Int.Input(f"warmup_steps{suffix}", default=warmup, min=0, max=1000,
                     tooltip=f"Always-computed first steps{whose}, as on Apply Cache (use the value you will use)."),
        io.Int.Input(f"cooldown_steps{suffix}", default=cooldown, min=0, max=1000,
                     tooltip=f"Always-computed last steps{whose}, as on Apply Cache (use the value you will use)."),
    ]


def _plan_message(make_plan) -> str | bool:
    """validate_inputs' answer for a plan built by ``make_plan()`` (True when it is valid)."""
    try:
        make_plan()
    except ValueError as error:
        return str(error)
    return True


# The start and end of ComfyUI's EasyCache and LazyCache in a calibration: their nodes' defaults.
_COMFYUI_CACHE_WINDOW = {"start_percent": 0.15, "end_percent": 0.95}


def _thresholds_input(engine: str) -> str:
    return f"{engine.lower()}_thresholds"


def _engine_inputs() -> list:
    """ComfyUI's own caches, measured on the same full rollouts. Last, so saved workflows keep their widgets."""
    return [io.String.Input(_thresholds_input(engine), default="", optional=True, **ADVANCED_INPUT,
                            tooltip=f"{engine} reuse_threshold values to measure too, smallest first, separated by "
                            f"spaces (its node's range 0 to 3; start {_COMFYUI_CACHE_WINDOW['start_percent']:g}, end "
                            f"{_COMFYUI_CACHE_WINDOW['end_percent']:g}, its defaults). Each adds S cached rollouts per "
                            "prompt. Empty: not measured.")
            for engine in COMFYUI_ENGINES]


def _engine_plans(plan: CalibrationPlan, thresholds: dict[str, str]) -> list[CalibrationPlan]:
    """Our plan, then one per ComfyUI engine whose thresholds input is filled in."""
    return [plan, *(plan.for_engine(engine, parse_taus(text, _thresholds_input(engine)), _thresholds_input(engine))
                    for engine, text in thresholds.items() if text and text.strip())]


def calibrate_plans(taus: str, seeds: int, first_seed: int, capture_target: float, prompts: int = 1,
                    easycache_thresholds: str = "", lazycache_thresholds: str = "") -> list[CalibrationPlan]:
    """What CachedSearch Calibrate runs for its inputs: our plan, then ComfyUI's engines' (raises ValueError naming
    the input)."""
    return _engine_plans(CalibrationPlan(parse_taus(taus), seeds, first_seed, capture_target, prompts=prompts),
                         dict(zip(COMFYUI_ENGINES, (easycache_thresholds, lazycache_thresholds))))


def experts_plan(taus_high: str, taus_low: str, seeds: int, first_seed: int, capture_target: float,
                 prompts: int = 1) -> ExpertsPlan:
    """What CachedSearch Calibrate (two experts) runs for its inputs (raises ValueError naming the input)."""
    return ExpertsPlan.create(parse_taus(taus_high, "taus_high"), parse_taus(taus_low, "taus_low"), seeds,
                              first_seed, capture_target, prompts=prompts)


def _comfyui_cached(model, engine: str, reuse_threshold: float):
    """A clone of ``model`` without any known cache, then with ComfyUI's ``engine`` node at ``reuse_threshold``."""
    node = comfy_nodes.NODE_CLASS_MAPPINGS.get(engine)
    if node is None:
        raise ValueError(f"{_thresholds_input(engine)}: this ComfyUI has no {engine} node; update ComfyUI or leave "
                         "the list empty")
    return node.execute(model=full_compute_model(model), reuse_threshold=reuse_threshold, verbose=False,
                        **_COMFYUI_CACHE_WINDOW).result[0]


def _arm_settings(tau: float | None, warmup_steps: int, cooldown_steps: int) -> dict:
    """What makes a rollout of one stage's arm, for its saved key: full compute, or our cache at ``tau`` with its
    window (which a full rollout does not depend on)."""
    if tau is None:
        return {"engine": "full compute"}
    return {"engine": OUR_ENGINE, "tau": tau, "warmup_steps": warmup_steps, "cooldown_steps": cooldown_steps}


def _cached(model, warmup_steps: int, cooldown_steps: int, tau: float | None):
    """A clone of ``model`` with the step cache: adaptive at ``tau``, or mode off for None (bit-identical to no
    cache). Any other cache CachedSearch knows on ``model`` (an EasyCache) is detached first, so the full arm is
    full compute and each tau arm measures this cache alone."""
    mode = "off" if tau is None else "adaptive"
    config = StepCacheConfig(mode=mode, tau=tau or 0.0, warmup_steps=warmup_steps, cooldown_steps=cooldown_steps)
    return attach_step_cache(full_compute_model(model), config)


class Calibrate(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchCalibrate",
            display_name="CachedSearch Calibrate",
            category="CachedSearch",
            description="Measures which tau keeps your verifier's ranking on your model and prompt (or prompts: a "
            "text encoder on clip, one prompt per line), and what it saves: S seeds at full compute and cached at "
            "each tau, all scored, pooled over the prompts as the audit pools them; per tau the calls skipped, "
            "speed-up, rank correlation, top-1 agreement, capture of the search's gain and regret. Outputs the "
            f"largest tau whose capture meets the target (0: keep the cache off). {_COST} Wire the tau into Apply "
            "Cache. Advanced: also measure ComfyUI's EasyCache or LazyCache thresholds on the same full rollouts.",
            inputs=[
                io.Model.Input("model", tooltip="The diffusion model to calibrate (after LoRAs and ModelSamplingSD3), "
                               "without a cache: the node applies it itself on a copy."),
                *_scene_inputs(),
                *ksampler_settings_inputs("Sampling steps, as you will search."),
                io.String.Input("taus", default=" ".join(f"{tau:.2f}" for tau in DEFAULT_TAUS),
                                tooltip=_TAUS_TOOLTIP),
                *_judging_inputs(),
                *_cache_window_inputs(),
                _frames_input(),
                *_ranking_inputs(),
                *_engine_inputs(),
            ],
            outputs=[
                io.Float.Output(display_name="tau", tooltip="The recommended tau (0: leave the cache off); wire it "
                                "into Apply Cache's tau."),
                io.String.Output(display_name="report", tooltip="The table per tau (and per engine measured) and the "
                                 "recommendation."),
                io.Image.Output(display_name="chart", tooltip="Capture and speed-up against tau with the target (one "
                                "chart per engine measured); connect a Preview Image."),
                *(io.Float.Output(display_name=f"{engine.lower()}_threshold",
                                  tooltip=f"{engine}'s recommended reuse_threshold (0: not measured, or none meets the "
                                  f"target); wire it into the {engine} node's reuse_threshold.")
                  for engine in COMFYUI_ENGINES),
            ],
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def validate_inputs(cls, taus=None, seeds=None, first_seed=None, capture_target=None, denoise=None,
                        easycache_thresholds="", lazycache_thresholds=""):
        message = denoise_message(denoise)
        if message is not True or None in (taus, seeds, first_seed, capture_target):
            return message
        return _plan_message(lambda: calibrate_plans(taus, seeds, first_seed, capture_target,
                                                     easycache_thresholds=easycache_thresholds,
                                                     lazycache_thresholds=lazycache_thresholds))

    @classmethod
    def execute(cls, model, negative, latent_image, vae, verifier, prompt, first_seed, seeds, steps, cfg,
                sampler_name, scheduler, denoise, taus, capture_target, warmup_steps, cooldown_steps,
                frames_per_candidate, rank_by=AVERAGE, aspect_weights=DEFAULT_ASPECT_WEIGHTS, positive=None,
                clip=None, easycache_thresholds="", lazycache_thresholds="") -> io.NodeOutput:
        message = denoise_message(denoise)
        if message is not True:
            raise ValueError(message)
        check_latent(latent_image)
        prompts = calibration_prompts(positive, clip, prompt)
        plans = calibrate_plans(taus, seeds, first_seed, capture_target, len(prompts), easycache_thresholds,
                                lazycache_thresholds)
        plan = plans[0]

        def recipe(model_of):
            def of_prompt(calibration_prompt):
                stage = KSamplerStage(model_of(), calibration_prompt.positive, negative, steps, cfg, sampler_name,
                                      scheduler, denoise)
                return StagedRecipe.single(stage, latent_image)
            return of_prompt

        arms = {FULL_ARM: (_arm_settings(None, 0, 0),
                           recipe(lambda: _cached(model, warmup_steps, cooldown_steps, None)))}
        for engine_plan in plans:
            for threshold in engine_plan.taus:
                if engine_plan.engine == OUR_ENGINE:
                    arms[engine_plan.arm(threshold)] = (_arm_settings(threshold, warmup_steps, cooldown_steps), recipe(
                        lambda tau=threshold: _cached(model, warmup_steps, cooldown_steps, tau)))
                else:
                    arms[engine_plan.arm(threshold)] = (
                        {"engine": engine_plan.engine, "reuse_threshold": threshold, **_COMFYUI_CACHE_WINDOW},
                        recipe(lambda engine=engine_plan.engine, value=threshold: _comfyui_cached(model, engine,
                                                                                                 value)))
        setup = {"steps": steps, "cfg": cfg, "sampler_name": sampler_name, "scheduler": scheduler,
                 "denoise": denoise}
        saved = _SavedSetup.of(cls.hidden, ("model",), setup, negative, latent_image, frames_per_candidate,
                               rank_by, aspect_weights)
        rollouts = _Rollouts(cls.hidden.unique_id, plan, prompts, steps, _Judge(
            vae, verifier, prompts[0].text, frames_per_candidate, latent_image, rank_by, aspect_weights),
            sweep_cost(plans, steps), saved, [settings for settings, _ in arms.values()],
            len(arms) * plan.prompts * plan.seeds)
        for arm, (settings, of_prompt) in arms.items():
            rollouts.run(arm, "full compute" if arm == FULL_ARM else arm, settings, of_prompt)
        calibration = (Calibration.from_store(rollouts.store, plan) if len(plans) == 1 else
                       EnginesCalibration.from_store(rollouts.store, plans))
        remembered = _remember(cls.hidden, calibration, lambda file: setup_key(file, steps, sampler_name, scheduler),
                               "model")
        header = rollouts.header(f"{steps} steps, {sampler_name}/{scheduler}, cfg {cfg:g}, warmup {warmup_steps}, "
                                 f"cooldown {cooldown_steps}", verifier, calibration.full_seconds)
        engines = {"engine_rows": calibration.engine_rows(), "fastest": calibration.fastest_pick()} \
            if len(plans) > 1 else {}
        thresholds = [calibration.threshold(engine) if len(plans) > 1 else 0.0 for engine in COMFYUI_ENGINES]
        return _output(calibration, calibration.recommended_tau, plan, steps,
                       [*header, calibration.report(), *remembered], (calibration.recommended_tau,), thresholds,
                       engines)


class CalibrateExperts(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchCalibrateExperts",
            display_name="CachedSearch Calibrate (two experts)",
            category="CachedSearch",
            description="CachedSearch Calibrate for a two-expert model such as Wan 2.2 A14B, sampled as the official "
            "two-KSamplerAdvanced graph (and CachedSearch Sampler (High/Low Experts)): each expert's taus are "
            "measured with the other expert at full compute, each expert gets the largest tau whose capture meets "
            "the target (0: keep its cache off), and both picks are then measured together. "
            f"{_EXPERTS_COST} Wire each tau into that expert's Apply Cache.",
            inputs=[
                io.Model.Input("model_high", tooltip="The high-noise expert (first steps), after LoRAs and "
                               "ModelSamplingSD3, without a cache: the node applies it itself on a copy."),
                io.Model.Input("model_low", tooltip="The low-noise expert (the remaining steps), likewise without a "
                               "cache."),
                *_scene_inputs(),
                io.Int.Input("steps", default=20, min=2, max=10000,
                             tooltip="Total sampling steps of both experts, as you will search (the official graph: "
                             "20)."),
                io.Int.Input("split_step", default=10, min=1, max=9999,
                             tooltip="The step where the low-noise expert takes over, as you will search (official: "
                             "10 of 20)."),
                io.Float.Input("cfg", default=3.5, min=0.0, max=100.0, step=0.1, round=0.01,
                               tooltip="Classifier-free guidance scale of both experts (official: 3.5)."),
                io.Combo.Input("sampler_name", options=comfy.samplers.KSampler.SAMPLERS, default="euler",
                               tooltip="Sampling algorithm, as in KSamplerAdvanced."),
                io.Combo.Input("scheduler", options=comfy.samplers.KSampler.SCHEDULERS, default="simple",
                               tooltip="Sigma schedule, as in KSamplerAdvanced."),
                io.String.Input("taus_high", default=" ".join(f"{tau:.2f}" for tau in DEFAULT_TAUS),
                                tooltip=f"The high-noise expert's taus. {_TAUS_TOOLTIP}"),
                io.String.Input("taus_low", default=" ".join(f"{tau:.2f}" for tau in DEFAULT_TAUS),
                                tooltip=f"The low-noise expert's taus. {_TAUS_TOOLTIP}"),
                *_judging_inputs(),
                *_cache_window_inputs("_high", 2, 1, " of the high-noise expert's steps"),
                *_cache_window_inputs("_low", 1, 2, " of the low-noise expert's steps"),
                _frames_input(),
                *_ranking_inputs(),
            ],
            outputs=[
                io.Float.Output(display_name="tau_high", tooltip="The high-noise expert's recommended tau (0: leave "
                                "its cache off); wire it into that expert's Apply Cache tau."),
                io.Float.Output(display_name="tau_low", tooltip="The low-noise expert's recommended tau; wire it into "
                                "that expert's Apply Cache tau."),
                io.String.Output(display_name="report", tooltip="Each expert's table, both picks together and the "
                                 "recommendation."),
                io.Image.Output(display_name="chart", tooltip="Each expert's capture and speed-up against tau; "
                                "connect a Preview Image."),
            ],
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def validate_inputs(cls, taus_high=None, taus_low=None, seeds=None, first_seed=None, capture_target=None,
                        steps=None, split_step=None):
        message = split_step_message(steps, split_step)
        if message is not True or None in (taus_high, taus_low, seeds, first_seed, capture_target):
            return message
        return _plan_message(lambda: experts_plan(taus_high, taus_low, seeds, first_seed, capture_target))

    @classmethod
    def execute(cls, model_high, model_low, negative, latent_image, vae, verifier, prompt, first_seed, seeds,
                steps, split_step, cfg, sampler_name, scheduler, taus_high, taus_low, capture_target,
                warmup_steps_high, cooldown_steps_high, warmup_steps_low, cooldown_steps_low,
                frames_per_candidate, rank_by=AVERAGE, aspect_weights=DEFAULT_ASPECT_WEIGHTS, positive=None,
                clip=None) -> io.NodeOutput:
        message = cls.validate_inputs(steps=steps, split_step=split_step)
        if message is not True:
            raise ValueError(message)
        check_latent(latent_image)
        check_same_latent_format(model_high, model_low)
        prompts = calibration_prompts(positive, clip, prompt)
        plan = experts_plan(taus_high, taus_low, seeds, first_seed, capture_target, len(prompts))

        def recipe(tau_high, tau_low):
            def of_prompt(calibration_prompt):
                # The official graph, as CachedSearch Sampler (High/Low Experts) runs it.
                high, low = official_expert_stages(model_high, model_low, calibration_prompt.positive, negative,
                                                   steps, split_step, cfg, sampler_name, scheduler)
                return StagedRecipe((
                    high.with_model(_cached(model_high, warmup_steps_high, cooldown_steps_high, tau_high)),
                    low.with_model(_cached(model_low, warmup_steps_low, cooldown_steps_low, tau_low))),
                    latent_image, EXPERTS)
            return of_prompt

        def settings(tau_high, tau_low):
            return {HIGH_NOISE: _arm_settings(tau_high, warmup_steps_high, cooldown_steps_high),
                    LOW_NOISE: _arm_settings(tau_low, warmup_steps_low, cooldown_steps_low)}

        arms = {FULL_ARM: (None, None),
                **{expert_arm_prefix(HIGH_NOISE) + tau_arm(tau): (tau, None) for tau in plan.high.taus},
                **{expert_arm_prefix(LOW_NOISE) + tau_arm(tau): (None, tau) for tau in plan.low.taus}}
        setup = {"steps": steps, "split_step": split_step, "cfg": cfg, "sampler_name": sampler_name,
                 "scheduler": scheduler}
        saved = _SavedSetup.of(cls.hidden, tuple(_EXPERT_INPUTS), setup, negative, latent_image,
                               frames_per_candidate, rank_by, aspect_weights)
        rollouts = _Rollouts(cls.hidden.unique_id, plan, prompts, steps, _Judge(
            vae, verifier, prompts[0].text, frames_per_candidate, latent_image, rank_by, aspect_weights),
            plan.cost(steps), saved, [settings(*taus) for taus in arms.values()], plan.rollouts)
        for arm, taus in arms.items():
            rollouts.run(arm, "full compute" if arm == FULL_ARM else arm, settings(*taus), recipe(*taus))
        calibration = ExpertsCalibration.from_store(rollouts.store, plan)
        if calibration.together_taus is not None:
            arm = together_arm(*calibration.together_taus)
            rollouts.run(arm, arm, settings(*calibration.together_taus), recipe(*calibration.together_taus))
            calibration = ExpertsCalibration.from_store(rollouts.store, plan)
        rollouts.finish()
        remembered = _remember(cls.hidden, calibration, lambda high_file, low_file: experts_setup_key(
            high_file, low_file, steps, split_step, sampler_name, scheduler), *_EXPERT_INPUTS)
        header = rollouts.header(f"{steps} steps split at {split_step}, {sampler_name}/{scheduler}, cfg {cfg:g}, "
                                 f"warmup/cooldown high {warmup_steps_high}/{cooldown_steps_high}, low "
                                 f"{warmup_steps_low}/{cooldown_steps_low}", verifier, calibration.full_seconds)
        taus = (calibration.high.recommended_tau, calibration.low.recommended_tau)
        return _output(calibration, dict(zip(EXPERTS, taus)), plan.high, steps,
                       [*header, calibration.report(), *remembered], taus, ())


def _output(calibration, recommended, plan: CalibrationPlan, steps, lines, taus, after_chart, shown_too=None
            ) -> io.NodeOutput:
    """The node's outputs (the taus, the report, the chart, then ``after_chart``) and its panel's table (with
    ``shown_too``)."""
    report = "\n".join(lines)
    chart = torch.from_numpy(calibration.chart()).float().div(255).unsqueeze(0)
    shown = {"text": (report,), "cachedsearch_calibration": [{
        "rows": calibration.rows(), "recommended_tau": recommended, "capture_target": plan.capture_target,
        "seeds": plan.seeds, "prompts": plan.prompts, "steps": steps, "intervals": plan.has_intervals,
        **(shown_too or {})}]}
    return io.NodeOutput(*taus, report, chart, *after_chart, ui=shown)


def _remember(hidden, calibration, key_of, *model_inputs) -> list[str]:
    """Stores the calibration under ``key_of(*model files)``, the files of the loaders at the root of the node's
    ``model_inputs`` in a server run's prompt; the report's line saying so (nothing outside a server run)."""
    if not hidden.prompt:
        return []
    files = [_model_file(hidden.prompt, str(hidden.unique_id), name) for name in model_inputs]
    if None in files:
        return []
    key = key_of(*files)
    memory = calibration_memory()
    try:
        memory.remember(key, calibration)
    except OSError as error:  # the calibration's outputs stand; only remembering it failed
        return ["", *memory.problems, f"Not remembered for {key}: {error}"]
    return ["", *memory.problems, f"Remembered for {key}: Apply Cache on this setup shows it."]


# The model input of each stage, for a single-stage and a two-expert calibration.
_MODEL_INPUTS = {1: ("model",), 2: tuple(_EXPERT_INPUTS)}
_FULL_ARM_ADVICE = "Connect the model without that cache: Calibrate applies its own cache on a copy."


def _upstream(prompt: dict, value):
    """An input of the API prompt as the graph makes it: a link replaced by the node it comes from (its class and
    inputs, upstream links followed), a plain value as it is."""
    if not (isinstance(value, list) and len(value) == 2 and str(value[0]) in prompt):
        return value
    node = prompt[str(value[0])]
    return {"class_type": node.get("class_type"), "output": value[1],
            "inputs": {name: _upstream(prompt, inner) for name, inner in sorted(node.get("inputs", {}).items())}}


@dataclasses.dataclass(frozen=True)
class _SavedSetup:
    """Where a calibration's rollouts are saved (one file per model file in ComfyUI's user directory) and the
    fingerprint of what every rollout shares: the models, VAE and verifier as the prompt's graph builds them, the
    sampler settings, the negative conditioning, the input latent and how the verifier judges."""

    rollouts: SavedRollouts
    fingerprint: str

    @classmethod
    def of(cls, hidden, model_inputs: tuple[str, ...], settings: dict, negative, latent_image: dict,
           frames_per_candidate: int, rank_by: str, aspect_weights: str) -> _SavedSetup | None:
        """None outside a server run, whose prompt alone says how the models were built."""
        prompt, node_id = hidden.prompt, str(hidden.unique_id)
        if not prompt or node_id not in prompt:
            return None
        inputs = prompt[node_id]["inputs"]
        graph = {name: _upstream(prompt, inputs.get(name)) for name in (*model_inputs, "vae", "verifier")}
        model_file = _model_file(prompt, node_id, model_inputs[0]) or "model"
        path = os.path.join(folder_paths.get_user_directory(), ROLLOUTS_FOLDER,
                            re.sub(r"[^\w.-]", "_", os.path.basename(model_file)) + ".jsonl")
        return cls(SavedRollouts(path), fingerprint([graph, settings, negative, latent_image, frames_per_candidate,
                                                     rank_by, aspect_weights]))

    def key(self, prompt: CalibrationPrompt, seed: int, arm_settings: dict) -> str:
        return rollout_key(self.fingerprint, prompt.fingerprint, seed, arm_settings)


class _Rollouts:
    """Runs a calibration's rollouts one at a time on one progress bar (``run_stages``), scores each as it
    finishes, saves it at once (``saved``: a re-queued calibration reuses it) and keeps only its scores, seconds
    and call counts. An arm's scores of a prompt enter the store once all its seeds ran: a combined verifier
    normalises across them, as Combine Scores normalises across a search's drafts (an arm is a search of S
    drafts of each prompt)."""

    def __init__(self, node_id, plan: CalibrationPlan | ExpertsPlan, prompts: list[CalibrationPrompt], steps: int,
                 judge: _Judge, cost: str, saved: _SavedSetup | None, planned_arms: list[dict], rollouts: int):
        self.seeds, self.prompts, self.total = plan.seed_list, prompts, rollouts
        self.judge, self.saved = judge, saved
        self.announce = progress_text_sender(node_id) or (lambda text: None)
        self.steps = steps
        self.progress = SearchProgress(rollouts * steps)
        self.store = ScoreStore(None)
        self.done = self.reused = 0
        self.cost = cost
        self.start = time.perf_counter()
        found = sum(saved.rollouts.get(saved.key(prompt, seed, arm)) is not None
                    for arm in planned_arms for prompt in prompts for seed in self.seeds) if saved else 0
        self.announce(" ".join([f"calibrating: {cost}; {self.reuse_line(found)}",
                                *(saved.rollouts.problems if saved else ())]))

    def reuse_line(self, found: int) -> str:
        if self.saved is None:
            return "rollouts are not saved outside a server run"
        return f"{found} of these rollouts saved by an earlier run, reused ({self.total - found} to compute at most)"

    def run(self, arm: str, label: str, arm_settings: dict, recipe_of) -> None:
        """Every prompt's rollouts of ``arm`` on the plan's seeds, ``recipe_of(prompt)`` giving a prompt's
        trajectory."""
        for index, prompt in enumerate(self.prompts):
            recipe = recipe_of(prompt)
            where = f"prompt {index + 1} / {len(self.prompts)}, " if len(self.prompts) > 1 else ""
            rollouts = [self._rollout(arm, f"{label}, {where}", arm_settings, recipe, prompt, seed)
                        for seed in self.seeds]
            for seed, score, rollout in zip(self.seeds, self.judge.combine([r.scores for r in rollouts]), rollouts):
                self.store.add(arm, index, seed, score, rollout.seconds, calls=rollout.calls, skipped=rollout.skipped)

    def _rollout(self, arm: str, label: str, arm_settings: dict, recipe: StagedRecipe, prompt: CalibrationPrompt,
                 seed: int) -> SavedRollout:
        self.done += 1
        key = self.saved.key(prompt, seed, arm_settings) if self.saved is not None else None
        found = self.saved.rollouts.get(key) if key is not None else None
        if found is not None:
            self.reused += 1
            with self.progress.stage(recipe.steps):
                pass
            self.announce(f"rollout {self.done} / {self.total}: {label}seed {seed}: saved by an earlier run, reused "
                          f"({self.reused} so far)")
            return found
        self.announce(f"rollout {self.done} / {self.total}: {label}seed {seed} ({self.reused} reused so far)")
        full_compute = FullComputeCheck(_MODEL_INPUTS[len(recipe.stages)], _FULL_ARM_ADVICE) \
            if arm == FULL_ARM else None
        (state,) = run_stages(recipe, [CandidateState(seed, recipe.latent)], self.progress, full_compute=full_compute)
        draft = state.draft()
        rollout = SavedRollout(self.judge.score(state.latent, prompt.text), draft.seconds,
                               draft.calls_computed + draft.calls_skipped, draft.calls_skipped)
        if key is not None:
            self.saved.rollouts.add(key, rollout)
        return rollout

    def finish(self) -> None:
        """Fills the bar when fewer rollouts ran than it was sized for (the picks were not measured together)."""
        self.progress.finish()

    def header(self, settings: str, verifier, full_seconds: float) -> list[str]:
        prompts = (f"prompt {self.prompts[0].text!r}" if len(self.prompts) == 1 else
                   f"{len(self.prompts)} prompts ({self.prompts[0].text!r}, ...)")
        computed = self.done - self.reused
        saved = ([] if self.saved is None else
                 [f"saved rollouts: {self.reused} of {self.done} reused from an earlier run, {computed} computed now "
                  f"({self.saved.rollouts.path})", *self.saved.rollouts.problems])
        return [f"CachedSearch calibration: {prompts}, seeds {self.seeds[0]}-{self.seeds[-1]}, {settings}; verifier "
                f"{self.judge.name(verifier)}",
                f"cost: {self.cost}; took {time.perf_counter() - self.start:.1f} s (a full rollout "
                f"{full_seconds:.2f} s)", *saved, ""]


class _Judge:
    """Scores a rollout's latent decoded by the stock VAEDecode as the search's nodes score a draft: each verifier
    through its ``FrameJudge`` (K frames; VideoScore ranked by the same rank_by and weights as the VideoScore
    Verifier), several combined as Combine Scores combines them. Tried first on the input latent, so a verifier that
    cannot read the VAE's frames fails before any rollout is spent."""

    def __init__(self, vae, verifier, prompt: str, frames_per_candidate: int, latent_image: dict,
                 rank_by: str, aspect_weights: str):
        self.vae = vae
        self.combination = verifier if isinstance(verifier, VerifierCombination) else None
        self.judges = [FrameJudge(part, prompt, frames_per_candidate, rank_by, aspect_weights)
                       for part in (self.combination.verifiers if self.combination is not None else (verifier,))]
        self.decoder = comfy_nodes.VAEDecode()
        (frames,) = self.decoder.decode(vae, latent_image)
        for judge in self.judges:
            try:
                judge.score(frames)
            except comfy.model_management.InterruptProcessingException:
                raise
            except Exception as error:
                within = " (in the combined verifiers)" if self.combination is not None else ""
                raise ValueError(f"verifier: {judge.verifier.name}{within} could not score the frames this vae "
                                 f"decodes ({error}); connect a verifier and a VAE that belong together (a video "
                                 "model's VAE with ImageReward, a CLIP verifier or VideoScore)") from error

    def name(self, verifier) -> str:
        """The verifier's name, and how VideoScore ranks when not by its average."""
        ranked = next((judge for judge in self.judges if judge.watches_clips and judge.rank_by != AVERAGE), None)
        if ranked is None:
            return verifier.name
        weights = f" {', '.join(f'{w:g}' for w in ranked.weights.weights)}" if ranked.rank_by == "weighted" else ""
        return f"{verifier.name}, VideoScore ranked by {ranked.rank_by}{weights}"

    def score(self, latent: dict, prompt: str) -> tuple[float, ...]:
        """Each verifier's score of the rollout against ``prompt``."""
        (frames,) = self.decoder.decode(self.vae, latent)
        return tuple(dataclasses.replace(judge, prompt=prompt).score(frames)[0] for judge in self.judges)

    def combine(self, scores: list[tuple[float, ...]]) -> list[float]:
        """One score per rollout of an arm, from each rollout's verifier scores."""
        if self.combination is None:
            return [score for (score,) in scores]
        return self.combination.combine(scores)
