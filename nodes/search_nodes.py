from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core import MAX_CANDIDATES, Ranking, candidate_seeds, parse_scores
from ..cachedsearch_core.pick import VERIFIERS_CHOICE, resolve_pick, with_pick_line
from .budget_nodes import budget_input
from .budget_search import run_budget_search
from .input_checks import check_latent, check_same_latent_format, denoise_message, split_step_message
from .panel_frames import decode_draft_frames, panel_rows
from .pick import commit_pick, pick_choices, wait_for_click
from .candidates import SearchCandidates, pruned_rows, run_search
from .ksampler_inputs import expert_settings_inputs, ksampler_settings_inputs, stock_ksampler_input
from .runner import progress_text_sender
from .saved_drafts import SAVE_DRAFTS_TOOLTIP, SavedDrafts
from .stages import CustomSamplerStage, KSamplerStage, StagedRecipe, official_expert_stages
from .types import ADVANCED_INPUT, SHOW_RESULTS_WHEN_CACHED, Candidates, PruningPlanType, RankingType

_SEED_TOOLTIP = (
    "This search covers seeds seed ... seed + num_candidates - 1 (candidate i uses seed + i, so a stock KSampler "
    "with that seed reproduces it). Control after generate: randomize (the default) searches a fresh range each "
    "time you queue; fixed repeats this search; increment would repeat all but one of its seeds."
)
_CANDIDATES_TOOLTIP = (
    "How many seeds to explore (N): more seeds find a better winner, for one more draft each. What N keeps of full "
    "best-of-N's gain and what it costs against it, measured: this node's help page."
)


def _search_inputs() -> list:
    return [
        stock_ksampler_input("seed", tooltip=_SEED_TOOLTIP),
        io.Int.Input("num_candidates", default=8, min=1, max=MAX_CANDIDATES, tooltip=_CANDIDATES_TOOLTIP),
    ]


def _pruning_input():
    return PruningPlanType.Input("pruning", optional=True, tooltip="Optional, from CachedSearch Pruning Plan: stop "
                                 "every candidate at the prune step, score a preview there and continue only the best "
                                 "(what it saves, measured: the Pruning Plan's help page). Unconnected: every "
                                 "candidate runs to the end.")


def _explore(recipe: StagedRecipe, seed: int, num_candidates: int, announce, pruning, budget,
             saved: SavedDrafts | None = None) -> SearchCandidates:
    """The drafts of N seeds from ``seed``; pruned when a pruning plan is connected; as many seeds as a budget
    plan affords when one is connected (with a pruning plan too: the widest N whose schedule fits). Every search
    reuses and saves its drafts in ``saved``."""
    if budget is not None:
        if pruning is not None:
            return pruning.search_within(recipe, seed, budget, announce, saved)
        return run_budget_search(recipe, seed, budget, announce, saved=saved)
    seeds = candidate_seeds(seed, num_candidates)
    if pruning is None:
        return run_search(recipe, seeds, announce, saved)
    return pruning.search(recipe, seeds, announce, saved)


def _preview_vae_input():
    return io.Vae.Input("preview_vae", optional=True, tooltip="Optional: decode small previews of every draft to "
                        "watch them on the panel (8 frames each, after the search; costs one VAE decode per "
                        "draft). Unconnected: nothing extra is decoded.")


def _save_drafts_input():
    return io.Boolean.Input("save_drafts", default=True, optional=True, **ADVANCED_INPUT, tooltip=SAVE_DRAFTS_TOOLTIP)


def _search_outputs() -> list:
    return [
        io.Latent.Output(display_name="drafts", tooltip="The N drafts on the batch axis, in seed order."),
        Candidates.Output(display_name="candidates", tooltip="Seeds, settings and cache statistics for the "
                          "verifier and the recommit node."),
        io.String.Output(display_name="report", tooltip="Per-candidate seed, skipped calls and seconds."),
    ]


def _seed_range_message(seed, num_candidates) -> str | bool:
    """validate_inputs' answer for the seed range (values are None while they come from links)."""
    if seed is None or num_candidates is None:
        return True
    try:
        candidate_seeds(seed, num_candidates)
    except ValueError as error:
        return str(error)
    return True


def search_output(candidates: SearchCandidates, preview_vae=None, announce=None) -> io.NodeOutput:
    """The sampler's outputs and its panel: every candidate's row (decoded frames with ``preview_vae``) and the
    search's cost against full best-of-N."""
    cost = candidates.cost()
    report = candidates.report(cost=cost)
    frames = decode_draft_frames(preview_vae, candidates, announce) if preview_vae is not None else None
    shown = {"text": (report,), "cachedsearch_drafts": panel_rows(candidates, frames=frames),
             "cachedsearch_cost": [{**cost.as_dict(), "cache": candidates.cache_description,
                                    "drafts_saved": candidates.drafts_saved,
                                    "drafts_not_kept": candidates.drafts_not_kept}]}
    if candidates.pruning is not None:
        shown["cachedsearch_pruned"] = pruned_rows(candidates)
        shown["cachedsearch_pruning"] = [candidates.pruning.as_dict()]
    if candidates.budget is not None:
        shown["cachedsearch_budget"] = [candidates.budget.as_dict()]
    return io.NodeOutput(candidates.latent(candidates.draft_latents), candidates, report, ui=shown)


class SearchSampler(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchSampler",
            display_name="CachedSearch Sampler",
            category="CachedSearch",
            description="Best-of-N exploration: samples num_candidates seeds one by one like KSampler, on the "
            "cached model, for a verifier to rank. Recommit then re-generates only the winner at full compute.",
            inputs=[
                io.Model.Input("model", tooltip="Usually the output of CachedSearch Apply Cache; without a cache "
                               "the drafts cost as much as full rollouts."),
                io.Conditioning.Input("positive", tooltip="What the videos should show."),
                io.Conditioning.Input("negative", tooltip="What the videos should avoid."),
                io.Latent.Input("latent_image", tooltip="A batch-1 latent (empty video latent, or one with a "
                                "noise mask)."),
                *_search_inputs(),
                *ksampler_settings_inputs("Sampling steps per candidate."),
                _pruning_input(),
                budget_input(),
                _preview_vae_input(),
                _save_drafts_input(),
            ],
            outputs=_search_outputs(),
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def validate_inputs(cls, seed=None, num_candidates=None, denoise=None):
        message = denoise_message(denoise)
        return _seed_range_message(seed, num_candidates) if message is True else message

    @classmethod
    def execute(cls, model, positive, negative, latent_image, seed, num_candidates, steps, cfg, sampler_name,
                scheduler, denoise, pruning=None, budget=None, preview_vae=None, save_drafts=True) -> io.NodeOutput:
        message = cls.validate_inputs(seed, num_candidates, denoise)
        if message is not True:
            raise ValueError(message)
        check_latent(latent_image)
        stage = KSamplerStage(model, positive, negative, steps, cfg, sampler_name, scheduler, denoise)
        announce = progress_text_sender(cls.hidden.unique_id)
        saved = SavedDrafts.for_node(cls.hidden, save_drafts, positive, negative, latent_image)
        return search_output(_explore(StagedRecipe.single(stage, latent_image), seed, num_candidates, announce,
                                       pruning, budget, saved), preview_vae, announce)


class SearchSamplerAdvanced(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchSamplerAdvanced",
            display_name="CachedSearch Sampler (Advanced)",
            category="CachedSearch",
            description="The best-of-N exploration of CachedSearch Sampler over custom-sampling parts, like "
            "SamplerCustomAdvanced with RandomNoise: for guiders (BasicGuider, CFGGuider) and explicit sigmas.",
            inputs=[
                io.Guider.Input("guider", tooltip="BasicGuider / CFGGuider on the cached model."),
                io.Sampler.Input("sampler", tooltip="From KSamplerSelect or another sampler node."),
                io.Sigmas.Input("sigmas", tooltip="From BasicScheduler or another scheduler node."),
                io.Latent.Input("latent_image", tooltip="A batch-1 latent."),
                *_search_inputs(),
                _pruning_input(),
                budget_input(),
                _preview_vae_input(),
                _save_drafts_input(),
            ],
            outputs=_search_outputs(),
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def validate_inputs(cls, seed=None, num_candidates=None):
        return _seed_range_message(seed, num_candidates)

    @classmethod
    def execute(cls, guider, sampler, sigmas, latent_image, seed, num_candidates, pruning=None,
                budget=None, preview_vae=None, save_drafts=True) -> io.NodeOutput:
        message = _seed_range_message(seed, num_candidates)
        if message is not True:
            raise ValueError(message)
        check_latent(latent_image)
        if sigmas.shape[-1] < 2:
            raise ValueError("sigmas: needs at least two values (one step); check the scheduler node's steps")
        recipe = StagedRecipe.single(CustomSamplerStage(guider, sampler, sigmas), latent_image)
        announce = progress_text_sender(cls.hidden.unique_id)
        saved = SavedDrafts.for_node(cls.hidden, save_drafts, sigmas, latent_image)
        return search_output(_explore(recipe, seed, num_candidates, announce, pruning, budget, saved), preview_vae,
                              announce)


class SearchSamplerExperts(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchSamplerExperts",
            display_name="CachedSearch Sampler (High/Low Experts)",
            category="CachedSearch",
            description="Best-of-N exploration on a two-expert model such as Wan 2.2 A14B: each candidate runs the "
            "official two-KSamplerAdvanced graph (the high-noise expert adds the seed's noise and samples up to "
            "split_step, the low-noise expert finishes), each expert with its own cache. Recommit replays the "
            "winner's two stages uncached, exactly as the stock graph with that seed.",
            inputs=[
                io.Model.Input("model_high", tooltip="The high-noise expert (first steps), usually through its own "
                               "CachedSearch Apply Cache; a higher tau suits it better than the low-noise expert."),
                io.Model.Input("model_low", tooltip="The low-noise expert (the remaining steps), usually through its "
                               "own CachedSearch Apply Cache; without one this stage computes every call."),
                io.Conditioning.Input("positive", tooltip="What the videos should show (both experts)."),
                io.Conditioning.Input("negative", tooltip="What the videos should avoid (both experts)."),
                io.Latent.Input("latent_image", tooltip="A batch-1 latent (EmptyHunyuanLatentVideo, or the latent "
                                "of WanImageToVideo)."),
                *_search_inputs(),
                *expert_settings_inputs(
                    "Total sampling steps of both experts together (the official graph: 20).",
                    "The step where the low-noise expert takes over (official: 10 of 20; 2 of 4 with the 4-step "
                    "LoRAs). Warmup and cooldown count within each expert's steps.",
                    "Classifier-free guidance scale of both experts (official: 3.5; 1.0 with the 4-step LoRAs)."),
                _pruning_input(),
                budget_input(),
                _preview_vae_input(),
                _save_drafts_input(),
            ],
            outputs=_search_outputs(),
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def validate_inputs(cls, seed=None, num_candidates=None, steps=None, split_step=None):
        message = split_step_message(steps, split_step)
        return message if message is not True else _seed_range_message(seed, num_candidates)

    @classmethod
    def execute(cls, model_high, model_low, positive, negative, latent_image, seed, num_candidates, steps,
                split_step, cfg, sampler_name, scheduler, pruning=None, budget=None,
                preview_vae=None, save_drafts=True) -> io.NodeOutput:
        message = cls.validate_inputs(seed, num_candidates, steps, split_step)
        if message is not True:
            raise ValueError(message)
        check_latent(latent_image)
        check_same_latent_format(model_high, model_low)
        recipe = StagedRecipe(official_expert_stages(model_high, model_low, positive, negative, steps, split_step,
                                                     cfg, sampler_name, scheduler),
                              latent_image, ("high noise", "low noise"))
        announce = progress_text_sender(cls.hidden.unique_id)
        saved = SavedDrafts.for_node(cls.hidden, save_drafts, positive, negative, latent_image)
        return search_output(_explore(recipe, seed, num_candidates, announce, pruning, budget, saved), preview_vae,
                              announce)


class RankingFromScores(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchRankingFromScores",
            display_name="CachedSearch Ranking From Scores",
            category="CachedSearch",
            description="Builds the ranking for Recommit from scores any other node or person produced, one per "
            "candidate in seed order. The highest score wins; ties go to the lower seed.",
            inputs=[
                Candidates.Input("candidates", tooltip="From the CachedSearch sampler."),
                io.String.Input("scores", multiline=True, default="",
                                tooltip="One number per candidate, separated by commas, spaces or new lines."),
            ],
            outputs=[RankingType.Output(display_name="ranking", tooltip="Scores and winner for Recommit.")],
        )

    @classmethod
    def execute(cls, candidates, scores) -> io.NodeOutput:
        ranking = Ranking(parse_scores(scores), verifier="given scores")
        ranking.check_matches(len(candidates))
        return io.NodeOutput(ranking)


class Recommit(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchRecommit",
            display_name="CachedSearch Recommit",
            category="CachedSearch",
            description="Delivers the verifier's winner, or the candidate you pick. commit re-generates its seed at "
            "full compute without the cache: exactly what a stock sampler makes with that seed. keep returns the "
            "cached draft (cheaper, slightly damped motion).",
            inputs=[
                Candidates.Input("candidates", tooltip="From the CachedSearch sampler."),
                RankingType.Input("ranking", optional=True,
                                  tooltip="From the verifier (or Ranking From Scores): its winner is delivered while "
                                  "pick is 0. Unconnected: you are the verifier, so set pick."),
                io.Combo.Input("mode", options=["commit", "keep"], default="commit",
                               tooltip="commit: full-compute re-generation of the chosen candidate (recommended). "
                               "keep: its cached draft, no extra compute (not for a pruned candidate)."),
                io.Model.Input("model", optional=True,
                               tooltip="Model to commit with (its cache is removed on a copy). Defaults to the "
                               "model the drafts were sampled with. Connect the model before a cache CachedSearch "
                               "does not know (a First-Block cache, a TeaCache) so the commit is full compute. "
                               "After a search on two experts use model_high and model_low instead."),
                io.Int.Input("pick", default=0, min=0, max=MAX_CANDIDATES, optional=True,
                             tooltip="0: deliver the verifier's choice. k: deliver candidate k, the k-th seed from "
                             "the sampler's seed (pruned candidates count too). Commit this / Keep this on a draft "
                             "sets it and queues again; ComfyUI's cache serves the search, so only this node runs."),
                io.Int.Input("pick_among", default=0, min=0, max=MAX_CANDIDATES, optional=True, **ADVANCED_INPUT,
                             tooltip="How many candidates the pick was made among (set with the pick). When it "
                             "differs from this search's, the run stops instead of delivering another search's "
                             "seed. 0: not checked."),
                # Not advanced: the artist's way to pick in the same run must show without "Show advanced inputs".
                io.Boolean.Input("wait_for_pick", default=False, optional=True,
                                 tooltip="Pause this run at Recommit until you click Commit this or Keep this on a "
                                 "draft (the verifier's choice is pre-selected). Only while pick is 0; Cancel "
                                 "stops the wait. Off: never waits (API and batch runs)."),
                io.Int.Input("pick_timeout", default=0, min=0, max=86400, optional=True, **ADVANCED_INPUT,
                             tooltip="Seconds to wait for your click before the pre-selected candidate is "
                             "delivered; 0: wait as long as it takes."),
                # Last, so the sockets of workflows saved before them keep their places.
                io.Model.Input("model_high", optional=True,
                               tooltip="After a search on two experts (High/Low Experts sampler): the high-noise "
                               "expert to commit with, before any cache CachedSearch does not know. Unconnected: "
                               "the expert the drafts ran on, its known caches removed on a copy."),
                io.Model.Input("model_low", optional=True,
                               tooltip="After a search on two experts: the low-noise expert to commit with, likewise."),
            ],
            outputs=[
                io.Latent.Output(display_name="latent", tooltip="The delivered video latent."),
                io.Int.Output(display_name="seed", tooltip="The delivered seed; a stock KSampler (for two "
                              "experts: the first KSamplerAdvanced) with it reproduces the committed video."),
                io.String.Output(display_name="report", tooltip="The whole search: scores, skips, cost, who "
                                 "picked."),
            ],
            hidden=[io.Hidden.unique_id],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def fingerprint_inputs(cls, wait_for_pick=False, pick=VERIFIERS_CHOICE, **_):
        # A run that waits for a click must run again whenever it is queued: the click is not an input.
        return float("nan") if _waits(wait_for_pick, pick) else False

    @classmethod
    def execute(cls, candidates, mode, ranking=None, model=None, pick=VERIFIERS_CHOICE, pick_among=0,
                wait_for_pick=False, pick_timeout=0, model_high=None, model_low=None) -> io.NodeOutput:
        models = candidates.recipe.commit_models(model=model, model_high=model_high, model_low=model_low)
        choices = pick_choices(candidates)
        choices.check_among(pick_among)
        verifier_winner = None
        if ranking is not None:
            ranking.check_matches(len(candidates))
            verifier_winner = ranking.winner
        if _waits(wait_for_pick, pick):
            pick, mode = wait_for_click(choices, choices.preselected(verifier_winner), mode, pick_timeout,
                                        cls.hidden.unique_id)
        picked = resolve_pick(choices, pick, mode, verifier_winner, pick_among)
        if mode == "keep":
            kept = candidates.draft_latent(picked.draft_index)
            delivered, cost = candidates.latent(kept), candidates.cost().after_keep()
        else:
            committed = commit_pick(candidates, picked, models)
            delivered, cost = committed.latent, candidates.cost().after_commit(committed.calls, committed.seconds)
        report = with_pick_line(candidates.report(ranking, cost), picked, commit_free=cost.commit_free)
        # The Sampler's cost model with this delivery: its calls with the commit lead, the seconds follow.
        delivery = picked.delivery_fields(len(choices)) | {"num_candidates": len(choices), "cost": cost.as_dict()}
        if candidates.budget is not None:
            measured = candidates.budget.measured(cost)
            delivery["budget"] = candidates.budget.as_dict() | {
                "measured_commit": measured[0] if measured is not None else None}
        return io.NodeOutput(delivered, picked.seed, report,
                             ui={"text": (report,), "cachedsearch_delivery": [delivery]})


def _waits(wait_for_pick, pick) -> bool:
    """A set pick is a choice already made: only the verifier's choice (pick 0) waits for a click."""
    return bool(wait_for_pick) and pick == VERIFIERS_CHOICE
