"""A candidate's trajectory as stock sampling calls: the stages and the recipe that chains them.

A candidate's trajectory is an ordered list of stages; each stage is one call of the function a stock node runs
(``nodes.common_ksampler`` for KSampler and KSamplerAdvanced, SamplerCustomAdvanced's ``execute`` with RandomNoise),
fed the previous stage's output latent exactly as a stock graph wires it. Noise and latent preparation are therefore
ComfyUI's own, whatever the runtime does, and a draft with nothing skipped and the recommitted winner equal the
stock graph bit for bit. A KSampler is the one-stage case; Wan 2.2 A14B's two KSamplerAdvanced nodes (high-noise
expert, then low-noise expert) are two stages.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Protocol

import nodes as comfy_nodes
import torch
from comfy_extras.nodes_custom_sampler import Noise_EmptyNoise, Noise_RandomNoise, SamplerCustomAdvanced

from .full_compute import full_compute_model


# Recommit's inputs for the two experts of a Wan 2.2 A14B trajectory, in stage order.
EXPERT_MODEL_INPUTS = ("model_high", "model_low")


class Stage(Protocol):
    """One stock sampling call of a trajectory, minus the seed and the input latent."""

    @property
    def patcher(self): ...

    @property
    def step_count(self) -> int: ...

    def with_model(self, model) -> Stage: ...

    def run(self, latent: dict, seed: int) -> dict: ...


@dataclasses.dataclass(frozen=True)
class KSamplerStage:
    """The arguments of ``nodes.common_ksampler`` minus seed and latent: a stock KSampler with the defaults,
    a KSamplerAdvanced with disable_noise = add_noise "disable", start/last step, and force_full_denoise =
    return_with_leftover_noise "disable"."""

    model: object
    positive: list
    negative: list
    steps: int
    cfg: float
    sampler_name: str
    scheduler: str
    denoise: float = 1.0
    disable_noise: bool = False
    start_step: int | None = None
    last_step: int | None = None
    force_full_denoise: bool = False

    @property
    def patcher(self):
        return self.model

    @property
    def step_count(self) -> int:
        """The sampler steps this call runs (what its progress callback counts)."""
        last = self.steps if self.last_step is None else min(self.last_step, self.steps)
        return max(last - (self.start_step or 0), 0)

    def with_model(self, model) -> KSamplerStage:
        return dataclasses.replace(self, model=model)

    def run(self, latent: dict, seed: int) -> dict:
        (output,) = comfy_nodes.common_ksampler(
            self.model, seed, self.steps, self.cfg, self.sampler_name, self.scheduler, self.positive, self.negative,
            latent, denoise=self.denoise, disable_noise=self.disable_noise, start_step=self.start_step,
            last_step=self.last_step, force_full_denoise=self.force_full_denoise,
        )
        return output


@dataclasses.dataclass(frozen=True)
class CustomSamplerStage:
    """The inputs of a stock SamplerCustomAdvanced with RandomNoise (DisableNoise without ``add_noise``, as the
    second of two chained SamplerCustomAdvanced nodes), minus the seed and the latent."""

    guider: object
    sampler: object
    sigmas: torch.Tensor
    add_noise: bool = True

    @property
    def patcher(self):
        return self.guider.model_patcher

    @property
    def step_count(self) -> int:
        return self.sigmas.shape[-1] - 1

    def with_model(self, model) -> CustomSamplerStage:
        # A shallow copy: the guider node's own object keeps its model and options.
        guider = copy.copy(self.guider)
        guider.model_patcher = model
        guider.model_options = model.model_options
        return dataclasses.replace(self, guider=guider)

    def run(self, latent: dict, seed: int) -> dict:
        noise = Noise_RandomNoise(seed) if self.add_noise else Noise_EmptyNoise()
        output = SamplerCustomAdvanced.execute(noise, self.guider, self.sampler, self.sigmas, latent)
        return output.result[0]


@dataclasses.dataclass(frozen=True)
class StagedRecipe:
    """A candidate's whole trajectory for any seed: the input latent and the stages it runs through, in order.
    ``stage_names`` label the stages in reports (e.g. "high noise", "low noise")."""

    stages: tuple[Stage, ...]
    latent: dict
    stage_names: tuple[str, ...] = ()

    @classmethod
    def single(cls, stage: Stage, latent: dict) -> StagedRecipe:
        return cls((stage,), latent)

    @property
    def steps(self) -> int:
        return sum(stage.step_count for stage in self.stages)

    @property
    def names(self) -> tuple[str, ...]:
        return self.stage_names or tuple(f"stage {index + 1}" for index in range(len(self.stages)))

    @property
    def stage_starts(self) -> tuple[int, ...]:
        """The trajectory step where each stage starts; every other stage-step figure is derived from these."""
        starts, step = [], 0
        for stage in self.stages:
            starts.append(step)
            step += stage.step_count
        return tuple(starts)

    @property
    def stage_boundaries(self) -> tuple[int, ...]:
        """The steps where one stage hands over to the next (a two-expert trajectory: its split step)."""
        return self.stage_starts[1:]

    def stage_at(self, step: int) -> int:
        """The index of the stage that runs ``step`` (at a boundary, the stage that ends there)."""
        return next((index for index, start in enumerate(self.stage_starts)
                     if step <= start + self.stages[index].step_count), len(self.stages) - 1)

    @property
    def model_inputs(self) -> tuple[str, ...]:
        """Recommit's input that can replace each stage's model: ``model`` for a trajectory on one model, the
        experts' ``model_high`` and ``model_low`` for two."""
        if len({id(stage.patcher) for stage in self.stages}) == 1:
            return ("model",) * len(self.stages)
        return EXPERT_MODEL_INPUTS[: len(self.stages)] if len(self.stages) == len(EXPERT_MODEL_INPUTS) else \
            tuple(f"{name} model" for name in self.names)

    def commit_models(self, **connected) -> tuple:
        """Each stage's model for a commit: what is connected to its Recommit input (``model_inputs``), else None
        (the stage's own). Raises naming an input this trajectory cannot use."""
        inputs = self.model_inputs
        for name, model in connected.items():
            if model is not None and name not in inputs:
                usable = " and ".join(dict.fromkeys(inputs))
                ran = "on one model" if inputs[0] == "model" else \
                    f"{len(self.stages)} stages on different models ({', '.join(self.names)})"
                raise ValueError(f"{name}: this search ran {ran}; connect {usable} instead, or leave {name} "
                                 "unconnected")
        return tuple(connected.get(name) for name in inputs)

    def without_cache(self, models: tuple = ()) -> StagedRecipe:
        """Every stage on a clone of its model (or of ``models[i]`` where given, from ``commit_models``) without any
        step cache CachedSearch knows (``full_compute_model``)."""
        models = (*models, *(None,) * (len(self.stages) - len(models)))
        return dataclasses.replace(self, stages=tuple(
            stage.with_model(full_compute_model(model if model is not None else stage.patcher))
            for stage, model in zip(self.stages, models)
        ))


def official_expert_stages(model_high, model_low, positive, negative, steps: int, split_step: int, cfg: float,
                           sampler_name: str, scheduler: str) -> tuple[KSamplerStage, KSamplerStage]:
    """Wan 2.2 A14B's official graph as two stages: add_noise enable / return_with_leftover_noise enable on the
    high-noise expert up to split_step, then disable / disable on the low-noise expert to the end."""
    shared = dict(positive=positive, negative=negative, steps=steps, cfg=cfg, sampler_name=sampler_name,
                  scheduler=scheduler)
    high = KSamplerStage(model_high, **shared, start_step=0, last_step=split_step)
    low = KSamplerStage(model_low, **shared, disable_noise=True, start_step=split_step, last_step=steps,
                        force_full_denoise=True)
    return high, low
