"""bench.search_policies' replay counts a policy's calls, keeps candidates and averages seed blocks as stated (that
its recorded rollouts match the extension's pruned search: tests/test_pruning_bench.py)."""


import numpy as np
import pytest



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
