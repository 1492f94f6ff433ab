"""The optional pruning plan of the search nodes: every candidate runs to a prune step, a preview decoded from the
sampler's own x0 estimate there is scored by the verifier, and only the best continue ("CachedSearch:
Training-Free Cached Exploration for Test-Time Search in Video Diffusion", Sec. "Composition with pruned search")."""

from __future__ import annotations

import dataclasses

from comfy_api.latest import io

from ..cachedsearch_core import candidate_seeds
from ..cachedsearch_core.budget import BudgetPlan
from ..cachedsearch_core.pruned_budget import pruned_budget_width
from ..cachedsearch_core.image_reward import require_prompt
from ..cachedsearch_core.judge import FrameJudge
from ..cachedsearch_core.pruning import PREVIEW_FRAMES, PruningPlan, PruningSchedule
from .panel_frames import save_panel_frames
from .candidates import SearchCandidates
from .previews import PreviewScorer, cache_windows, preview_model
from .pruned_search import run_pruned_search
from .pruning_schedule import is_auto, read_schedule, schedule_message
from .stages import StagedRecipe
from .types import PruningPlanType, Verifier


def latent_frames(latent: dict) -> int:
    """Frames on the latent's time axis (1 for an image latent)."""
    samples = latent["samples"]
    return samples.shape[2] if samples.ndim == 5 else 1


@dataclasses.dataclass(frozen=True)
class PreviewPruning:
    """What the Pruning Plan node hands to a search node (type CACHEDSEARCH_PRUNING_PLAN): where to prune, how many
    to keep, and the VAE, verifier and prompt that score the previews. Holds no state between runs.

    schedule: several rounds (``PruningSchedule``); when set it replaces prune_fraction, prune_step and keep.
    auto: the schedule is "auto": with a Budget, the rounds (and width) come from a calibration (``budget_auto``)."""

    prune_fraction: float
    prune_step: int  # 0: prune_fraction of the search's steps
    keep: int
    preview_frames: int
    vae: object
    verifier: object
    prompt: str
    schedule: PruningSchedule | None = None
    auto: bool = False

    def plan(self, steps: int, num_candidates: int) -> PruningPlan:
        if self.schedule is not None:
            return self.schedule.plan(num_candidates, steps, self.preview_frames)
        if self.prune_step:
            return PruningPlan(prune_step=self.prune_step, keep=self.keep, preview_frames=self.preview_frames)
        return PruningPlan(prune_step=round(self.prune_fraction * steps), keep=self.keep,
                           preview_frames=self.preview_frames, prune_fraction=self.prune_fraction)

    def checked_plan(self, recipe: StagedRecipe, num_candidates: int) -> PruningPlan:
        """The plan for this search, refused (naming the input) when it cannot apply."""
        plan = self.plan(recipe.steps, num_candidates)
        plan.check_stages(num_candidates, cache_windows(recipe), latent_frames(recipe.latent))
        return plan

    def search(self, recipe: StagedRecipe, seeds: list[int], announce=None, saved=None, plan: PruningPlan | None = None,
               ledger=None) -> SearchCandidates:
        """The pruned search: the survivors as CANDIDATES carrying the record of every prune round; with ``saved``
        (``SavedDrafts``) it reuses and saves each candidate's states (``run_pruned_search``). ``plan``: rounds chosen
        elsewhere (Budget "auto", with its ``ledger``) instead of this node's."""
        if plan is None:
            plan = self.checked_plan(recipe, len(seeds))
        else:
            plan.check_stages(len(seeds), cache_windows(recipe), latent_frames(recipe.latent))
        # The preview's frames are the K to judge, scored as the Verifier scores a draft's.
        scorer = PreviewScorer(self.vae, (FrameJudge(self.verifier, self.prompt, plan.preview_frames),),
                               plan.preview_frames)
        round_steps = iter(plan.round_steps)  # the runner scores the rounds in order
        previews_by_round = []

        def score_previews(estimates):
            step = next(round_steps)
            model = preview_model(recipe, step)
            scores, previews = [], []
            for index, estimate in enumerate(estimates):
                if announce is not None:
                    announce(f"scoring preview {index + 1} / {len(estimates)} at step {step}")
                (((score,), frames),) = scorer.score(model, [estimate])
                scores.append(score)
                previews.append(tuple(save_panel_frames(frames)))
            previews_by_round.append(previews)
            return scores

        candidates = run_pruned_search(recipe, seeds, plan, score_previews, announce, saved, ledger).candidates
        # Each candidate's panel frames: the preview of the last round it was scored in (the one that decided it).
        shown = {}
        for record, previews in zip(candidates.pruning.rounds, previews_by_round):
            shown.update(zip(record.scored, previews))
        return dataclasses.replace(candidates, pruning_previews=tuple(
            shown[index] for index in range(len(candidates.pruning.seeds))))


    def search_within(self, recipe: StagedRecipe, seed: int, budget: BudgetPlan, announce=None,
                      saved=None) -> SearchCandidates:
        """The pruned search of the widest N (seeds seed, seed + 1, ...) whose schedule and one full commit fit the
        budget (``pruned_budget_width``)."""
        chosen = pruned_budget_width(lambda width: self.checked_plan(recipe, width), recipe.steps, budget)
        candidates = self.search(recipe, candidate_seeds(seed, chosen.width), announce, saved)
        return dataclasses.replace(candidates, budget=chosen)


SCHEDULE_TOOLTIP = (
    "Optional: prune in several rounds, as where:keep pairs separated by commas; where is a share of the steps (20%) "
    "or a step (10), keep a count (4) or a share of the candidates still running (1/2 halves them). \"20%:4, 40%:2\": "
    "8 drafts to 20 % of the steps, the best 4 on to 40 %, the best 2 of those to the end. \"20%:1/2, 40%:1/2, "
    "60%:1/2\" halves the field three times. Steps must rise and each round keep fewer than the one before. When "
    "set it replaces keep, prune_fraction and prune_step; empty: one prune as those say. \"auto\", with a "
    "CachedSearch Budget on the same sampler: the rounds and the width a calibration of your setup says buy the best "
    "video for the budget (as the Budget's choose \"auto\")."
)


class PruningPlanNode(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchPruningPlan",
            display_name="CachedSearch Pruning Plan",
            category="CachedSearch",
            description="Makes a search cheaper by pruning mid-trajectory: every candidate runs to the prune step, "
            "a few frames decoded from the sampler's own x0 estimate there are scored by the verifier, and only the "
            "best `keep` continue to the end (from the prune step, nothing recomputed). Connect it to a CachedSearch "
            "sampler's optional pruning input. The report: prune at 20 of 50 steps, keep 4 of 8, 4 preview frames. A "
            "schedule prunes in several rounds (e.g. halve the field at 20 %, 40 % and 60 % of the steps).",
            inputs=[
                io.Vae.Input("vae", tooltip="The VAE of the drafts (the one your VAEDecode uses): decodes only the "
                             "preview frames, each from one latent frame."),
                Verifier.Input("verifier", tooltip="The verifier of the final ranking (CachedSearch Load ImageReward "
                               "or Load CLIP Verifier), so previews are judged as the drafts will be."),
                io.String.Input("prompt", multiline=True, default="",
                                tooltip="The prompt the videos are made from (the same text as the Verifier's)."),
                io.Int.Input("keep", default=4, min=1, max=64,
                             tooltip="How many candidates continue past the prune step (k); the others are dropped "
                             "there. At most num_candidates. The report keeps 4 of 8."),
                io.Float.Input("prune_fraction", default=0.4, min=0.01, max=0.99, step=0.01,
                               tooltip="Where to prune, as a share of the search's steps (0.4: step 20 of 50, the "
                               "report's choice). Used when prune_step is 0."),
                io.Int.Input("prune_step", default=0, min=0, max=10000,
                             tooltip="Where to prune, as a step count (overrides prune_fraction; 0 uses the "
                             "fraction). Must lie after the cache's warmup and before its cooldown, or at the "
                             "switch between two experts."),
                io.Int.Input("preview_frames", default=PREVIEW_FRAMES, min=1, max=64,
                             tooltip="Frames per preview, evenly spaced over the video and scored like the "
                             "Verifier's frames (the report uses 4). At most the latent's frame count. Calibrate "
                             f"scores its previews on {PREVIEW_FRAMES} (all of a shorter latent's), so schedule "
                             "\"auto\" works at the default."),
                io.String.Input("schedule", default="", optional=True, tooltip=SCHEDULE_TOOLTIP),
            ],
            outputs=[PruningPlanType.Output(display_name="pruning", tooltip="For a CachedSearch sampler's pruning "
                                            "input.")],
        )

    @classmethod
    def validate_inputs(cls, schedule=None):
        return schedule_message(schedule)

    @classmethod
    def execute(cls, vae, verifier, prompt, keep, prune_fraction, prune_step, preview_frames,
                schedule="") -> io.NodeOutput:
        require_prompt(prompt)
        return io.NodeOutput(PreviewPruning(prune_fraction, prune_step, keep, preview_frames, vae, verifier, prompt,
                                            read_schedule(schedule), is_auto(schedule)))
