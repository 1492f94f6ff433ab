"""The pruning preview's ComfyUI part (the kind, its saved tensor and where it is scored are declared in
``cachedsearch_core.previews``): capturing the sampler's x0 estimate during a rollout, decoding a few frames of it
and scoring them. The pruned search (``pruned_search``, ``pruning_nodes``) and Calibrate (``calibration_rollouts``)
both go through here, so a preview Calibrate records is the one a pruned search scores for the same seed."""

from __future__ import annotations

import dataclasses
import hashlib
import statistics
import time

import comfy.model_management
import comfy.utils
import torch

from ..cachedsearch_core import CacheMode
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
        active = config is not None and config.mode is not CacheMode.OFF
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


def video_part(model, estimate: torch.Tensor) -> torch.Tensor:
    """``estimate`` itself, or the video of LTX-2's [video, audio] estimate, which the sampler hands over flattened
    and packed into one tensor (the shapes it packed are on ``model`` while it samples)."""
    shapes = getattr(model, "latent_shapes", None) or ()
    return comfy.utils.unpack_latents(estimate, shapes)[0] if len(shapes) > 1 else estimate


def decode_previews(vae, model, estimates: list[torch.Tensor], preview_frames: int) -> list[torch.Tensor]:
    """Each x0 estimate's ``preview_frames`` evenly spaced frames ([1, C, T, H, W] in ``model``'s sampling space)
    as images [K, H, W, 3], each latent frame decoded on its own (as a clip's first frame): K one-frame clips per
    estimate instead of the whole video, all of them in one decode call (the VAE decodes each clip alone). Image
    latents are decoded whole, one call each. Of LTX-2's packed [video, audio] estimate, the video is previewed."""
    latents = [video_part(model, model.process_latent_out(estimate)) for estimate in estimates]
    if latents[0].ndim != 5:
        return [vae.decode(latent) for latent in latents]
    picks = preview_frame_indices(latents[0].shape[2], preview_frames)
    # [E * K, C, 1, H, W]: one clip per picked frame of each estimate
    clips = torch.cat([latent[0, :, picks].movedim(1, 0).unsqueeze(2) for latent in latents])
    images = vae.decode(clips)
    return list(images.reshape(-1, *images.shape[-3:]).split(len(picks)))


@dataclasses.dataclass(frozen=True)
class PreviewScorer:
    """Decodes an x0 estimate's ``frames`` preview frames with ``vae`` and scores them with each of ``judges`` (as
    the Verifier scores a draft's frames)."""

    vae: object
    judges: tuple[FrameJudge, ...]
    frames: int

    def decode(self, model, estimates: list[torch.Tensor]) -> list[torch.Tensor]:
        """Per estimate in ``model``'s sampling space, its decoded preview frames, all in one decode call."""
        comfy.model_management.throw_exception_if_processing_interrupted()
        return decode_previews(self.vae, model, estimates, self.frames)

    def judged(self, frames: torch.Tensor) -> tuple[float, ...]:
        """Each judge's score of one preview's decoded frames."""
        return tuple(judge.score(frames)[0] for judge in self.judges)

    def score(self, model, estimates: list[torch.Tensor]) -> list[tuple[tuple[float, ...], torch.Tensor]]:
        """Per estimate, each judge's score of its preview and the decoded frames."""
        return [(self.judged(frames), frames) for frames in self.decode(model, estimates)]


def content_digest(tensor: torch.Tensor) -> str:
    """A digest of the tensor's exact content (dtype, shape and every bit): equal digests, bit-identical tensors."""
    data = tensor.detach().contiguous().reshape(-1).cpu().view(torch.uint8).numpy()
    return hashlib.sha256(f"{tensor.dtype} {tuple(tensor.shape)} ".encode() + data.tobytes()).hexdigest()


# At most this many x0 estimates are decoded in one VAE call by Calibrate, each call's frames judged before the next:
# the frames held stay bounded whatever the seeds (K frames of 832x480, 4.8 MB each, so 153 MB for 8 estimates at
# K = 4), and the VAE's fixed cost per call is already shared 8 ways.
DECODED_TOGETHER = 8
# A calibration's first estimates decoded one per call, each timed: their median prices every preview.
TIMED_ALONE = 5


class ScoredPreviews:
    """The previews one calibration has scored, by all a score depends on: the scorer (VAE, judges with their prompt,
    frames), the latent format the estimate is decoded from and the estimate's exact content. Every tau of a seed
    samples the warmup alike, and one that skips nothing before a prune step samples it as a smaller tau does, so
    many cached rollouts reach a prune step with bit-identical x0 estimates: each is decoded and judged once. Each
    keeps the seconds a pruned search would pay for it (a search shares none), so a rollout's record prices every
    preview as a search does; ``previews`` counts those recorded, ``verifier_calls`` and ``seconds`` what the
    calibration really spent on them."""

    def __init__(self):
        self._scored: dict[tuple, tuple[tuple[float, ...], float]] = {}
        self._alone: list[float] = []  # the seconds of each estimate decoded alone, which price every preview
        self.previews = self.verifier_calls = 0
        self.seconds = 0.0

    def scores(self, scorer: PreviewScorer, model, estimates: list[torch.Tensor]
               ) -> list[tuple[tuple[float, ...], float]]:
        """Per estimate in ``model``'s sampling space, each judge's score and the seconds a pruned search pays for
        it; the estimates not scored before are decoded together (a few VAE calls instead of one each) and judged."""
        start = time.perf_counter()
        keys = [(scorer, type(model.latent_format), content_digest(estimate)) for estimate in estimates]
        unseen = {key: estimate for key, estimate in zip(keys, estimates) if key not in self._scored}
        if unseen:
            self._score(scorer, model, unseen)
        self.previews += len(keys)
        self.seconds += time.perf_counter() - start
        return [self._scored[key] for key in keys]

    def _score(self, scorer: PreviewScorer, model, unseen: dict[tuple, torch.Tensor]) -> None:
        keys, estimates = list(unseen), list(unseen.values())
        # A pruned search decodes each candidate's estimate in a call of its own: the calibration's first few
        # estimates are decoded alone and timed, and the median of those calls' seconds, with each preview's own
        # verifier calls, prices every preview. A median of several: one timed call takes whatever else the machine
        # ran at that moment (on a shared machine one call priced a calibration's previews at three times their
        # usual cost).
        alone = min(len(estimates), max(TIMED_ALONE - len(self._alone), 0))
        decoded = []
        for estimate in estimates[:alone]:
            start = time.perf_counter()
            decoded += scorer.decode(model, [estimate])
            self._alone.append(time.perf_counter() - start)
        price = statistics.median(self._alone)
        self._judge(scorer, keys[:alone], decoded, price)
        for first in range(alone, len(estimates), DECODED_TOGETHER):
            together = slice(first, first + DECODED_TOGETHER)
            self._judge(scorer, keys[together], scorer.decode(model, estimates[together]), price)

    def _judge(self, scorer: PreviewScorer, keys: list[tuple], decoded: list[torch.Tensor],
               decode_seconds: float) -> None:
        """Each decoded preview judged and kept, priced at ``decode_seconds`` and its own verifier calls' seconds."""
        for key, frames in zip(keys, decoded, strict=True):
            start = time.perf_counter()
            scores = scorer.judged(frames)
            self._scored[key] = (scores, decode_seconds + time.perf_counter() - start)
            self.verifier_calls += len(scores)


class RolloutCapture:
    """What a rollout's previews need, captured while it runs through ``run_stages``: at each of ``steps`` the x0
    estimate of the sampler's last call before it, and the transformer calls computed before it. Run the recipe
    ``recipe()`` returns with ``on_computed_call`` among ``run_stages``' hooks."""

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
                # kept off the GPU while it waits for the other seeds of the prompt (scored together)
                self.estimates[step + 1] = args["denoised"].detach().to(
                    comfy.model_management.intermediate_device(), copy=True)
        return keep

    def computed_before(self, step: int) -> int:
        return sum(computed for call_step, computed in self.calls if call_step < step)

    def model_at(self, step: int):
        """The model whose sampling space the estimate at ``step`` is in."""
        return preview_model(self._recipe, step)


def previews_of(captures: list[RolloutCapture], scorer: PreviewScorer, scored: ScoredPreviews
                ) -> list[RolloutPreviews]:
    """Each capture's previews (a prompt's seeds on one arm), each content scored once in the calibration
    (``scored``): the estimates of all the captures decoded together, per model (the steps of one stage share its
    sampling space), and judged one at a time, as a pruned search judges them. A record's seconds: what a pruned
    search pays for its previews."""
    by_model: dict[object, list[tuple[int, int]]] = {}  # the (capture, step) pairs of each model
    for number, capture in enumerate(captures):
        for step in capture.steps:
            by_model.setdefault(capture.model_at(step), []).append((number, step))
    results = {}
    for model, points in by_model.items():
        estimates = [captures[number].estimates[step] for number, step in points]
        results.update(zip(points, scored.scores(scorer, model, estimates), strict=True))
    return [RolloutPreviews(X0_PREVIEW.name, capture.steps,
                            tuple(results[number, step][0] for step in capture.steps),
                            tuple(capture.computed_before(step) for step in capture.steps),
                            sum(results[number, step][1] for step in capture.steps))
            for number, capture in enumerate(captures)]
