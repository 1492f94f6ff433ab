"""The pruning benchmark and the audit's pruned and fixed-budget arms, on ComfyUI's real KSampler with tiny models
(in process, CPU): transformer-call accounting, survivors and the true-best survival they report."""

import os
import pathlib
import types

import numpy as np
import pytest
import torch

from cachedsearch_core.audit import FULL_ARM, ScoreStore
from cachedsearch_core.pruning import PruningPlan, survivors
from scripts import ball_spot_world

STEPS, PRUNE_STEP, KEEP = 8, 3, 2
CHECKPOINT = ball_spot_world.TRAINED_MODEL


@pytest.fixture(scope="module")
def tiny_wan(engine):
    return engine.tiny_wan_t2v()


def test_a_split_stage_keeps_the_unsplit_cache_windows(engine, tiny_wan):
    """Static cache, warmup = cooldown = 1, every 2nd step: an unsplit draft computes steps 0, 1, 3, 5, 7. Pruned at
    step 3, a dropped seed computes 0, 1 (no cooldown before the split) and a survivor also 3 (the fresh cache's
    anchor), 5 and 7 (no warmup after it): as many as unsplit. Restarting the windows at the split would add step 2
    and step 4."""
    search = engine.extension.nodes
    model, positive, negative, latent = tiny_wan
    cached = engine.one("CachedSearchApplyCache", model=model, mode="static", tau=0.1, warmup_steps=1,
                        cooldown_steps=1, static_interval=2)
    recipe = search.stages.StagedRecipe.single(
        search.stages.KSamplerStage(cached, positive, negative, STEPS, 5.0, "euler", "simple"), latent)
    result = search.pruned_search.run_pruned_search(recipe, [7, 8], PruningPlan(prune_step=PRUNE_STEP, keep=1),
                                                    lambda estimates: [0.0, 1.0])
    (survivor,) = result.candidates.drafts
    (dropped,) = result.pruned
    unsplit = search.candidates.run_search(recipe, [8]).drafts[0]
    assert (unsplit.calls_computed, unsplit.calls_skipped) == (5, 3)
    assert (survivor.seed, survivor.calls_computed, survivor.calls_skipped) == (8, 5, 3)
    assert (dropped.draft.seed, dropped.draft.calls_computed, dropped.draft.calls_skipped) == (7, 2, 1)


def scripted_world(engine, tiny_wan, full_scores):
    """A bench world on tiny Wan whose verifier is scripted: candidates are scored by their position."""
    from bench.pruning_cost import World

    model, positive, negative, latent = tiny_wan

    def score_latents(samples):
        return list(full_scores) if len(samples) == len(full_scores) else list(range(len(samples)))

    return World("scripted", engine.one, engine.extension, model, positive, negative, latent, 5.0, "euler",
                 score_latents, lambda estimates: [0.0, 1.0, 2.0, 3.0])


@pytest.mark.parametrize("full_scores, held_best", [((3, 2, 1, 0), 0), ((0, 0, 0, 5), 1)])
def test_the_bench_counts_every_arms_transformer_calls(engine, tiny_wan, full_scores, held_best):
    from bench.pruning_cost import measure_round

    seeds = [40, 41, 42, 43]
    plan = PruningPlan(prune_step=PRUNE_STEP, keep=KEEP)
    costs = measure_round(scripted_world(engine, tiny_wan, full_scores), seeds, STEPS, plan, tau=0.5, window=1,
                          order=("pruned", "cached", "full"))
    full, cached, pruned = costs["full"], costs["cached"], costs["pruned"]
    assert full.calls == full.computed == len(seeds) * STEPS
    assert cached.calls == len(seeds) * STEPS and cached.computed < cached.calls
    assert pruned.calls == len(seeds) * PRUNE_STEP + KEEP * (STEPS - PRUNE_STEP)
    assert 0 < pruned.computed < pruned.calls
    assert full.commit_calls == 0 and cached.commit_calls == pruned.commit_calls == STEPS
    # Previews 0, 1, 2, 3 keep seeds 2 and 3; the full arm's best is seed 0, then seed 3.
    assert pruned.survivors_held_best == held_best
    assert pruned.preview_seconds > 0 and pruned.explore_seconds > pruned.preview_seconds


def ball_spot_backend(engine, prompts):
    """What the benches' ShapesBackend offers, on the trained ball-and-spot model in the test's ComfyUI: the model,
    its cached clone (warmup = cooldown = 1) for every arm with a cache or a tau, the world's latent and negative
    prompt."""
    import folder_paths

    link = pathlib.Path(folder_paths.get_folder_paths("diffusion_models")[0]) / CHECKPOINT.name
    if not link.exists():
        os.symlink(CHECKPOINT, link)
    model = engine.one("ModelSamplingSD3", model=engine.one("UNETLoader", unet_name=CHECKPOINT.name,
                                                             weight_dtype="default"), shift=3.0)
    cached = engine.one("CachedSearchApplyCache", model=model, mode="adaptive", tau=0.1, warmup_steps=1,
                        cooldown_steps=1, static_interval=2)
    latent = engine.one("EmptyHunyuanLatentVideo", width=8 * ball_spot_world.SIZE, height=8 * ball_spot_world.SIZE,
                        length=4 * ball_spot_world.FRAMES - 3, batch_size=1)
    return types.SimpleNamespace(extension=engine.extension, model=model, cfg=4.0, latents={1.0: latent},
                                 negative=[[ball_spot_world.conditioning(None), {}]], one=engine.one,
                                 prompts=prompts,
                                 _model_for=lambda arm, spec: cached if spec.get("cache") or "tau" in spec else model)


def test_the_audit_arms_store_and_report_a_pruned_and_a_budget_search(engine, tmp_path):
    from bench.audit import collect_pruned, pruned_arm_names, search_arms_report

    backend = ball_spot_backend(engine, ball_spot_world.PROMPTS[:2])
    prompts, seeds, steps = [0, 1], [0, 1, 2, 3], 10
    plan = PruningPlan(prune_step=4, keep=2)
    store = ScoreStore(tmp_path / "scores.jsonl")
    with torch.inference_mode():
        collect_pruned(backend, store, {"tau": 0.1, "steps": steps}, plan, prompts, seeds)
    preview_arm, final_arm = pruned_arm_names(plan, steps, 0.1)
    previews = store.table(preview_arm, prompts, seeds)
    kept = [[s for s in seeds if store.has(final_arm, p, s)] for p in prompts]
    assert kept == [survivors(row, plan.keep) for row in previews]
    records = [r for r in store.records.values() if r["arm"] in (preview_arm, final_arm)]
    assert sum(r["calls"] for r in records) == len(prompts) * (len(seeds) * 4 + plan.keep * (steps - 4))
    assert all(r["calls"] == steps for r in records if r["arm"] == final_arm)
    assert all(-1 <= r["score"] <= 1 for r in records)
    # A second collection finds every prompt complete and runs nothing.
    lines = store.path.read_text().count("\n")
    collect_pruned(backend, store, {"tau": 0.1, "steps": steps}, plan, prompts, seeds)
    assert store.path.read_text().count("\n") == lines

    # Scripted full references: each prompt's true best is seed 3 on prompt 0 and seed 0 on prompt 1.
    full = np.array([[0.1, 0.2, 0.3, 0.9], [0.9, 0.2, 0.3, 0.1]])
    for p in prompts:
        for s in seeds:
            store.add(FULL_ARM, p, s, full[p, s], 1.0, calls=steps)
            store.add("tau 0.1", p, s, full[p, s], 0.5, calls=steps, skipped=6)  # 4 computed calls per draft
    survival = np.mean([int(np.argmax(full[p])) in kept[p] for p in prompts])
    text = search_arms_report(store, prompts, seeds, steps, plan, 0.1, [0.1], budget_rollouts=2)
    assert "| true best survives |" in text
    row = next(line for line in text.splitlines() if line.startswith("| pruned, keep 2 |"))
    assert row.rstrip(" |").endswith("]") and f"| {survival:.3f} [" in row
    # Budget 2 x 10 calls, 10 for the recommit: two drafts of 4 computed calls; seed 1 beats seed 0 on prompt 0
    # and loses on prompt 1, as in full best-of-2 over seeds 0 and 1, so the gains are equal.
    budget = next(line for line in text.splitlines() if line.startswith("| tau 0.1 |"))
    assert "| 2.00 (2-2) | 0 | 90 % |" in budget and budget.rstrip(" |").endswith("1.000 [1.000, 1.000]")


def test_search_policies_records_what_the_pruned_search_sees_and_computes(engine, tmp_path):
    """bench.search_policies' rollouts: the cached draft's recorded computed steps against a forward hook on the
    transformer's patch embedding; its recorded preview at the step before the prune against the runner's preview
    scores; the replay's survivors, winner and calls against ``run_pruned_search`` on the same model (a prune at a
    step every draft computed)."""
    from bench.policy_replay import load_rollouts
    from cachedsearch_core.search_policy import DRAFT_PREVIEW, Policy, Round, replay_block
    from bench import policy_rollouts
    from bench.policy_rollouts import RolloutStore, collect
    from bench.prune_rounds import pruned_search

    world, steps = ball_spot_backend(engine, ball_spot_world.PROMPTS[:1]), 10
    forwards = []
    # At the patch embedding: a skipped call enters the transformer's forward but embeds nothing.
    hook = world.model.model.diffusion_model.patch_embedding.register_forward_pre_hook(
        lambda module, args: forwards.append(1))
    store = RolloutStore(tmp_path / "rollouts.jsonl")
    try:
        with torch.inference_mode():
            record = policy_rollouts.rollout(world, "cached", 0, 0, steps, 0.1)
    finally:
        hook.remove()
    # The draft's calls, then two per lookahead preview (full compute).
    lookahead_calls = policy_rollouts.LOOKAHEAD_CALLS * len(policy_rollouts.LOOKAHEAD_STEPS)
    assert len(forwards) == len(record["computed_steps"]) + lookahead_calls
    assert 0 < len(record["computed_steps"]) < steps

    seeds = 4
    with torch.inference_mode():
        collect(world, store, range(1), range(seeds), steps, 0.1, log=lambda line: None)
    rollouts = load_rollouts(RolloutStore(store.path), 1)
    assert rollouts.seeds == seeds
    prune = next(step for step in range(2, steps - 1) if rollouts.computed[0, :, step].all())
    with torch.inference_mode():
        real = pruned_search(world, steps, 0.1, 0, seeds, f"{prune}:2")
    previews = rollouts.preview(DRAFT_PREVIEW, prune)[0]
    assert real["rounds"][0]["preview_scores"] == pytest.approx(list(previews))
    outcome = replay_block(rollouts, Policy("", seeds, (Round(prune, 2),)))
    winner, calls = outcome.winner[0], outcome.calls[0]
    assert list(real["survivors"]) == sorted(np.argsort(-previews)[:2])
    assert real["survivors"][int(np.argmax(real["finals"]))] == winner
    assert real["computed"] == calls
