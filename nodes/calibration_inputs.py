"""The Calibrate nodes' inputs: their groups of widgets with their tooltips, and the plans their values make (the
nodes and the calibration-cost route build the very same plans)."""

from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core.calibration import (
    COMFYUI_ENGINES,
    DEFAULT_CAPTURE_TARGET,
    DEFAULT_SEEDS,
    CalibrationPlan,
    cache_window_problem,
    parse_taus,
)
from ..cachedsearch_core.calibration_experts import ExpertsPlan
from .ksampler_inputs import stock_range
from .types import ADVANCED_INPUT, CombinedVerifier, Verifier, VideoVerifier
from .verifier_inputs import frames_per_candidate_input, video_score_ranking_inputs


def scene_inputs() -> list:
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
        io.Int.Input("first_seed", **stock_range("seed"),
                     tooltip="The calibration uses seeds first_seed ... first_seed + seeds - 1. It stays fixed, so "
                     "queueing again reuses the calibration instead of recomputing it."),
        io.Int.Input("seeds", default=DEFAULT_SEEDS, min=1, max=64,
                     tooltip="S, how many seeds are compared (at least 2). 4 is cheap but its intervals are wide; 8 "
                     "gives a steadier recommendation at twice the cost."),
    ]


def judging_inputs() -> list:
    return [
        io.Float.Input("capture_target", default=DEFAULT_CAPTURE_TARGET, min=0.0, max=1.0, step=0.01,
                       tooltip="Share of best-of-S's gain (over a random seed) a tau must keep to be recommended. "
                       "0.90 is cautious; the audit's tau* uses 0.85."),
    ]


def ranking_inputs() -> list:
    """A VideoScore verifier judges as the search's VideoScore Verifier ranks, and a text encoder makes several
    prompts. Last, so a saved workflow's widget values keep their places."""
    return [*video_score_ranking_inputs(optional=True, **ADVANCED_INPUT),
            io.Clip.Input("clip", optional=True,
                          tooltip="A text encoder (CLIPLoader) to calibrate on several prompts: each line of prompt "
                          "is encoded as CLIPTextEncode encodes it, with negative shared. Leave positive unconnected "
                          "then.")]


def frames_input():
    return frames_per_candidate_input("K frames the verifier scores per rollout, as on the Verifier node (a "
                                      "VideoScore verifier reads up to this many, its max_frames).")


def cache_window_inputs(suffix: str = "", warmup: int = 5, cooldown: int = 5, whose: str = "") -> list:
    return [
        io.Int.Input(f"warmup_steps{suffix}", default=warmup, min=0, max=1000,
                     tooltip=f"Always-computed first steps{whose}, as on Apply Cache (use the value you will use)."),
        io.Int.Input(f"cooldown_steps{suffix}", default=cooldown, min=0, max=1000,
                     tooltip=f"Always-computed last steps{whose}, as on Apply Cache (use the value you will use)."),
    ]


def plan_message(make_plan) -> str | bool:
    """validate_inputs' answer for a plan built by ``make_plan()`` (True when it is valid)."""
    try:
        make_plan()
    except ValueError as error:
        return str(error)
    return True


def window_message(*windows) -> str | bool:
    """validate_inputs' answer for the cache windows of a calibration's stages, each (the stage's steps, warmup,
    cooldown, the inputs' suffix, whose steps): True when each leaves a step to skip or a value is not known yet.

    ComfyUI files a refusal from validate_inputs once under every input the method reads (execution.py's
    custom_validation_failed, one per argument, on 0.3.75 and 0.33 alike), so the node's one check shows as one
    error per input; the message says which two inputs to change (docs/gui.md)."""
    for steps, warmup, cooldown, suffix, whose in windows:
        problem = None if None in (steps, warmup, cooldown) else cache_window_problem(steps, warmup, cooldown,
                                                                                         suffix, whose)
        if problem:
            return (f"{problem}. Only warmup_steps{suffix} and cooldown_steps{suffix} need changing (when queued, "
                    "ComfyUI files this under each input the node checks)")
    return True


# The start and end of ComfyUI's EasyCache and LazyCache in a calibration: their nodes' defaults.
COMFYUI_CACHE_WINDOW = {"start_percent": 0.15, "end_percent": 0.95}


def thresholds_input(engine: str) -> str:
    return f"{engine.lower()}_thresholds"


def engine_inputs() -> list:
    """ComfyUI's own caches, measured on the same full rollouts. Last, so saved workflows keep their widgets."""
    return [io.String.Input(thresholds_input(engine), default="", optional=True, **ADVANCED_INPUT,
                            tooltip=f"{engine} reuse_threshold values to measure too, smallest first, separated by "
                            f"spaces (its node's range 0 to 3; start {COMFYUI_CACHE_WINDOW['start_percent']:g}, end "
                            f"{COMFYUI_CACHE_WINDOW['end_percent']:g}, its defaults). Each adds S cached rollouts per "
                            "prompt. Empty: not measured.")
            for engine in COMFYUI_ENGINES]


def _engine_plans(plan: CalibrationPlan, thresholds: dict[str, str]) -> list[CalibrationPlan]:
    """Our plan, then one per ComfyUI engine whose thresholds input is filled in."""
    return [plan, *(plan.for_engine(engine, parse_taus(text, thresholds_input(engine)), thresholds_input(engine))
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
