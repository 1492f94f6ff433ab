"""The search loop over ComfyUI's samplers, and the CANDIDATES it hands on.

A recipe replays one generation for any seed exactly as the stock node would
(KSampler or SamplerCustomAdvanced), so a draft with nothing skipped and the
recommitted winner equal that node's output bit for bit.
"""

from __future__ import annotations

import copy
import dataclasses
import time

import comfy.model_management
import comfy.sample
import comfy.utils
import latent_preview
import torch

from ..cachedsearch_core import Draft, Ranking, SearchCost, search_report
from .cache_patch import STATISTICS_CALLBACK_OPTION, detach_step_cache, step_cache_config


def _prepare(model, latent: dict, seed: int):
    """Latent and noise as KSampler/SamplerCustomAdvanced prepare them for ``seed``."""
    latent_image = comfy.sample.fix_empty_latent_channels(model, latent["samples"])
    noise = comfy.sample.prepare_noise(latent_image, seed, latent.get("batch_index"))
    return latent_image, noise


@dataclasses.dataclass(frozen=True)
class KSamplerRecipe:
    """The inputs of a stock KSampler, minus the seed."""

    model: object
    positive: list
    negative: list
    latent: dict
    steps: int
    cfg: float
    sampler_name: str
    scheduler: str
    denoise: float

    @property
    def patcher(self):
        return self.model

    def with_model(self, model) -> KSamplerRecipe:
        return dataclasses.replace(self, model=model)

    def sample(self, seed: int, callback) -> torch.Tensor:
        latent_image, noise = _prepare(self.model, self.latent, seed)
        return comfy.sample.sample(
            self.model, noise, self.steps, self.cfg, self.sampler_name, self.scheduler, self.positive,
            self.negative, latent_image, denoise=self.denoise, noise_mask=self.latent.get("noise_mask"),
            callback=callback, disable_pbar=not comfy.utils.PROGRESS_BAR_ENABLED, seed=seed,
        )


@dataclasses.dataclass(frozen=True)
class CustomSamplerRecipe:
    """The inputs of a stock SamplerCustomAdvanced with RandomNoise, minus the seed."""

    guider: object
    sampler: object
    sigmas: torch.Tensor
    latent: dict

    @property
    def steps(self) -> int:
        return self.sigmas.shape[-1] - 1

    @property
    def patcher(self):
        return self.guider.model_patcher

    def with_model(self, model) -> CustomSamplerRecipe:
        # A shallow copy: the guider node's own object keeps its model and options.
        guider = copy.copy(self.guider)
        guider.model_patcher = model
        guider.model_options = model.model_options
        return dataclasses.replace(self, guider=guider)

    def sample(self, seed: int, callback) -> torch.Tensor:
        latent_image, noise = _prepare(self.patcher, self.latent, seed)
        samples = self.guider.sample(
            noise, latent_image, self.sampler, self.sigmas, denoise_mask=self.latent.get("noise_mask"),
            callback=callback, disable_pbar=not comfy.utils.PROGRESS_BAR_ENABLED, seed=seed,
        )
        return samples.to(comfy.model_management.intermediate_device())


Recipe = KSamplerRecipe | CustomSamplerRecipe


class SearchProgress:
    """One progress bar over candidates x steps, with KSampler's live latent previews."""

    def __init__(self, model, num_candidates: int, steps: int):
        self.steps = steps
        self.total = num_candidates * steps
        self.previewer = latent_preview.get_previewer(model.load_device, model.model.latent_format)
        self.bar = comfy.utils.ProgressBar(self.total)

    def callback_for(self, candidate_index: int):
        offset = candidate_index * self.steps

        def callback(step, x0, x, total_steps):
            preview = self.previewer.decode_latent_to_preview_image("JPEG", x0) if self.previewer else None
            self.bar.update_absolute(offset + step + 1, self.total, preview)

        return callback


def describe_cache(model) -> str:
    config = step_cache_config(model)
    if config is None:
        return "no cache on this model: drafts cost as much as full rollouts"
    if config.mode.value == "off":
        return "cache off: drafts cost as much as full rollouts"
    setting = f"tau {config.tau:g}" if config.mode.value == "adaptive" else f"every {config.static_interval} steps"
    return (f"cache {config.mode.value} {setting} (warmup {config.warmup_steps}, "
            f"cooldown {config.cooldown_steps})")


@dataclasses.dataclass(frozen=True)
class SearchCandidates:
    """What the sampler hands to the verifier and recommit nodes (type CACHEDSEARCH_CANDIDATES)."""

    recipe: Recipe
    drafts: tuple[Draft, ...]
    draft_latents: torch.Tensor  # [N, ...] in seed order, exactly the sampler's LATENT output
    cache_description: str

    @property
    def seeds(self) -> list[int]:
        return [draft.seed for draft in self.drafts]

    def __len__(self) -> int:
        return len(self.drafts)

    def report(self, ranking: Ranking | None = None, mode: str | None = None, commit_seconds=None) -> str:
        return search_report(self.drafts, self.cache_description, ranking, mode, commit_seconds)

    def relative_cost(self, commit_seconds: float | None) -> float | None:
        """This search's cost relative to full best-of-N, when a commit measured C_f."""
        if not commit_seconds:
            return None
        mean_draft = sum(draft.seconds for draft in self.drafts) / len(self.drafts)
        return SearchCost(len(self.drafts), mean_draft, commit_seconds).relative_cost


def draft_rows(candidates: SearchCandidates, ranking: Ranking | None = None) -> list[dict]:
    """Per-candidate data for the frontend panels (JSON-ready)."""
    rows = []
    for index, draft in enumerate(candidates.drafts):
        calls = draft.calls_computed + draft.calls_skipped
        row = {"candidate": index + 1, "seed": draft.seed, "seconds": round(draft.seconds, 3),
               "skipped": draft.calls_skipped, "calls": calls}
        if ranking is not None:
            row.update(score=ranking.scores[index], winner=index == ranking.winner)
            if ranking.columns:
                row["columns"] = {name: values[index] for name, values in ranking.columns}
        rows.append(row)
    return rows


def progress_text_sender(node_id):
    """A function that shows a line of text on the node in the GUI, or None outside a server run."""
    try:
        from server import PromptServer
    except ImportError:
        return None
    server = getattr(PromptServer, "instance", None)
    if server is None or node_id is None:
        return None
    return lambda text: server.send_progress_text(text, node_id)


def run_search(recipe: Recipe, seeds: list[int], announce=None) -> SearchCandidates:
    """Generate one draft per seed, one at a time, each with fresh cache state.

    ``announce(text)``, if given, receives "draft i / N" as each draft starts.
    """
    run_statistics = []
    observed_model = recipe.patcher.clone()
    observed_model.model_options["transformer_options"][STATISTICS_CALLBACK_OPTION] = run_statistics.append
    observed = recipe.with_model(observed_model)
    progress = SearchProgress(recipe.patcher, len(seeds), recipe.steps)
    drafts, latents = [], []
    for index, seed in enumerate(seeds):
        if announce is not None:
            announce(f"draft {index + 1} / {len(seeds)} (seed {seed})")
        run_statistics.clear()
        start = time.perf_counter()
        latents.append(observed.sample(seed, progress.callback_for(index)))
        seconds = time.perf_counter() - start
        drafts.append(Draft(
            seed=seed, seconds=seconds,
            calls_computed=sum(s.calls_computed for s in run_statistics),
            calls_skipped=sum(s.calls_skipped for s in run_statistics),
        ))
    return SearchCandidates(recipe, tuple(drafts), torch.cat(latents), describe_cache(recipe.patcher))


def commit(candidates: SearchCandidates, winner: int, model=None) -> tuple[torch.Tensor, float]:
    """Regenerate the winner's seed at full compute: the cache removed, on a clone."""
    recipe = candidates.recipe.with_model(detach_step_cache(model if model is not None else candidates.recipe.patcher))
    progress = SearchProgress(recipe.patcher, 1, recipe.steps)
    start = time.perf_counter()
    samples = recipe.sample(candidates.drafts[winner].seed, progress.callback_for(0))
    return samples, time.perf_counter() - start
