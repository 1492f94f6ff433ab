"""The pruning preview's ComfyUI part (the kind, its saved tensor and where it is scored are declared in
``cachedsearch_core.previews``): capturing the sampler's x0 estimate during a rollout, decoding a few frames of it
and scoring them. The pruned search (``pruned_search``, ``pruning_nodes``) and Calibrate (``calibration_rollouts``)
both go through here, so a preview Calibrate records is the one a pruned search scores for the same seed."""

from __future__ import annotations

import dataclasses
import time

import comfy.model_management
import torch

from ..cachedsearch_core.judge import FrameJudge
from ..cachedsearch_core.previews import X0_PREVIEW, RolloutPreviews
from ..cachedsearch_core.pruning import CacheWindow, preview_frame_indices
from ..cachedsearch_core.step_cache import step_of_sigma
from .cache_patch import step_cache_config
from .stages import Stage, StagedRecipe


def cache_windows(recipe: StagedRecipe) -> list[CacheWindow]:
    """Each stage's steps in the whole trajectory with its cache's always-computed warmup and cooldown (none for a
    stage without an active cache): where a preview may prune."""
    windows = []
    for stage, name, first_step in zip(recipe.stages, recipe.names, recipe.stage_starts, strict=True):
        config = step_cache_config(stage.patcher)
        active = config is not None and config.mode.value != "off"
        windows.append(CacheWindow(first_step, stage.step_count, config.warmup_steps if active else 0,
                                   config.cooldown_steps if active else 0, name))
    return windows


def keeping_x0(stage: Stage, keep) -> Stage:
    """The stage on a clone of its model whose post-CFG hook hands each sampler call's arguments to ``keep`` (its
    x0 estimate is ``args["denoised"]``) and returns the estimate unchanged (the sampling result is the stock
    one)."""
    model = stage.patcher.clone()

    def hook(args):
        keep(args)
        return args["denoised"]

    model.set_model_sampler_post_cfg_function(hook)
    return stage.with_model(model)


def preview_model(recipe: StagedRecipe, step: int):
    """The model whose sampling space an x0 estimate at ``step`` is in (the VAE decodes what the sampler outputs)."""
    return recipe.stages[recipe.stage_at(step)].patcher.model


def decode_preview(vae, model, estimate: torch.Tensor, preview_frames: int) -> torch.Tensor:
    """``preview_frames`` evenly spaced frames of the x0 ``estimate`` ([1, C, T, H, W] in ``model``'s sampling
    space) as images [K, H, W, 3], each latent frame decoded on its own (as a clip's first frame): K one-frame
    decodes instead of the whole video. An image latent is decoded whole."""
    latent = model.process_latent_out(estimate)
    if latent.ndim != 5:
        return vae.decode(latent)
    picks = preview_frame_indices(latent.shape[2], preview_frames)
    frames = latent[0, :, picks].movedim(1, 0).unsqueeze(2)  # [K, C, 1, H, W]: one clip per picked frame
    images = vae.decode(frames)
    return images.reshape(-1, *images.shape[-3:])


@dataclasses.dataclass(frozen=True)
class PreviewScorer:
    """Decodes an x0 estimate's ``frames`` preview frames with ``vae`` and scores them with each of ``judges`` (as
    the Verifier scores a draft's frames)."""

    vae: object
    judges: tuple[FrameJudge, ...]
    frames: int

    def score(self, model, estimate: torch.Tensor) -> tuple[tuple[float, ...], torch.Tensor]:
        """Each judge's score of the estimate's preview, and the decoded frames."""
        comfy.model_management.throw_exception_if_processing_interrupted()
        frames = decode_preview(self.vae, model, estimate, self.frames)
        return tuple(judge.score(frames)[0] for judge in self.judges), frames


class RolloutCapture:
    """What a rollout's previews need, captured while it runs through ``run_stages``: at each of ``steps`` the x0
    estimate of the sampler's last call before it, and the transformer calls computed before it. Run the recipe
    ``recipe()`` returns with ``on_computed_call`` given to ``run_stages``."""

    def __init__(self, recipe: StagedRecipe, steps: tuple[int, ...]):
        self.steps, self._recipe = steps, recipe
        self.estimates: dict[int, torch.Tensor] = {}
        self.calls: list[tuple[int, int]] = []  # (step, computed transformer calls) per sampler call
        self._computed = 0

    def on_computed_call(self) -> None:
        self._computed += 1

    def recipe(self) -> StagedRecipe:
        stages = tuple(keeping_x0(stage, self._keeper(first)) for stage, first
                       in zip(self._recipe.stages, self._recipe.stage_starts))
        return dataclasses.replace(self._recipe, stages=stages)

    def _keeper(self, first_step: int):
        def keep(args):
            # The step as the step cache counts it (heun's second call counts in the step it ends).
            sigmas = sorted(args["model_options"]["transformer_options"]["sample_sigmas"].tolist())
            step = first_step + step_of_sigma(sigmas, float(args["sigma"].flatten()[0]))
            self.calls.append((step, self._computed))
            self._computed = 0
            if step + 1 in self.steps:
                self.estimates[step + 1] = args["denoised"].detach().clone()
        return keep

    def computed_before(self, step: int) -> int:
        return sum(computed for call_step, computed in self.calls if call_step < step)

    def previews(self, scorer: PreviewScorer) -> RolloutPreviews:
        """Every captured step's preview scored (one decode and one call per judge each)."""
        start, scores = time.perf_counter(), []
        for step in self.steps:
            scores.append(scorer.score(preview_model(self._recipe, step), self.estimates[step])[0])
        return RolloutPreviews(X0_PREVIEW.name, self.steps, tuple(scores),
                               tuple(self.computed_before(step) for step in self.steps), time.perf_counter() - start)
