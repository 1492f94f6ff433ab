"""The search nodes of one machine: the three samplers (``sampler_node`` holds what they share), Ranking From
Scores, and Recommit, which delivers the winner or the artist's pick."""

from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core import MAX_CANDIDATES, Ranking, parse_scores
from ..cachedsearch_core.pick import VERIFIERS_CHOICE, resolve_pick, with_pick_line
from .input_checks import check_same_latent_format, split_step_message
from .ksampler_inputs import expert_settings_inputs
from .pick import commit_pick, pick_choices, wait_for_click
from .second_stage import second_stage_calls
from .sampler_node import (
    SearchSamplerNode,
    ksampler_recipe,
    ksampler_search_inputs,
    ksampler_search_message,
    optional_search_inputs,
    sampler_schema,
    search_inputs,
    seed_range_message,
)
from .stages import CustomSamplerStage, StagedRecipe, official_expert_stages
from .types import ADVANCED_INPUT, SHOW_RESULTS_WHEN_CACHED, Candidates, RankingType


class SearchSampler(SearchSamplerNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return sampler_schema(
            "CachedSearchSampler", "CachedSearch Sampler",
            "Best-of-N exploration: samples num_candidates seeds one by one like KSampler, on the cached model, for a "
            "verifier to rank. Recommit then re-generates only the winner at full compute.",
            [*ksampler_search_inputs("Sampling steps per candidate."), *optional_search_inputs()])

    @classmethod
    def validate_inputs(cls, seed=None, num_candidates=None, denoise=None):
        return ksampler_search_message(seed, num_candidates, denoise)

    @classmethod
    def execute(cls, model, positive, negative, latent_image, seed, num_candidates, steps, cfg, sampler_name,
                scheduler, denoise, pruning=None, budget=None, preview_vae=None, save_drafts=True) -> io.NodeOutput:
        announce, saved = cls.open_run(cls.validate_inputs(seed, num_candidates, denoise), latent_image,
                                       save_drafts, positive, negative)
        recipe = ksampler_recipe(model, positive, negative, latent_image, steps, cfg, sampler_name, scheduler,
                                 denoise)
        return cls.search(recipe, seed, num_candidates, announce, saved, pruning, budget, preview_vae)


class SearchSamplerAdvanced(SearchSamplerNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return sampler_schema(
            "CachedSearchSamplerAdvanced", "CachedSearch Sampler (Advanced)",
            "The best-of-N exploration of CachedSearch Sampler over custom-sampling parts, like "
            "SamplerCustomAdvanced with RandomNoise: for guiders (BasicGuider, CFGGuider) and explicit sigmas.",
            [
                io.Guider.Input("guider", tooltip="BasicGuider / CFGGuider on the cached model."),
                io.Sampler.Input("sampler", tooltip="From KSamplerSelect or another sampler node."),
                io.Sigmas.Input("sigmas", tooltip="From BasicScheduler or another scheduler node."),
                io.Latent.Input("latent_image", tooltip="A batch-1 latent."),
                *search_inputs(),
                *optional_search_inputs(),
            ])

    @classmethod
    def validate_inputs(cls, seed=None, num_candidates=None):
        return seed_range_message(seed, num_candidates)

    @classmethod
    def execute(cls, guider, sampler, sigmas, latent_image, seed, num_candidates, pruning=None,
                budget=None, preview_vae=None, save_drafts=True) -> io.NodeOutput:
        announce, saved = cls.open_run(cls.validate_inputs(seed, num_candidates), latent_image, save_drafts, sigmas)
        if sigmas.shape[-1] < 2:
            raise ValueError("sigmas: needs at least two values (one step); check the scheduler node's steps")
        recipe = StagedRecipe.single(CustomSamplerStage(guider, sampler, sigmas), latent_image)
        return cls.search(recipe, seed, num_candidates, announce, saved, pruning, budget, preview_vae)


class SearchSamplerExperts(SearchSamplerNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return sampler_schema(
            "CachedSearchSamplerExperts", "CachedSearch Sampler (High/Low Experts)",
            "Best-of-N exploration on a two-expert model such as Wan 2.2 A14B: each candidate runs the official "
            "two-KSamplerAdvanced graph (the high-noise expert adds the seed's noise and samples up to split_step, "
            "the low-noise expert finishes), each expert with its own cache. Recommit replays the winner's two "
            "stages uncached, exactly as the stock graph with that seed.",
            [
                io.Model.Input("model_high", tooltip="The high-noise expert (first steps), usually through its own "
                               "CachedSearch Apply Cache; a higher tau suits it better than the low-noise expert."),
                io.Model.Input("model_low", tooltip="The low-noise expert (the remaining steps), usually through its "
                               "own CachedSearch Apply Cache; without one this stage computes every call."),
                io.Conditioning.Input("positive", tooltip="What the videos should show (both experts)."),
                io.Conditioning.Input("negative", tooltip="What the videos should avoid (both experts)."),
                io.Latent.Input("latent_image", tooltip="A batch-1 latent (EmptyHunyuanLatentVideo, or the latent "
                                "of WanImageToVideo)."),
                *search_inputs(),
                *expert_settings_inputs(
                    "Total sampling steps of both experts together (the official graph: 20).",
                    "The step where the low-noise expert takes over (official: 10 of 20; 2 of 4 with the 4-step "
                    "LoRAs). Warmup and cooldown count within each expert's steps.",
                    "Classifier-free guidance scale of both experts (official: 3.5; 1.0 with the 4-step LoRAs)."),
                *optional_search_inputs(),
            ])

    @classmethod
    def validate_inputs(cls, seed=None, num_candidates=None, steps=None, split_step=None):
        message = split_step_message(steps, split_step)
        return message if message is not True else seed_range_message(seed, num_candidates)

    @classmethod
    def execute(cls, model_high, model_low, positive, negative, latent_image, seed, num_candidates, steps,
                split_step, cfg, sampler_name, scheduler, pruning=None, budget=None,
                preview_vae=None, save_drafts=True) -> io.NodeOutput:
        announce, saved = cls.open_run(cls.validate_inputs(seed, num_candidates, steps, split_step), latent_image,
                                       save_drafts, positive, negative)
        check_same_latent_format(model_high, model_low)
        recipe = StagedRecipe(official_expert_stages(model_high, model_low, positive, negative, steps, split_step,
                                                     cfg, sampler_name, scheduler),
                              latent_image, ("high noise", "low noise"))
        return cls.search(recipe, seed, num_candidates, announce, saved, pruning, budget, preview_vae)


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


_RANKING_TOOLTIP = ("From the verifier (or Ranking From Scores): its winner is delivered while pick is 0. "
                    "Unconnected: you are the verifier, so set pick.")
_MODE_TOOLTIP = ("commit: full-compute re-generation of the chosen candidate (recommended). keep: its cached draft, no "
                 "extra compute (not for a pruned candidate).")
_MODEL_TOOLTIP = ("Model to commit with (its cache is removed on a copy). Defaults to the model the drafts were "
                  "sampled with. Connect the model before a cache CachedSearch does not know (a First-Block cache, a "
                  "TeaCache) so the commit is full compute. After a search on two experts use model_high and "
                  "model_low instead.")
_PICK_TOOLTIP = ("0: deliver the verifier's choice. k: deliver candidate k, the k-th seed from the sampler's seed "
                 "(pruned candidates count too). Commit this / Keep this on a draft sets it and queues again; "
                 "ComfyUI's cache serves the search, so only this node runs.")
_PICK_AMONG_TOOLTIP = ("How many candidates the pick was made among (set with the pick). When it differs from this "
                       "search's, the run stops instead of delivering another search's seed. 0: not checked.")
_WAIT_FOR_PICK_TOOLTIP = ("Pause this run at Recommit until you click Commit this or Keep this on a draft (the "
                          "verifier's choice is pre-selected). Only while pick is 0; Cancel stops the wait. Off: never "
                          "waits (API and batch runs).")
_PICK_TIMEOUT_TOOLTIP = ("Seconds to wait for your click before the pre-selected candidate is delivered; 0: wait as "
                         "long as it takes.")
_MODEL_HIGH_TOOLTIP = ("After a search on two experts (High/Low Experts sampler): the high-noise expert to commit "
                       "with, before any cache CachedSearch does not know. Unconnected: the expert the drafts ran on, "
                       "its known caches removed on a copy.")
_MODEL_LOW_TOOLTIP = "After a search on two experts: the low-noise expert to commit with, likewise."


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
                RankingType.Input("ranking", optional=True, tooltip=_RANKING_TOOLTIP),
                io.Combo.Input("mode", options=["commit", "keep"], default="commit", tooltip=_MODE_TOOLTIP),
                io.Model.Input("model", optional=True, tooltip=_MODEL_TOOLTIP),
                io.Int.Input("pick", default=0, min=0, max=MAX_CANDIDATES, optional=True, tooltip=_PICK_TOOLTIP),
                io.Int.Input("pick_among", default=0, min=0, max=MAX_CANDIDATES, optional=True, **ADVANCED_INPUT,
                             tooltip=_PICK_AMONG_TOOLTIP),
                # Not advanced: the artist's way to pick in the same run must show without "Show advanced inputs".
                io.Boolean.Input("wait_for_pick", default=False, optional=True, tooltip=_WAIT_FOR_PICK_TOOLTIP),
                io.Int.Input("pick_timeout", default=0, min=0, max=86400, optional=True, **ADVANCED_INPUT,
                             tooltip=_PICK_TIMEOUT_TOOLTIP),
                # Last, so the sockets of workflows saved before them keep their places.
                io.Model.Input("model_high", optional=True, tooltip=_MODEL_HIGH_TOOLTIP),
                io.Model.Input("model_low", optional=True, tooltip=_MODEL_LOW_TOOLTIP),
            ],
            outputs=[
                io.Latent.Output(display_name="latent", tooltip="The delivered video latent."),
                io.Int.Output(display_name="seed", tooltip="The delivered seed; a stock KSampler (for two "
                              "experts: the first KSamplerAdvanced) with it reproduces the committed video."),
                io.String.Output(display_name="report", tooltip="The whole search: scores, skips, cost, who "
                                 "picked."),
            ],
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
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
        cost = cost.with_second_stage(second_stage_calls(cls.hidden.prompt, cls.hidden.unique_id))
        report = with_pick_line(candidates.report(ranking, cost), picked, commit_free=cost.commit_free)
        # The Sampler's cost model with this delivery: its calls with the commit lead, the seconds follow.
        delivery = picked.delivery_fields(len(choices)) | {
            "num_candidates": len(choices),
            "cost": cost.as_dict() | {"drafted_with_apply_cache": candidates.drafted_with_apply_cache}}
        if candidates.budget is not None:
            measured = candidates.budget.measured(cost)
            delivery["budget"] = candidates.budget.as_dict() | {
                "measured_commit": measured[0] if measured is not None else None}
        return io.NodeOutput(delivered, picked.seed, report,
                             ui={"text": (report,), "cachedsearch_delivery": [delivery]})


def _waits(wait_for_pick, pick) -> bool:
    """A set pick is a choice already made: only the verifier's choice (pick 0) waits for a click."""
    return bool(wait_for_pick) and pick == VERIFIERS_CHOICE
