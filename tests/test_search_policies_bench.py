"""bench.search_policies: the recorded rollouts match what the extension's pruned search sees and computes, and the
replay counts a policy's calls and keeps candidates as stated."""

import os
import pathlib
import types

import numpy as np
import pytest
import torch

from scripts import ball_spot_world

CHECKPOINT = ball_spot_world.TRAINED_MODEL
STEPS = 10


def synthetic(previews: np.ndarray, computed: np.ndarray, full: np.ndarray, draft: np.ndarray):
    from bench.policy_replay import Rollouts

    prompts, seeds, steps = previews.shape
    return Rollouts(full, previews, draft, previews, computed, np.zeros((prompts, seeds, 4)))


def test_the_replay_counts_a_two_round_policys_calls_and_delivers_the_best_final_draft():
    from bench.policy_replay import Policy, Round, replay_prompt

    steps, seeds = 8, 4
    computed = np.ones((1, seeds, steps), dtype=bool)
    computed[0, :, 3] = computed[0, :, 5] = False  # each draft skips steps 3 and 5: 6 computed
    previews = np.zeros((1, seeds, steps))
    previews[0, :, 2] = [0.1, 0.4, 0.3, 0.2]  # at step 3: keep seeds 1, 2
    previews[0, :, 4] = [0.0, 0.1, 0.5, 0.0]  # at step 5: keep seed 2
    full, draft = np.array([[0.0, 0.9, 0.5, 0.1]]), np.array([[0.0, 0.9, 0.5, 0.1]])
    winner, calls, survived = replay_prompt(synthetic(previews, computed, full, draft), 0,
                                            Policy("", seeds, (Round(3, 2), Round(5, 1))))
    # Dropped at 3: seeds 0 and 3, 3 calls each (steps 0-2); dropped at 5: seed 1, steps 0-4 less step 3; seed 2:
    # all 6.
    assert (winner, calls, survived) == (2, 3 + 3 + 4 + 6, False)


def test_a_margin_keeps_every_candidate_near_the_leader_within_its_cap_and_at_least_keep():
    from bench.policy_replay import Round

    scores = np.array([0.50, 0.49, 0.40, 0.48, 0.30])
    assert list(Round(3, 1, 0.025, 8).kept(scores)) == [0, 1, 3]
    assert list(Round(3, 1, 0.025, 2).kept(scores)) == [0, 1]
    assert list(Round(3, 4, 0.001, 8).kept(scores)) == [0, 1, 2, 3]
    assert list(Round(3, 2).kept(scores)) == [0, 1]


def test_best_of_and_policies_average_over_disjoint_seed_blocks():
    from bench.policy_replay import Policy, blocks, full_best_of, replay

    full = np.array([[0.1, 0.3, 0.2, 0.0, 0.5, 0.4]])
    rollouts = synthetic(np.zeros((1, 6, 4)), np.ones((1, 6, 4), dtype=bool), full, full)
    drawn = [block.full[0] for block in blocks(rollouts, 2)]
    assert len(drawn) == 9 and [list(d) for d in drawn[:3]] == [[0.1, 0.3], [0.2, 0.0], [0.5, 0.4]]
    for order in range(3):  # each order's three blocks hold every seed once
        assert sorted(np.concatenate(drawn[3 * order:3 * order + 3])) == sorted(full[0])
    assert full_best_of(rollouts, 2).delivered == pytest.approx([np.mean([d.max() for d in drawn])])
    outcome = replay(rollouts, Policy("", 2, ()))
    assert outcome.delivered == pytest.approx(full_best_of(rollouts, 2).delivered)
    assert outcome.calls == pytest.approx([8.0])


@pytest.fixture(scope="module")
def world(engine):
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
                                 prompts=ball_spot_world.PROMPTS[:1],
                                 _model_for=lambda arm, spec: cached if spec.get("cache") else model)


def test_recorded_drafts_are_what_the_pruned_search_sees_and_computes(world, tmp_path):
    """The cached draft's recorded computed steps against a forward hook on the transformer's patch embedding; its recorded preview at
    the step before the prune against the runner's preview scores; the replay's survivors, winner and calls against
    ``run_pruned_search`` on the same model (a prune at a step every draft computed)."""
    from bench.policy_replay import Policy, Rollouts, Round, replay_prompt
    from bench.policy_rollouts import RolloutStore, collect
    from bench.prune_rounds import pruned_search

    forwards = []
    # At the patch embedding: a skipped call enters the transformer's forward but embeds nothing.
    hook = world.model.model.diffusion_model.patch_embedding.register_forward_pre_hook(
        lambda module, args: forwards.append(1))
    store = RolloutStore(tmp_path / "rollouts.jsonl")
    try:
        with torch.inference_mode():
            from bench import policy_rollouts
            record = policy_rollouts.rollout(world, "cached", 0, 0, STEPS, 0.1)
    finally:
        hook.remove()
    # The draft's calls, then two per lookahead preview (full compute).
    lookahead_calls = policy_rollouts.LOOKAHEAD_CALLS * len(policy_rollouts.LOOKAHEAD_STEPS)
    assert len(forwards) == len(record["computed_steps"]) + lookahead_calls
    assert 0 < len(record["computed_steps"]) < STEPS

    seeds = 4
    with torch.inference_mode():
        collect(world, store, range(1), range(seeds), STEPS, 0.1, log=lambda line: None)
    rollouts = Rollouts.load(RolloutStore(store.path), 1)
    assert rollouts.seeds == seeds
    prune = next(step for step in range(2, STEPS - 1) if rollouts.computed[0, :, step].all())
    with torch.inference_mode():
        real = pruned_search(world, STEPS, 0.1, 0, seeds, f"{prune}:2")
    assert real["rounds"][0]["preview_scores"] == pytest.approx(list(rollouts.draft_previews[0, :, prune - 1]))
    winner, calls, _ = replay_prompt(rollouts, 0, Policy("", seeds, (Round(prune, 2),)))
    assert list(real["survivors"]) == sorted(np.argsort(-rollouts.draft_previews[0, :, prune - 1])[:2])
    assert real["survivors"][int(np.argmax(real["finals"]))] == winner
    assert real["computed"] == calls
