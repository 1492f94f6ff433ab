"""What every CachedSearch sampler node shares (the Sampler, Advanced, High/Low Experts and Distributed Sampler): the
seed and N, the optional inputs after its sampling settings, its outputs and panel, and the opening of its run.
A sampler node declares its own leading inputs and makes its recipe; ``SearchSamplerNode`` does the rest."""

from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core import MAX_CANDIDATES, candidate_seeds
from .budget_auto import auto_search
from .budget_search import run_budget_search
from .candidates import SearchCandidates, run_search
from .input_checks import check_latent, denoise_message
from .ksampler_inputs import ksampler_settings_inputs, stock_ksampler_input
from .panel_frames import decode_draft_frames, panel_rows, pruning_panel
from .prompt_server import progress_text_sender
from .saved_drafts import SAVE_DRAFTS_TOOLTIP, SavedDrafts
from .stages import KSamplerStage, StagedRecipe
from .types import ADVANCED_INPUT, SHOW_RESULTS_WHEN_CACHED, BudgetType, Candidates, PruningPlanType

_SEED_TOOLTIP = (
    "This search covers seeds seed ... seed + num_candidates - 1 (candidate i uses seed + i, so a stock KSampler "
    "with that seed reproduces it). Control after generate: randomize (the default) searches a fresh range each "
    "time you queue; fixed repeats this search; increment would repeat all but one of its seeds."
)
_CANDIDATES_TOOLTIP = (
    "How many seeds to explore (N): more seeds find a better winner, for one more draft each. What N keeps of full "
    "best-of-N's gain and what it costs against it, measured: this node's help page."
)


def search_inputs() -> list:
    """The seed range a sampler node searches: the first seed and N."""
    return [
        stock_ksampler_input("seed", tooltip=_SEED_TOOLTIP),
        io.Int.Input("num_candidates", default=8, min=1, max=MAX_CANDIDATES, tooltip=_CANDIDATES_TOOLTIP),
    ]


def ksampler_search_inputs(steps_tooltip: str) -> list:
    """The leading inputs of a sampler node that samples like KSampler (the Sampler, the Distributed Sampler)."""
    return [
        io.Model.Input("model", tooltip="Usually the output of CachedSearch Apply Cache; without a cache "
                       "the drafts cost as much as full rollouts."),
        io.Conditioning.Input("positive", tooltip="What the videos should show."),
        io.Conditioning.Input("negative", tooltip="What the videos should avoid."),
        io.Latent.Input("latent_image", tooltip="A batch-1 latent (empty video latent, or one with a "
                        "noise mask)."),
        *search_inputs(),
        *ksampler_settings_inputs(steps_tooltip),
    ]


def budget_input() -> io.Input:
    """The optional input of the search nodes that replaces num_candidates with a budget."""
    return BudgetType.Input(
        "budget", optional=True,
        tooltip="Optional: a CachedSearch Budget plan. When connected, num_candidates is ignored and the search "
        "drafts seeds seed, seed + 1, ... while the drafts plus one full recommit fit in what full best-of-M would "
        "cost (at most the plan's max_candidates). With a wall-time plan the chosen N depends on wall time. With a "
        "Pruning Plan connected too, the search takes the widest N whose pruning schedule and the recommit fit.",
    )


def optional_search_inputs(single_machine: bool = True) -> list:
    """The optional inputs after a sampler node's settings. Pruning and budgets decide from all drafts at once,
    which a search split across machines does not have until its workers finish: single-machine samplers only."""
    pruning = PruningPlanType.Input(
        "pruning", optional=True, tooltip="Optional, from CachedSearch Pruning Plan: stop every candidate at the "
        "prune step, score a preview there and continue only the best (what it saves, measured: the Pruning Plan's "
        "help page). Unconnected: every candidate runs to the end.")
    preview_vae = io.Vae.Input(
        "preview_vae", optional=True, tooltip="Optional: decode small previews of every draft to watch them on the "
        "panel (8 frames each, after the search; costs one VAE decode per draft). Unconnected: nothing extra is "
        "decoded.")
    save_drafts = io.Boolean.Input("save_drafts", default=True, optional=True, **ADVANCED_INPUT,
                                   tooltip=SAVE_DRAFTS_TOOLTIP)
    return [pruning, budget_input(), preview_vae, save_drafts] if single_machine else [preview_vae, save_drafts]


def search_outputs() -> list:
    return [
        io.Latent.Output(display_name="drafts", tooltip="The N drafts on the batch axis, in seed order."),
        Candidates.Output(display_name="candidates", tooltip="Seeds, settings and cache statistics for the "
                          "verifier and the recommit node."),
        io.String.Output(display_name="report", tooltip="Per-candidate seed, skipped calls and seconds."),
    ]


def sampler_schema(node_id: str, display_name: str, description: str, inputs: list, outputs: list | None = None,
                   **flags) -> io.Schema:
    """A sampler node's schema: its inputs, the search's outputs (or ``outputs``), the hidden inputs its saved
    drafts and progress line read; its results shown again when cached unless ``flags`` say otherwise."""
    return io.Schema(node_id=node_id, display_name=display_name, category="CachedSearch", description=description,
                     inputs=inputs, outputs=outputs or search_outputs(), hidden=[io.Hidden.unique_id, io.Hidden.prompt],
                     **(flags or SHOW_RESULTS_WHEN_CACHED))


def seed_range_message(seed, num_candidates) -> str | bool:
    """validate_inputs' answer for the seed range (values are None while they come from links)."""
    if seed is None or num_candidates is None:
        return True
    try:
        candidate_seeds(seed, num_candidates)
    except ValueError as error:
        return str(error)
    return True


def ksampler_search_message(seed, num_candidates, denoise) -> str | bool:
    """validate_inputs' answer for a sampler node that samples like KSampler: its denoise, then its seed range."""
    message = denoise_message(denoise)
    return seed_range_message(seed, num_candidates) if message is True else message


def ksampler_recipe(model, positive, negative, latent_image, steps, cfg, sampler_name, scheduler,
                    denoise) -> StagedRecipe:
    """The recipe of a sampler node that samples like KSampler: one stage."""
    stage = KSamplerStage(model, positive, negative, steps, cfg, sampler_name, scheduler, denoise)
    return StagedRecipe.single(stage, latent_image)


def explore(recipe: StagedRecipe, seed: int, num_candidates: int, announce, pruning, budget,
            saved: SavedDrafts | None = None, hidden=None) -> SearchCandidates:
    """The drafts of N seeds from ``seed``; pruned when a pruning plan is connected; as many seeds as a budget
    plan affords when one is connected (with a pruning plan too: the widest N whose schedule fits; on "auto", what
    a calibration of the setup the node's ``hidden`` prompt says chooses). Every search reuses and saves its drafts
    in ``saved``."""
    if pruning is not None and pruning.auto and budget is None:
        raise ValueError("schedule: got 'auto'; auto chooses the rounds for a budget: connect a CachedSearch Budget "
                         "to this sampler's budget input, or type a schedule")
    if budget is not None:
        if budget.auto or (pruning is not None and pruning.auto):
            return auto_search(recipe, seed, budget, pruning, announce, saved, hidden)
        if pruning is not None:
            return pruning.search_within(recipe, seed, budget, announce, saved)
        return run_budget_search(recipe, seed, budget, announce, saved=saved)
    seeds = candidate_seeds(seed, num_candidates)
    if pruning is None:
        return run_search(recipe, seeds, announce, saved)
    return pruning.search(recipe, seeds, announce, saved)


def search_output(candidates: SearchCandidates, preview_vae=None, announce=None) -> io.NodeOutput:
    """The sampler's outputs and its panel: every candidate's row (decoded frames with ``preview_vae``) and the
    search's cost against full best-of-N."""
    cost = candidates.cost()
    report = candidates.report(cost=cost)
    frames = decode_draft_frames(preview_vae, candidates, announce) if preview_vae is not None else None
    shown = {"text": (report,), "cachedsearch_drafts": panel_rows(candidates, frames=frames),
             "cachedsearch_cost": [{**cost.as_dict(), "cache": candidates.cache_description,
                                    "drafted_with_apply_cache": candidates.drafted_with_apply_cache,
                                    "drafts_saved": candidates.drafts_saved,
                                    "drafts_not_kept": candidates.drafts_not_kept}],
             **pruning_panel(candidates)}
    if candidates.budget is not None:
        shown["cachedsearch_budget"] = [candidates.budget.as_dict()]
    return io.NodeOutput(candidates.latent(candidates.draft_latents), candidates, report, ui=shown)


class SearchSamplerNode(io.ComfyNode):
    """A sampler node: ``open_run`` starts its run, ``search`` explores its recipe and shows the drafts."""

    @classmethod
    def open_run(cls, checked: str | bool, latent_image, save_drafts: bool, *drafted_from,
                 not_drafting: tuple[str, ...] = ()):
        """Refuses what the node's validate_inputs refuses (``checked``: its answer) and a latent of more than one;
        returns the node's progress-line sender and its saved drafts (keyed by ``drafted_from`` and the latent)."""
        if checked is not True:
            raise ValueError(checked)
        check_latent(latent_image)
        saved = SavedDrafts.for_node(cls.hidden, save_drafts, *drafted_from, latent_image, not_drafting=not_drafting)
        return progress_text_sender(cls.hidden.unique_id), saved

    @classmethod
    def search(cls, recipe: StagedRecipe, seed: int, num_candidates: int, announce, saved, pruning=None,
               budget=None, preview_vae=None) -> io.NodeOutput:
        return search_output(explore(recipe, seed, num_candidates, announce, pruning, budget, saved, cls.hidden),
                             preview_vae, announce)
