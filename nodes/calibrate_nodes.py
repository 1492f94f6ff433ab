"""CachedSearch Calibrate (one stage, and two experts): which tau keeps this verifier's ranking on this model and
prompt (or prompts, pooled as the audit pools them), and what it saves.

Each rollout runs through the search's own trajectory runner (``runner.run_stages``: one KSampler, or Wan 2.2
A14B's two KSamplerAdvanced; the full arm checked to compute every call), is decoded by the stock VAEDecode and
scored by the verifier nodes' own ``FrameJudge``; only its score and costs are kept, so one rollout is in memory
at a time. Both nodes build their plans from their inputs (``calibration_inputs``), run their rollouts through
``calibration_rollouts.Rollouts``, take their tables from ``cachedsearch_core.calibration`` (the audit's own
evaluation) and remember the result under the setup the prompt's graph says (``calibration_graph``). Every
finished rollout is saved at once in ComfyUI's user directory (``cachedsearch_core.saved_rollouts``), so a
calibration re-queued after Cancel, a crash or a restart computes only what is missing.
"""

from __future__ import annotations

import torch
from comfy_api.latest import io

from ..cachedsearch_core.audit import FULL_ARM, tau_arm
from ..cachedsearch_core.calibration import (
    COMFYUI_ENGINES,
    DEFAULT_TAUS,
    OUR_ENGINE,
    CalibrationPlan,
    RolloutCount,
    sweep_cost,
    sweep_rollouts,
)
from ..cachedsearch_core.calibration_experts import (
    EXPERTS,
    HIGH_NOISE,
    LOW_NOISE,
    ExpertsCalibration,
    expert_arm_prefix,
    together_arm,
)
from ..cachedsearch_core.auto_policy import WithPolicy
from ..cachedsearch_core.calibration_memory import experts_setup_key, setup_key
from ..cachedsearch_core.calibration_results import Calibration, EnginesCalibration
from ..cachedsearch_core.video_score import AVERAGE
from .auto_setup import calibrated_policy
from .calibration_graph import EXPERT_INPUTS, remember
from .calibration_inputs import (
    COMFYUI_CACHE_WINDOW,
    cache_window_inputs,
    calibrate_plans,
    engine_inputs,
    experts_plan,
    frames_input,
    judging_inputs,
    plan_message,
    ranking_inputs,
    scene_inputs,
    window_message,
)
from .calibration_rollouts import (
    Judge,
    Rollouts,
    SavedSetup,
    cached_model,
    calibration_prompts,
    comfyui_cached_model,
    stage_arm_settings,
)
from .input_checks import check_latent, check_same_latent_format, denoise_message, split_step_message
from .ksampler_inputs import expert_settings_inputs, ksampler_settings_inputs
from .stages import KSamplerStage, StagedRecipe, official_expert_stages
from .types import SHOW_RESULTS_WHEN_CACHED
from .verifier_inputs import DEFAULT_ASPECT_WEIGHTS

_SAVED = ("Every finished rollout is saved, so queueing it again after Cancel, a crash or a restart computes only "
          "the missing ones.")
_COST = ("It costs, per prompt, S full rollouts plus S cached rollouts per tau (defaults: 4 + 4 x 5 = 24 rollouts), "
         "each decoded and scored by the verifier; the node shows the cost of its settings under its widgets. "
         + _SAVED)
_EXPERTS_COST = ("It costs, per prompt, S full rollouts, S cached rollouts per tau of each expert and S with both "
                 "picks (defaults: 4 + 4 x (5 + 5) + 4 = 48 rollouts), each decoded and scored by the verifier; the "
                 "node shows the cost of its settings under its widgets. " + _SAVED)
_TAUS_TOOLTIP = ("The cache thresholds to measure, smallest first, separated by spaces (Apply Cache's range 0 to 2). "
                 "Each adds S cached rollouts.")


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
            "tau that skips most of those whose capture meets the target (0: keep the cache off, also when none of "
            f"them skips a call). {_COST} Wire the tau into Apply Cache. Advanced: also measure ComfyUI's EasyCache or "
            "LazyCache thresholds on the same full rollouts.",
            inputs=[
                io.Model.Input("model", tooltip="The diffusion model to calibrate (after LoRAs and ModelSamplingSD3), "
                               "without a cache: the node applies it itself on a copy."),
                *scene_inputs(),
                *ksampler_settings_inputs("Sampling steps, as you will search."),
                io.String.Input("taus", default=" ".join(f"{tau:.2f}" for tau in DEFAULT_TAUS),
                                tooltip=_TAUS_TOOLTIP),
                *judging_inputs(),
                *cache_window_inputs(),
                frames_input(),
                *ranking_inputs(),
                *engine_inputs(),
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
                        easycache_thresholds="", lazycache_thresholds="", steps=None, warmup_steps=None,
                        cooldown_steps=None):
        message = denoise_message(denoise)
        if message is not True:
            return message
        message = window_message((steps, warmup_steps, cooldown_steps, "", ""))
        if message is not True or None in (taus, seeds, first_seed, capture_target):
            return message
        return plan_message(lambda: calibrate_plans(taus, seeds, first_seed, capture_target,
                                                     easycache_thresholds=easycache_thresholds,
                                                     lazycache_thresholds=lazycache_thresholds))

    @classmethod
    def planned_rollouts(cls, inputs: dict, prompts: int) -> RolloutCount:
        """What a calibration with these widget values runs, from the very plans ``execute`` runs (the
        calibration-cost route's answer)."""
        return sweep_rollouts(calibrate_plans(inputs["taus"], inputs["seeds"], inputs["first_seed"],
                                              inputs["capture_target"], prompts, inputs["easycache_thresholds"],
                                              inputs["lazycache_thresholds"]))

    @classmethod
    def execute(cls, model, negative, latent_image, vae, verifier, prompt, first_seed, seeds, steps, cfg,
                sampler_name, scheduler, denoise, taus, capture_target, warmup_steps, cooldown_steps,
                frames_per_candidate, rank_by=AVERAGE, aspect_weights=DEFAULT_ASPECT_WEIGHTS, positive=None,
                clip=None, easycache_thresholds="", lazycache_thresholds="") -> io.NodeOutput:
        message = cls.validate_inputs(denoise=denoise, steps=steps, warmup_steps=warmup_steps,
                                      cooldown_steps=cooldown_steps)
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

        arms = {FULL_ARM: (stage_arm_settings(None, 0, 0),
                           recipe(lambda: cached_model(model, warmup_steps, cooldown_steps, None)))}
        for engine_plan in plans:
            for threshold in engine_plan.taus:
                if engine_plan.engine == OUR_ENGINE:
                    arms[engine_plan.arm(threshold)] = (stage_arm_settings(threshold, warmup_steps, cooldown_steps), recipe(
                        lambda tau=threshold: cached_model(model, warmup_steps, cooldown_steps, tau)))
                else:
                    arms[engine_plan.arm(threshold)] = (
                        {"engine": engine_plan.engine, "reuse_threshold": threshold, **COMFYUI_CACHE_WINDOW},
                        recipe(lambda engine=engine_plan.engine, value=threshold: comfyui_cached_model(model, engine,
                                                                                                 value)))
        setup = {"steps": steps, "cfg": cfg, "sampler_name": sampler_name, "scheduler": scheduler,
                 "denoise": denoise}
        saved = SavedSetup.of(cls.hidden, ("model",), setup, negative, latent_image, frames_per_candidate,
                               rank_by, aspect_weights)
        rollouts = Rollouts(cls.hidden.unique_id, plan, prompts, steps, Judge(
            vae, verifier, prompts[0].text, frames_per_candidate, latent_image, rank_by, aspect_weights),
            sweep_cost(plans, steps), saved, [settings for settings, _ in arms.values()],
            len(arms) * plan.prompts * plan.seeds)
        for arm, (settings, of_prompt) in arms.items():
            rollouts.run(arm, "full compute" if arm == FULL_ARM else arm, settings, of_prompt)
        calibration = (Calibration.from_store(rollouts.store, plan) if len(plans) == 1 else
                       EnginesCalibration.from_store(rollouts.store, plans))
        # What Budget "auto" chooses from: our cache's rollouts with their previews (plans[0] is ours).
        policy = calibrated_policy(cls.hidden, rollouts, plan, steps, rollouts.judge.preview_frames, warmup_steps,
                                   cooldown_steps) if plan.engine == OUR_ENGINE else None
        remembered = remember(cls.hidden, WithPolicy(calibration, policy),
                              lambda file: setup_key(file, steps, sampler_name, scheduler), "model")
        header = rollouts.header(f"{steps} steps, {sampler_name}/{scheduler}, cfg {cfg:g}, warmup {warmup_steps}, "
                                 f"cooldown {cooldown_steps}", verifier, calibration.full_seconds)
        engines = {"engine_rows": calibration.engine_rows(), "fastest": calibration.fastest_pick()} \
            if len(plans) > 1 else {}
        thresholds = [calibration.threshold(engine) if len(plans) > 1 else 0.0 for engine in COMFYUI_ENGINES]
        return _output(calibration, calibration.recommended_tau, plan, steps,
                       [*header, calibration.report(), *remembered], (calibration.recommended_tau,), thresholds,
                       {**engines, **_rollout_counts(rollouts)})


class CalibrateExperts(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchCalibrateExperts",
            display_name="CachedSearch Calibrate (two experts)",
            category="CachedSearch",
            description="CachedSearch Calibrate for a two-expert model such as Wan 2.2 A14B, sampled as the official "
            "two-KSamplerAdvanced graph (and CachedSearch Sampler (High/Low Experts)): each expert's taus are "
            "measured with the other expert at full compute, each expert gets the tau that skips most of those whose "
            "capture meets the target (0: keep its cache off), and both picks are then measured together. "
            f"{_EXPERTS_COST} Wire each tau into that expert's Apply Cache.",
            inputs=[
                io.Model.Input("model_high", tooltip="The high-noise expert (first steps), after LoRAs and "
                               "ModelSamplingSD3, without a cache: the node applies it itself on a copy."),
                io.Model.Input("model_low", tooltip="The low-noise expert (the remaining steps), likewise without a "
                               "cache."),
                *scene_inputs(),
                *expert_settings_inputs(
                    "Total sampling steps of both experts, as you will search (the official graph: 20).",
                    "The step where the low-noise expert takes over, as you will search (official: 10 of 20).",
                    "Classifier-free guidance scale of both experts (official: 3.5)."),
                io.String.Input("taus_high", default=" ".join(f"{tau:.2f}" for tau in DEFAULT_TAUS),
                                tooltip=f"The high-noise expert's taus. {_TAUS_TOOLTIP}"),
                io.String.Input("taus_low", default=" ".join(f"{tau:.2f}" for tau in DEFAULT_TAUS),
                                tooltip=f"The low-noise expert's taus. {_TAUS_TOOLTIP}"),
                *judging_inputs(),
                *cache_window_inputs("_high", 2, 1, " of the high-noise expert's steps"),
                *cache_window_inputs("_low", 1, 2, " of the low-noise expert's steps"),
                frames_input(),
                *ranking_inputs(),
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
                        steps=None, split_step=None, warmup_steps_high=None, cooldown_steps_high=None,
                        warmup_steps_low=None, cooldown_steps_low=None):
        message = split_step_message(steps, split_step)
        if message is True and None not in (steps, split_step):
            message = window_message(
                (split_step, warmup_steps_high, cooldown_steps_high, "_high", " of the high-noise expert"),
                (steps - split_step, warmup_steps_low, cooldown_steps_low, "_low", " of the low-noise expert"))
        if message is not True or None in (taus_high, taus_low, seeds, first_seed, capture_target):
            return message
        return plan_message(lambda: experts_plan(taus_high, taus_low, seeds, first_seed, capture_target))

    @classmethod
    def planned_rollouts(cls, inputs: dict, prompts: int) -> RolloutCount:
        """What a calibration with these widget values runs (the calibration-cost route's answer)."""
        return experts_plan(inputs["taus_high"], inputs["taus_low"], inputs["seeds"], inputs["first_seed"],
                            inputs["capture_target"], prompts).rollout_count()

    @classmethod
    def execute(cls, model_high, model_low, negative, latent_image, vae, verifier, prompt, first_seed, seeds,
                steps, split_step, cfg, sampler_name, scheduler, taus_high, taus_low, capture_target,
                warmup_steps_high, cooldown_steps_high, warmup_steps_low, cooldown_steps_low,
                frames_per_candidate, rank_by=AVERAGE, aspect_weights=DEFAULT_ASPECT_WEIGHTS, positive=None,
                clip=None) -> io.NodeOutput:
        message = cls.validate_inputs(steps=steps, split_step=split_step, warmup_steps_high=warmup_steps_high,
                                      cooldown_steps_high=cooldown_steps_high, warmup_steps_low=warmup_steps_low,
                                      cooldown_steps_low=cooldown_steps_low)
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
                    high.with_model(cached_model(model_high, warmup_steps_high, cooldown_steps_high, tau_high)),
                    low.with_model(cached_model(model_low, warmup_steps_low, cooldown_steps_low, tau_low))),
                    latent_image, EXPERTS)
            return of_prompt

        def settings(tau_high, tau_low):
            return {HIGH_NOISE: stage_arm_settings(tau_high, warmup_steps_high, cooldown_steps_high),
                    LOW_NOISE: stage_arm_settings(tau_low, warmup_steps_low, cooldown_steps_low)}

        arms = {FULL_ARM: (None, None),
                **{expert_arm_prefix(HIGH_NOISE) + tau_arm(tau): (tau, None) for tau in plan.high.taus},
                **{expert_arm_prefix(LOW_NOISE) + tau_arm(tau): (None, tau) for tau in plan.low.taus}}
        setup = {"steps": steps, "split_step": split_step, "cfg": cfg, "sampler_name": sampler_name,
                 "scheduler": scheduler}
        saved = SavedSetup.of(cls.hidden, tuple(EXPERT_INPUTS), setup, negative, latent_image,
                               frames_per_candidate, rank_by, aspect_weights)
        rollouts = Rollouts(cls.hidden.unique_id, plan, prompts, steps, Judge(
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
        remembered = remember(cls.hidden, calibration, lambda high_file, low_file: experts_setup_key(
            high_file, low_file, steps, split_step, sampler_name, scheduler), *EXPERT_INPUTS)
        header = rollouts.header(f"{steps} steps split at {split_step}, {sampler_name}/{scheduler}, cfg {cfg:g}, "
                                 f"warmup/cooldown high {warmup_steps_high}/{cooldown_steps_high}, low "
                                 f"{warmup_steps_low}/{cooldown_steps_low}", verifier, calibration.full_seconds)
        taus = (calibration.high.recommended_tau, calibration.low.recommended_tau)
        return _output(calibration, dict(zip(EXPERTS, taus)), plan.high, steps,
                       [*header, calibration.report(), *remembered], taus, (), _rollout_counts(rollouts))


def _rollout_counts(rollouts: Rollouts) -> dict:
    """How many rollouts the table rests on and how many of them an earlier run had saved (the panel says it)."""
    return {"rollouts": rollouts.done, "reused_rollouts": rollouts.reused}


def _output(calibration, recommended, plan: CalibrationPlan, steps, lines, taus, after_chart, shown_too=None
            ) -> io.NodeOutput:
    """The node's outputs (the taus, the report, the chart, then ``after_chart``) and its panel's table (with
    ``shown_too``)."""
    report = "\n".join(lines)
    chart = torch.from_numpy(calibration.chart()).float().div(255).unsqueeze(0)
    shown = {"text": (report,), "cachedsearch_calibration": [{
        "rows": calibration.rows(), "recommended_tau": recommended, "none_skipped": calibration.none_skipped,
        "capture_target": plan.capture_target, "seeds": plan.seeds, "prompts": plan.prompts, "steps": steps,
        "intervals": plan.has_intervals,
        **(shown_too or {})}]}
    return io.NodeOutput(*taus, report, chart, *after_chart, ui=shown)
