"""The core's replay (cachedsearch_core.search_policy) counts a policy's calls, keeps candidates and averages seed
blocks as stated; its chooser (cachedsearch_core.policy_chooser) on synthetic rollouts whose answer is known (issue
51 item 2): previews exact from step 1, previews that say nothing until the end, a cache that skips nothing (today's
Budget rule), several taus; the budget always holds; bad records and inputs name what to fix."""

import numpy as np
import pytest

from cachedsearch_core.budget import BudgetPlan
from cachedsearch_core.policy_chooser import (
    best_within, candidate_policies, cheapest_capturing, choose_within_budget, fewest_calls, schedules,
    weighing_previews,
)
from cachedsearch_core.pruned_budget import pruned_budget_width
from cachedsearch_core.pruning import PruningSchedule, pruned_search_steps
from cachedsearch_core.search_policy import (
    DRAFT_PREVIEW, CachedRollout, FullRollout, Policy, Replay, Rollouts, Round, blocks, full_best_of, replay,
    replay_all,
    replay_block, widest_width,
)

PROMPTS, SEEDS = 40, 28


def synthetic(previews: np.ndarray, computed: np.ndarray, full: np.ndarray, draft: np.ndarray) -> Rollouts:
    return Rollouts(full, draft, computed, {DRAFT_PREVIEW: previews}, float(previews.shape[-1]))


def test_the_replay_counts_a_two_round_policys_calls_and_delivers_the_best_final_draft():
    steps, seeds = 8, 4
    computed = np.ones((1, seeds, steps), dtype=bool)
    computed[0, :, 3] = computed[0, :, 5] = False  # each draft skips steps 3 and 5: 6 computed
    previews = np.zeros((1, seeds, steps))
    previews[0, :, 2] = [0.1, 0.4, 0.3, 0.2]  # at step 3: keep seeds 1, 2
    previews[0, :, 4] = [0.0, 0.1, 0.5, 0.0]  # at step 5: keep seed 2
    full = draft = np.array([[0.0, 0.9, 0.5, 0.1]])
    outcome = replay_block(synthetic(previews, computed, full, draft), Policy("", seeds, (Round(3, 2), Round(5, 1))))
    # Dropped at 3: seeds 0 and 3, 3 calls each (steps 0-2); dropped at 5: seed 1, steps 0-4 less step 3; seed 2:
    # all 6.
    assert (outcome.winner[0], outcome.calls[0], outcome.survived[0]) == (2, 3 + 3 + 4 + 6, False)
    assert list(outcome.kept[0]) == [2, 1]
    assert outcome.previews[0] == 4 + 2  # every candidate scored at step 3, the two kept at step 5


def test_a_margin_keeps_every_candidate_near_the_leader_within_its_cap_and_at_least_keep():
    scores = np.array([0.50, 0.49, 0.40, 0.48, 0.30])
    assert list(Round(3, 1, 0.025, 8).kept(scores)) == [0, 1, 3]
    assert list(Round(3, 1, 0.025, 2).kept(scores)) == [0, 1]
    assert list(Round(3, 4, 0.001, 8).kept(scores)) == [0, 1, 2, 3]
    assert list(Round(3, 2).kept(scores)) == [0, 1]
    assert list(Round(3, 2).kept(np.array([0.5, 0.5, 0.5]))) == [0, 1]  # ties: the earlier seeds


def test_best_of_and_policies_average_over_disjoint_seed_blocks():
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


def tables(steps: int, previews, computed=None, taus=(0.1,), seed=0) -> dict[float, Rollouts]:
    """Distinct random final scores per (prompt, seed); the cached draft ends where the full rollout ends (the end
    tells); ``previews(final, step, generator)`` scores each prune step; ``computed(prompt, seed)`` the calls per
    step (every step computed by default); a full rollout computes one call per step."""
    generator = np.random.default_rng(seed)
    finals = generator.random((PROMPTS, SEEDS))
    full, cached = [], []
    for prompt in range(PROMPTS):
        for s in range(SEEDS):
            final = float(finals[prompt, s])
            full.append(FullRollout(prompt, s, final, float(steps)))
            calls = computed(prompt, s) if computed else (1.0,) * steps
            for tau in taus:
                scored = {step: previews(final, step, generator, tau) for step in range(1, steps)}
                cached.append(CachedRollout(prompt, s, tau, final, scored, calls))
    return Rollouts.from_records(full, cached)


def exact(final, step, generator, tau):
    return final


def uninformative(final, step, generator, tau):
    return float(generator.random())


def test_previews_exact_from_step_1_buy_the_widest_search_keeping_1_at_step_1():
    # Budget 3 x 6 calls: N drafts to step 1 (N calls), the one kept to the end (5), the commit (6): N = 7.
    rollouts = tables(6, exact)
    chosen = choose_within_budget(rollouts, 3)
    assert (chosen.width, chosen.rounds, chosen.tau) == (7, ((1, 1),), 0.1)
    assert chosen.calls == chosen.worst_calls == chosen.budget_calls == 18
    best_of_7 = full_best_of(rollouts[0.1], 7).delivered
    assert chosen.score == pytest.approx(best_of_7.mean())
    assert chosen.gain.value == pytest.approx((best_of_7 - full_best_of(rollouts[0.1], 3).delivered).mean())
    assert 0 < chosen.gain.low < chosen.gain.value < chosen.gain.high


@pytest.mark.slow  # replays every policy within the budget: seconds
def test_previews_that_say_nothing_until_the_end_buy_the_widest_plain_cached_search():
    # The cache computes 6 of 8 steps, so 4 full renders' calls (32) pay for the commit (8) and 4 drafts (24).
    skips = (1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0)
    chosen = choose_within_budget(tables(8, uninformative, lambda prompt, seed: skips), 4)
    assert (chosen.width, chosen.rounds) == (4, ())
    assert chosen.calls == chosen.budget_calls == 32


def test_a_cache_that_skips_nothing_is_counted_as_todays_budget_rule():
    """Every schedule's widest width is PrunedBudget's, and the chosen policy computes the schedule's sampler
    steps (pruned_search_steps) and the commit."""
    steps, m = 8, 4
    rollouts = tables(steps, lambda final, step, generator, tau: final + generator.normal(0, 0.3 / step))
    table = rollouts[0.1]
    budget = (m - 1) * steps
    policies = candidate_policies(table, 64, budget)
    for rounds in schedules(table)[1:]:
        schedule = ", ".join(f"{prune.step}:{prune.keep}" for prune in rounds)
        widths = [policy.width for policy in policies if policy.rounds == rounds]
        widest = widest_width(table, rounds, budget)
        try:
            assert widest == pruned_budget_width(lambda n: PruningSchedule(schedule).plan(n, steps), steps,
                                                 BudgetPlan(m, max_candidates=64)).width, schedule
        except ValueError:  # no width fits
            assert widest < 1, schedule
        assert widths == list(range(rounds[0].keep + 1, min(widest, SEEDS) + 1)), schedule
    chosen = choose_within_budget(rollouts, m)
    assert chosen.rounds
    assert chosen.calls == pruned_search_steps(chosen.width, steps, chosen.rounds) + steps


@pytest.mark.slow  # chooses for three budgets over every policy: seconds
def test_the_budget_holds_on_every_prompt_whatever_the_cache_skips():
    generator = np.random.default_rng(3)
    skipping = generator.random((PROMPTS, SEEDS, 6)) < 0.4
    skipping[..., 0] = skipping[..., -1] = False  # warmup and cooldown always computed

    def computed(prompt, seed):
        return tuple(float(not skipped) for skipped in skipping[prompt, seed])

    rollouts = tables(6, lambda final, step, g, tau: final + g.normal(0, 0.05 * (6 - step)), computed)
    for m in (2, 3, 5):
        chosen = choose_within_budget(rollouts, m)
        assert chosen.calls <= chosen.worst_calls <= chosen.budget_calls == 6 * m, m
        assert chosen.calls == pytest.approx(replay_all(rollouts[0.1], [chosen.policy])[0].calls.mean() + 6)


def test_of_two_calibrated_taus_the_one_whose_previews_rank_is_chosen():
    rollouts = tables(6, lambda final, step, generator, tau: final if tau == 0.2 else float(generator.random()),
                      taus=(0.1, 0.2))
    chosen = choose_within_budget(rollouts, 3)
    assert (chosen.tau, chosen.width, chosen.rounds) == (0.2, 7, ((1, 1),))


def test_the_fewest_calls_that_keep_all_of_best_of_m_are_m_drafts_to_step_1_with_exact_previews():
    chosen = fewest_calls(tables(6, exact), 4, target=1.0)
    assert (chosen.width, chosen.rounds, chosen.capture) == (4, ((1, 1),), 1.0)
    assert chosen.calls == 4 + 5 + 6
    assert chosen.gain.value == pytest.approx(0.0)


def test_free_previews_leave_the_choice_as_calls_alone_make_it():
    rollouts = tables(6, exact)
    unweighed, free = choose_within_budget(rollouts, 3), choose_within_budget(weighing_previews(rollouts, 0.0), 3)
    assert (free.width, free.rounds, free.calls, free.cost) == (unweighed.width, unweighed.rounds, 18, 18)
    assert free.previews == 7  # the 7 drafts' previews at step 1, weighing nothing


def test_dear_previews_buy_a_narrower_search_and_the_budget_holds_on_calls_and_previews():
    # Each preview costs one call: N drafts to step 1 cost 2 N, the one kept to the end 5, the commit 6: N = 3
    # (not 7) within 3 x 6. Pruning at step 2 (3 N + 4 + 6) buys 2, no prune (6 N + 6) 2.
    chosen = choose_within_budget(weighing_previews(tables(6, exact), 1.0), 3)
    assert (chosen.width, chosen.rounds) == (3, ((1, 1),))
    assert (chosen.calls, chosen.previews, chosen.cost, chosen.worst_cost) == (3 + 5 + 6, 3, 17, 17)
    weighed = weighing_previews(tables(6, exact), 1.0)[0.1]
    assert widest_width(weighed, (Round(1, 1),), 12) == 3
    # 2 N to step 1 with previews, the 2 kept on to step 3 (4) and scored there (2), the one kept to the end (3).
    assert widest_width(weighed, (Round(1, 2), Round(3, 1)), 19) == (19 - 4 - 2 - 3) // 2
    # Previews dearer than the calls they save: the widest plain cached search (2 drafts and the commit).
    dearest = choose_within_budget(weighing_previews(tables(6, exact), 10.0), 3)
    assert (dearest.width, dearest.rounds, dearest.previews, dearest.cost) == (2, (), 0, 18)


def outcome_of(delivered: float, calls: float, previews: float, preview_cost: float) -> Replay:
    one = np.array([1.0])
    return Replay(delivered * one, calls * one, calls * one, one, previews * one,
                  (calls + preview_cost * previews) * one, (calls + preview_cost * previews) * one)


def test_the_budget_and_the_fewest_calls_judge_a_policy_by_calls_and_previews_together():
    # "pruned" computes fewer calls than "plain" but scores 10 previews at 2 calls' time each: 6 + 20 = 26.
    pruned, plain = outcome_of(0.9, 6.0, 10, 2.0), outcome_of(0.8, 12.0, 0, 2.0)
    assert best_within([("pruned", pruned), ("plain", plain)], commit=6.0, budget=30.0)[0] == "plain"
    assert best_within([("pruned", pruned), ("plain", plain)], commit=6.0, budget=32.0)[0] == "pruned"
    assert cheapest_capturing([("pruned", pruned), ("plain", plain)], np.array([0.5]), 0.3, 0.9)[0] == "plain"


def test_the_fewest_calls_count_the_previews_they_score():
    # Keeping all of best-of-4 with exact previews: 4 drafts to step 1 and the one kept to the end; with previews
    # at 5 calls each that is 4 + 20 + 5 against plain best-of-4 drafts' 24, so the drafts win.
    free = fewest_calls(tables(6, exact), 4, target=1.0)
    dear = fewest_calls(weighing_previews(tables(6, exact), 5.0), 4, target=1.0)
    assert (free.width, free.rounds, dear.width, dear.rounds) == (4, ((1, 1),), 4, ())
    assert dear.cost == 4 * 6 + 6


def test_bad_records_and_inputs_name_what_to_fix():
    with pytest.raises(ValueError, match="previews: step 6"):
        CachedRollout(0, 0, 0.1, 0.5, {6: 0.5}, (1.0,) * 6)
    with pytest.raises(ValueError, match="computed_calls"):
        CachedRollout(0, 0, 0.1, 0.5, {}, (1.0, -1.0))
    with pytest.raises(ValueError, match="score"):
        FullRollout(0, 0, float("nan"), 6.0)
    with pytest.raises(ValueError, match="prompt 0 seed 1"):
        Rollouts.from_records([FullRollout(0, 0, 0.5, 6.0), FullRollout(0, 1, 0.4, 6.0)],
                              [CachedRollout(0, 0, 0.1, 0.5, {}, (1.0,) * 6)])
    rollouts = tables(6, exact)
    with pytest.raises(ValueError, match="budget_rollouts: got 1"):
        choose_within_budget(rollouts, 1)
    with pytest.raises(ValueError, match=f"hold {SEEDS} seeds"):
        choose_within_budget(rollouts, SEEDS + 1)
    with pytest.raises(ValueError, match="capture target"):
        fewest_calls(rollouts, 4, target=1.5)
