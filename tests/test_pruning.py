"""Mid-trajectory pruning on ComfyUI's real KSampler (in process, CPU): every candidate runs to the prune step,
the scripted preview scores pick the survivors, and only they continue from there."""

import pytest
import torch

from cachedsearch_core import Draft
from cachedsearch_core.pruning import (
    CacheWindow,
    PrunedCandidate,
    PruningOutcome,
    PruningPlan,
    preview_frame_indices,
    survivors,
)
from report_text import numbers, refusal

STEPS = 8
PRUNE_STEP = 3
SEED = 90
OFF = dict(mode="off", tau=0.5, warmup_steps=1, cooldown_steps=1, static_interval=2)


@pytest.fixture(scope="module")
def wan(engine):
    model, positive, negative, latent = engine.tiny_wan_t2v()
    return engine.one("CachedSearchApplyCache", model=model, **OFF), positive, negative, latent


def recipe_for(engine, wan, sampler_name="euler"):
    search = engine.extension.nodes
    model, positive, negative, latent = wan
    stage = search.stages.KSamplerStage(model, positive, negative, STEPS, 5.0, sampler_name, "simple")
    return search.stages.StagedRecipe.single(stage, latent)


def test_survivors_are_the_best_previews_in_candidate_order():
    assert survivors([0.1, 0.9, 0.5, 0.9, -1.0], 3) == [1, 2, 3]
    assert survivors([0.2, 0.2, 0.2], 2) == [0, 1]  # ties go to the lower seed
    assert preview_frame_indices(81, 4) == [0, 27, 53, 80]


@pytest.mark.parametrize("plan, error", [
    (PruningPlan(prune_step=1, keep=2), "prune_step: got 1"),
    (PruningPlan(prune_step=7, keep=2), "prune_step: got 7"),
    (PruningPlan(prune_step=4, keep=5), "keep: got 5"),
    (PruningPlan(prune_step=4, keep=0), "keep: got 0"),
    (PruningPlan(prune_step=4, keep=2, preview_frames=10), "preview_frames: got 10"),
])
def test_bad_plans_name_the_input(plan, error):
    with pytest.raises(ValueError, match=error):
        plan.check(num_candidates=4, steps=8, warmup_steps=1, cooldown_steps=1, video_frames=9)


def test_a_step_from_prune_fraction_is_named_by_prune_fraction_with_its_step_and_window():
    plan = PruningPlan(prune_step=7, keep=2, prune_fraction=0.9)
    # step 7 of 8; 8 steps, warmup 1 and cooldown 1: the step lies between 1 and 7
    with pytest.raises(ValueError, match=refusal("prune_fraction", 0.9, 7, 8, 8, 1, 1, 1, 7)):
        plan.check(num_candidates=4, steps=8, warmup_steps=1, cooldown_steps=1)
    experts = [CacheWindow(0, 4, 1, 1, "high noise"), CacheWindow(4, 4, 1, 1, "low noise")]
    with pytest.raises(ValueError, match=refusal("prune_fraction", 0.6, 5, 8, "high noise", 0, 4)):
        PruningPlan(prune_step=5, keep=2, prune_fraction=0.6).check_stages(4, experts)


def test_keep_equal_to_the_width_says_that_pruning_dropped_nothing_but_paid_for_previews():
    kept_all = PruningOutcome(3, 8, (1, 2), (0.5, 0.4), (0, 1), (), preview_seconds=1.25, preview_frames=4)
    # the report's last line says it: keep 2 of 2, and the 1.25 s the previews cost
    assert not kept_all.pruned and numbers(kept_all.report_lines()[-1]) == [2, 2, 1.25]
    dropped_one = PruningOutcome(3, 8, (1, 2), (0.5, 0.4), (0,), (PrunedCandidate(Draft(2, 0.5, 3, 0), 0.4),))
    assert dropped_one.pruned and not any("dropped nothing" in line for line in dropped_one.report_lines())


def test_a_cache_window_with_no_skipping_step_says_what_to_change():
    # 8 steps, warmup 5 and cooldown 5: the advice names the inputs to change
    with pytest.raises(ValueError, match=refusal("prune_step", 3, 8, 5, 5, "warmup_steps", "cooldown_steps")):
        PruningPlan(prune_step=3, keep=2).check(num_candidates=4, steps=8, warmup_steps=5, cooldown_steps=5)


def test_scripted_previews_keep_exact_survivors_and_continue_without_recomputing(engine, wan):
    search = engine.extension.nodes
    recipe = recipe_for(engine, wan)
    seeds = [SEED + index for index in range(4)]
    previews = []

    def score_previews(latents):
        previews.extend(latents)
        return [0.3, 0.9, 0.1, 0.7]

    result = search.pruned_search.run_pruned_search(recipe, seeds, PruningPlan(prune_step=PRUNE_STEP, keep=2),
                                                    score_previews)
    assert result.survivor_indices == (1, 3)
    assert result.candidates.seeds == [SEED + 1, SEED + 3]
    assert [candidate.draft.seed for candidate in result.pruned] == [SEED, SEED + 2]
    assert [candidate.preview_score for candidate in result.pruned] == [0.3, 0.1]
    assert len(previews) == 4 and all(preview.shape == wan[3]["samples"].shape for preview in previews)
    assert not torch.equal(previews[0], previews[1])

    # Transformer calls (cond+uncond batched: one per step): N*p for all, k*(T-p) for survivors only.
    pruned_calls = [c.draft.calls_computed + c.draft.calls_skipped for c in result.pruned]
    survivor_calls = [d.calls_computed + d.calls_skipped for d in result.candidates.drafts]
    assert pruned_calls == [PRUNE_STEP] * 2
    assert survivor_calls == [STEPS] * 2
    assert sum(pruned_calls) + sum(survivor_calls) == 4 * PRUNE_STEP + 2 * (STEPS - PRUNE_STEP)

    # With euler (one-step history) the continued drafts equal unpruned drafts of the same seeds up to float
    # rounding of the leftover-noise round trip at the split (ComfyUI's own two-KSamplerAdvanced chain).
    unpruned = search.candidates.run_search(recipe, [SEED + 1, SEED + 3]).draft_latents
    difference = (result.candidates.draft_latents - unpruned).abs().max().item()
    assert difference <= 1e-4 * unpruned.abs().max().item()
    assert not torch.equal(unpruned[0], unpruned[1])

    # The winner's commit equals a stock KSampler of its seed.
    delivered = search.commit.commit(result.candidates, 1).latent
    model, positive, negative, latent = wan
    stock = engine.one("KSampler", model=model, positive=positive, negative=negative, latent_image=latent,
                       seed=SEED + 3, steps=STEPS, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
    assert torch.equal(delivered["samples"], stock["samples"])


def test_cancel_during_preview_scoring_leaves_nothing_behind(engine, wan):
    search = engine.extension.nodes
    recipe = recipe_for(engine, wan)
    model = wan[0]
    options_before = repr(model.model_options)

    class Cancelled(Exception):
        pass

    def cancel(latents):
        raise Cancelled

    with pytest.raises(Cancelled):
        search.pruned_search.run_pruned_search(recipe, [SEED, SEED + 1], PruningPlan(prune_step=PRUNE_STEP, keep=1),
                                               cancel)
    assert repr(model.model_options) == options_before
    # The next run is unaffected: it equals a pruned run in a fresh recipe, bit for bit.
    plan = PruningPlan(prune_step=PRUNE_STEP, keep=2)
    again = search.pruned_search.run_pruned_search(recipe, [SEED, SEED + 1], plan, lambda latents: [0.0, 0.0])
    fresh = search.pruned_search.run_pruned_search(recipe_for(engine, wan), [SEED, SEED + 1], plan,
                                                   lambda latents: [0.0, 0.0])
    assert torch.equal(again.candidates.draft_latents, fresh.candidates.draft_latents)


def test_uni_pc_continuation_differs_only_slightly(engine, wan):
    """uni_pc restarted at the prune step loses its multistep history: measure how far its draft moves."""
    search = engine.extension.nodes
    recipe = recipe_for(engine, wan, "uni_pc")
    with torch.inference_mode():  # as ComfyUI runs a node; uni_pc otherwise records autograd on inference tensors
        result = search.pruned_search.run_pruned_search(recipe, [SEED], PruningPlan(prune_step=PRUNE_STEP, keep=1),
                                                        lambda latents: [0.0])
        unpruned = search.candidates.run_search(recipe, [SEED]).draft_latents
    difference = (result.candidates.draft_latents - unpruned).abs().max().item()
    scale = unpruned.abs().max().item()
    print(f"uni_pc continuation: max |diff| {difference:.4g} of max |latent| {scale:.4g}")
    assert 0 < difference < scale
