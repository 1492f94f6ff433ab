"""bench.search_policies reads its recorded rollouts into the core's replay tables (the replay itself:
tests/test_search_policy.py; that the recorded rollouts match the extension's pruned search:
tests/test_pruning_bench.py)."""

import numpy as np
import pytest


def test_the_bench_loader_puts_each_preview_at_its_prune_step_and_charges_the_lookahead(tmp_path):
    from bench.policy_replay import PREVIEW_KINDS, load_rollouts
    from bench.policy_rollouts import LOOKAHEAD_CALLS, LOOKAHEAD_STEPS, RolloutStore
    from cachedsearch_core.search_policy import Policy, Round, replay_block

    steps, seeds = 8, 3
    store = RolloutStore(tmp_path / "rollouts.jsonl")
    for seed in range(seeds):
        # Call s's x0 estimate is the preview at prune step s + 1: 10 seed + s, so step 3 reads 10 seed + 2.
        store.add({"kind": "full", "prompt": 0, "seed": seed, "final": float(seed),
                   "previews": [100.0 * seed + call for call in range(steps)]})
        store.add({"kind": "cached", "prompt": 0, "seed": seed, "final": 0.5 * seed,
                   "previews": [10.0 * seed + call for call in range(steps)], "computed_steps": [0, 1, 2, 4, 7],
                   "lookahead": {str(step): float(-seed * step) for step in LOOKAHEAD_STEPS}})
    rollouts = load_rollouts(RolloutStore(store.path), 1)
    assert (rollouts.seeds, rollouts.steps, rollouts.full_calls) == (seeds, steps, steps)
    assert list(rollouts.preview(PREVIEW_KINDS[0], 3)[0]) == [2.0, 12.0, 22.0]
    assert list(rollouts.preview(PREVIEW_KINDS[1], 3)[0]) == [2.0, 102.0, 202.0]
    assert list(rollouts.preview(PREVIEW_KINDS[2], 3)[0]) == [0.0, -3.0, -6.0]
    assert rollouts.preview(PREVIEW_KINDS[2], 5) is None
    assert list(rollouts.computed[0, 0]) == [True, True, True, False, True, False, False, True]
    # A lookahead at step 3 keeps seed 0 (the best lookahead): 3 x 2 lookahead calls, seeds 1 and 2 drop with 3
    # computed calls each, seed 0 computes its 5.
    outcome = replay_block(rollouts, Policy("", seeds, (Round(3, 1),), PREVIEW_KINDS[2]))
    assert (outcome.winner[0], outcome.calls[0]) == (0, pytest.approx(seeds * LOOKAHEAD_CALLS + 3 + 3 + 5))
    assert np.isnan(rollouts.previews[PREVIEW_KINDS[2]][0, 0, 4])
