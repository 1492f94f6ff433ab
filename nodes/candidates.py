"""The CANDIDATES a search hands to the verifier and recommit nodes, and how a plain search makes them (the rows the
panels show of them: ``panel_frames``)."""

from __future__ import annotations

import dataclasses

import torch

from ..cachedsearch_core import CacheMode, Draft, Ranking, SearchCost, search_cost, search_report
from ..cachedsearch_core.budget import BudgetOutcome
from ..cachedsearch_core.pruned_budget import PrunedBudget
from ..cachedsearch_core.panels import candidate_number
from ..cachedsearch_core.pruning import PruningOutcome
from .cache_patch import step_cache_config
from .full_compute import cache_engines_on
from .packed_latent import join, one
from .runner import CandidateState, RunHooks, SearchProgress, run_stages
from .saved_drafts import SavedDrafts
from .stages import StagedRecipe


# The report's cache line for a search on one model without a cache, or with it off.
NO_CACHE_DESCRIPTION = "no cache on this model: drafts cost as much as full rollouts"
CACHE_OFF_DESCRIPTION = "cache off: drafts cost as much as full rollouts"


def _describe_stage_cache(model) -> tuple[str, str]:
    """A stage's cache as a staged report names it, and as a one-stage search's own cache line says it."""
    config = step_cache_config(model)
    if config is None:
        engines = [engine.describe(model) for engine in cache_engines_on(model)]
        if not engines:
            return "no cache", NO_CACHE_DESCRIPTION
        # A foreign cache's skips are counted by CachedSearch's own meter, as its own cache's are.
        counted = f"{' + '.join(engines)}, skipped calls counted by CachedSearch"
        return counted, counted
    if config.mode is CacheMode.OFF:
        return "cache off", CACHE_OFF_DESCRIPTION
    setting = f"tau {config.tau:g}" if config.mode is CacheMode.ADAPTIVE else f"every {config.static_interval} steps"
    cached = f"cache {config.mode.value} {setting} (warmup {config.warmup_steps}, cooldown {config.cooldown_steps})"
    return cached, cached


def describe_cache(recipe: StagedRecipe) -> str:
    descriptions = [_describe_stage_cache(stage.patcher) for stage in recipe.stages]
    if len(descriptions) > 1:
        return "; ".join(f"{name}: {staged}" for name, (staged, _) in zip(recipe.names, descriptions))
    return descriptions[0][1]


@dataclasses.dataclass(frozen=True)
class SearchCandidates:
    """What the sampler hands to the verifier and recommit nodes (type CACHEDSEARCH_CANDIDATES)."""

    recipe: StagedRecipe
    drafts: tuple[Draft, ...]
    # [N, ...] in seed order, exactly the sampler's LATENT output (LTX-2: video and audio packed, ``packed_latent``)
    draft_latents: torch.Tensor
    cache_description: str
    # The stock output latent's entries besides the samples (a noise mask, ...), as drafts and keep deliver them.
    latent_entries: dict = dataclasses.field(default_factory=dict)
    # Set by a pruned search: the drafts are its survivors, this records the prune step and the dropped candidates.
    pruning: PruningOutcome | None = None
    # Set by a fixed-budget search: the width it chose and the costs it predicted (a pruned one: from its schedule).
    budget: BudgetOutcome | PrunedBudget | None = None
    # Set by a pruned search: the temp images (/view references) of the frames its Pruning Plan decoded to score
    # each candidate's preview, for the panels (seed order, every candidate).
    pruning_previews: tuple[tuple[dict, ...], ...] = ()
    # What was found wrong with the saved drafts (a file set aside, a torn line), for the report.
    notes: tuple[str, ...] = ()
    # Every draft is saved on disk (``saved_drafts``): a re-executed search reads them back, a pick never re-drafts.
    drafts_saved: bool = False
    # Set when drafts could not be written to disk (``SavedDrafts.not_kept_line``), for the Sampler's panel.
    drafts_not_kept: str | None = None

    @property
    def seeds(self) -> list[int]:
        return [draft.seed for draft in self.drafts]

    def __len__(self) -> int:
        return len(self.drafts)

    @property
    def first_seed(self) -> int:
        return self.pruning.seeds[0] if self.pruning is not None else self.drafts[0].seed

    @property
    def candidate_numbers(self) -> list[int]:
        """Each draft's candidate number: its place in the search's seed order, which a pruned search's survivors
        keep (candidate k has seed first_seed + k - 1)."""
        return [candidate_number(draft.seed, self.first_seed) for draft in self.drafts]

    @property
    def drafted_with_apply_cache(self) -> bool:
        """The drafts ran with CachedSearch's own cache, tuned on Apply Cache (warmup, cooldown, tau), rather than
        ComfyUI's caches or none: what the panels advise when the cache skipped too little."""
        return any(step_cache_config(stage.patcher) is not None for stage in self.recipe.stages)

    @property
    def stage_names(self) -> tuple[str, ...]:
        """The stages' names where a trajectory has several (the experts), else none."""
        return self.recipe.names if len(self.recipe.stages) > 1 else ()

    def cost(self) -> SearchCost:
        """The search's cost before any commit: the commit predicted a full rollout, or free when every draft
        already is its seed's full-compute result (whichever wins is delivered as it is)."""
        commit_free = all(self.draft_is_full_compute(index) for index in range(len(self.drafts)))
        return search_cost(self.drafts, self.pruning, self.budget, commit_free, self.stage_names)

    def report(self, ranking: Ranking | None = None, cost: SearchCost | None = None) -> str:
        """The search report with ``cost`` (this search's, after what delivered it; before a commit by default)."""
        cost = cost if cost is not None else self.cost()
        lines = search_report(self.drafts, self.cache_description, cost, ranking, self.stage_names,
                              numbers=self.candidate_numbers).splitlines()
        if self.pruning is not None:
            lines = [*lines[:1], *self.pruning.report_lines(), *lines[1:]]
        if self.budget is not None:
            lines += self.budget.lines(cost)
        return "\n".join([*lines, *self.notes])

    def draft_is_full_compute(self, index: int, models: tuple = ()) -> bool:
        """Whether the draft of ``self.drafts[index]`` already is what committing its seed would sample, so a commit
        can deliver it without sampling again: its cache skipped no transformer call, this process drafted it, it
        ran the recipe's own stock calls (a pruned search that split a stage at a round's step ran two calls where the
        commit runs one, and multistep samplers do not resume a split exactly), and the commit uses the drafts' models
        (``models`` from ``StagedRecipe.commit_models``: each unconnected, or the very model its stage ran on)."""
        if not self.drafts[index].skipped_nothing:
            return False
        if any(model is not None and model is not stage.patcher for model, stage in zip(models, self.recipe.stages)):
            return False
        return self.pruning is None or all(step in self.recipe.stage_boundaries for step in self.pruning.round_steps)

    def latent(self, samples: torch.Tensor) -> dict:
        return {**self.latent_entries, "samples": samples}

    def draft_latent(self, index: int) -> torch.Tensor:
        """A copy of ``self.drafts[index]``'s samples (every part of a packed latent), a batch of one."""
        return one(self.draft_latents, index)


def candidates_from_states(recipe: StagedRecipe, states: list[CandidateState], **record) -> SearchCandidates:
    """The CANDIDATES of finished ``states`` (seed order), with a pruned or budget search's ``record``."""
    entries = {key: value for key, value in states[0].latent.items() if key not in ("samples", "batch_index")}
    return SearchCandidates(recipe, tuple(state.draft for state in states),
                            join(state.latent["samples"] for state in states), describe_cache(recipe),
                            entries, **record)


def run_search(recipe: StagedRecipe, seeds: list[int], announce=None,
               saved: SavedDrafts | None = None) -> SearchCandidates:
    """Generate one draft per seed through all stages (``run_stages``). ``announce(text)``, if given, receives
    "draft i / N" (prefixed by the stage on a staged search) as each candidate's stage starts. With ``saved``, a
    seed whose draft an earlier run saved is read back instead, and each computed draft is saved as it finishes."""
    reused = {}
    if saved is not None:
        reused = {seed: state for seed in seeds if (state := saved.reused_state(seed, recipe.latent)) is not None}
        if announce is not None:
            announce(saved.announcement(len(reused), len(seeds)))
    missing = [seed for seed in seeds if seed not in reused]
    progress = SearchProgress(len(missing) * recipe.steps)
    computed = run_stages(recipe, [CandidateState.start(seed, recipe.latent) for seed in missing], progress,
                          hooks=RunHooks(announce, on_finished=saved.save if saved is not None else None))
    by_seed = {**reused, **{state.seed: state for state in computed}}
    if saved is None:
        return candidates_from_states(recipe, [by_seed[seed] for seed in seeds])
    return candidates_from_states(recipe, [by_seed[seed] for seed in seeds], notes=saved.notes(),
                                  drafts_saved=saved.holds(seeds), drafts_not_kept=saved.not_kept_line())
