"""Budget "auto" in the core (issue 51 items 3 and 4): a remembered calibration's tables give the chooser's policy
for the search's own tau; anything that differs (setup, verifier, preview frames, cache window, tau) keeps today's
rule with one line saying what; and the run-time ledger never lets exploration and the commit pass M full renders,
however much more this prompt computes than the calibration did."""

import numpy as np
import pytest
from report_text import says

from cachedsearch_core.auto_ledger import AutoLedger
from cachedsearch_core.auto_policy import (
    NO_CALIBRATION, POLICY_FIELD, PolicySetup, PolicyTables, auto_ledger, choose_auto, phase_calls,
    policy_record,
)
from cachedsearch_core.budget import BudgetSpent
from cachedsearch_core.calibration_memory import setup_difference, setup_key
from cachedsearch_core.policy_chooser import choose_within_budget
from cachedsearch_core.previews import RolloutPreviews

SETUP = PolicySetup("CachedSearchLoadImageReward(ckpt_name=tiny.pt, dtype=fp32)", 2, 1, 1)
STEPS, PROMPTS, SEEDS = 8, 6, 8
# Each cached draft computes 6 of 8 calls, 1, 3, 4 and 5 of them before the scored steps 1, 3, 5 and 7.
SCORED, BEFORE, COMPUTED = (1, 3, 5, 7), (1, 3, 4, 5), 6


def remembered(exact=True, taus=(0.1,), preview_seconds=0.0, computed=COMPUTED, before=BEFORE):
    """A memory entry whose previews are the final full score from step 1 on (``exact``) or noise; full rollouts
    sample at 0.1 s a call, a rollout's 4 previews take ``preview_seconds``."""
    generator = np.random.default_rng(0)
    full = generator.random((PROMPTS, SEEDS))

    def previews(prompt, seed):
        scores = tuple((float(full[prompt, seed]) if exact else float(generator.random()),) for _ in SCORED)
        return RolloutPreviews("x0", SCORED, scores, before, preview_seconds)

    cached = {tau: [[(float(full[p, s]), computed, previews(p, s)) for s in range(SEEDS)] for p in range(PROMPTS)]
              for tau in taus}
    record = policy_record(SETUP, STEPS, [[(float(full[p, s]), STEPS, 0.1 * STEPS) for s in range(SEEDS)]
                                          for p in range(PROMPTS)], cached)
    return {"tau": taus[0], POLICY_FIELD: record}


def test_a_remembered_calibration_buys_what_the_chooser_chooses_on_its_tables():
    entry = remembered()
    choice = choose_auto(entry, SETUP, 0.1, 3, 16)
    assert choice.chosen == choose_within_budget(PolicyTables.from_record(entry[POLICY_FIELD]).tables, 3, 16)
    # Exact previews from step 1: N seeds drafted to step 1 (N calls), the best one on (5), the commit (8); it
    # delivers the best seed of all (N = 7 already does on these seeds, for a call less than N = 8).
    full = PolicyTables.from_record(entry[POLICY_FIELD]).tables[0.1].full
    width = choice.chosen.width
    assert (choice.chosen.rounds, choice.chosen.calls) == (((1, 1),), width + 5 + STEPS)
    assert choice.chosen.score == pytest.approx(full.max(1).mean())
    shown = choice.as_dict()
    assert (shown["used"], shown["width"], shown["rounds"], shown["prompts"], shown["seeds"]) == (
        True, width, [[1, 1]], PROMPTS, SEEDS)
    assert shown["expected_gain"][1] <= shown["expected_gain"][0] <= shown["expected_gain"][2]
    assert f"({PROMPTS} prompts x {SEEDS} seeds, tau 0.1)" in choice.line


def test_without_a_pruning_plan_only_the_width_is_chosen_from_the_calibrated_skips():
    # 16 calls of exploration at 6 computed calls a draft: 2 drafts.
    choice = choose_auto(remembered(), PolicySetup(None, None, 1, 1), 0.1, 3, 16)
    assert (choice.chosen.width, choice.chosen.rounds) == (2, ())


def test_previews_dear_in_gpu_time_buy_a_narrower_search_and_the_line_says_what_they_cost():
    free = choose_auto(remembered(), SETUP, 0.1, 3, 16)
    # 4 previews in 0.8 s: 0.2 s each, 2 calls' time (0.1 s a call): 3 drafts scored at step 1 (3 + 6 calls), the
    # best on (5), the commit (8); 4 would not fit.
    dear = choose_auto(remembered(preview_seconds=0.8), SETUP, 0.1, 3, 16)
    assert dear.chosen.preview_cost == pytest.approx(2.0) and free.chosen.preview_cost == 0
    assert (dear.chosen.width, dear.chosen.rounds) == (3, ((1, 1),)) and free.chosen.width > 3
    assert dear.chosen.cost == pytest.approx(3 + 6 + 5 + STEPS) and dear.chosen.cost <= dear.chosen.budget_calls
    assert "(16 computed, previews worth 6.0)" in dear.line
    assert dear.as_dict()["preview_cost"] == pytest.approx(2.0)
    # Previews dearer still (5 calls each) buy no pruning at all: the widest plain cached search.
    assert choose_auto(remembered(preview_seconds=2.0), SETUP, 0.1, 3, 16).chosen.rounds == ()


def drafted_as_calibrated(table, chosen, budget_rollouts: int) -> tuple[int, list[str]]:
    """How many of ``chosen``'s width its run-time ledger drafts on a prompt computing the calibrated calls in each
    phase, and the ledger's notes."""
    ledger = auto_ledger(table, chosen.rounds, budget_rollouts)
    phases = [round(calls) for calls in phase_calls(table, [step for step, _ in chosen.rounds])]
    drafted, _ = emulated_search(ledger, chosen.width, phases)
    return drafted, ledger.notes


def test_a_pruned_policy_is_chosen_only_where_the_ledger_drafts_its_whole_width_on_a_calibrated_prompt():
    # Drafts computing 2 of 8 calls (1 before step 1, 1 before step 7), previews of 0.5 calls' time, M = 2: 8 calls
    # for exploration. On the calibration's calls, 4 drafts pruned to 1 at step 1 fit (4 + 2 + 1); but the ledger
    # reserves beside the drafts one candidate's every remaining call (7), so it would narrow that search on every
    # prompt. Pruning at step 7, where one candidate's rest is 1 call, it drafts the whole width.
    entry = remembered(preview_seconds=0.2, computed=2, before=(1, 1, 1, 1))
    table = PolicyTables.from_record(entry[POLICY_FIELD]).tables[0.1]
    on_calls_alone = choose_within_budget({0.1: table}, 2, 16)
    assert on_calls_alone.rounds == ((1, 1),)
    drafted, notes = drafted_as_calibrated(table, on_calls_alone, 2)
    assert drafted < on_calls_alone.width and notes
    chosen = choose_auto(entry, SETUP, 0.1, 2, 16).chosen
    assert chosen.rounds == ((7, 1),)
    assert drafted_as_calibrated(table, chosen, 2) == (chosen.width, [])


def test_the_chooser_prunes_only_on_the_tau_the_search_is_wired_with():
    entry = remembered(taus=(0.1, 0.2))
    assert choose_auto(entry, SETUP, 0.2, 3, 16).chosen.tau == 0.2


@pytest.mark.parametrize("change, facts", [
    (dict(entry=None), (NO_CALIBRATION,)),
    (dict(entry=None, key_difference=setup_difference([setup_key("w", 8, "euler", "simple")], "w", 8, "uni_pc",
                                                      "simple")), ("auto:", "sampler", "euler", "uni_pc", "today")),
    (dict(entry={"tau": 0.1}), ("no previews",)),
    (dict(setup=PolicySetup("CachedSearchLoadCLIPVerifier(model=clip)", 2, 1, 1)),
     ("verifier", SETUP.verifier, "CachedSearchLoadCLIPVerifier(model=clip)")),
    (dict(setup=PolicySetup(SETUP.verifier, 4, 1, 1)), ("preview frames", 2, "preview frames", 4)),
    (dict(setup=PolicySetup(None, None, 2, 1)), ("warmup steps", 1, "warmup steps", 2)),
    (dict(wired_tau=0.3), ("tau", 0.1, "tau", 0.3)),
    (dict(wired_tau=None), ("tau", 0.1, "no cache of ours")),
], ids=["none", "sampler", "no previews", "verifier", "frames", "warmup", "tau", "no cache"])
def test_a_calibration_that_does_not_apply_keeps_todays_rule_and_says_what_differs(change, facts):
    inputs = dict(entry=remembered(), setup=SETUP, wired_tau=0.1, budget_rollouts=3, max_width=16) | change
    choice = choose_auto(**inputs)
    assert choice.chosen is None and says(choice.line, *facts), choice.line
    assert choice.as_dict() == {"used": False, "line": choice.line}


def test_the_nearest_remembered_setup_of_the_model_file_names_what_differs():
    keys = [setup_key("wan.safetensors", 8, "euler", "simple"), setup_key("wan.safetensors", 12, "uni_pc", "simple"),
            setup_key("other.safetensors", 8, "uni_pc", "simple")]
    assert says(setup_difference(keys, "wan.safetensors", 8, "uni_pc", "simple"), "sampler", "euler", "sampler",
                "uni_pc")
    assert setup_difference(keys, "new.safetensors", 8, "uni_pc", "simple") is None


def emulated_search(ledger: AutoLedger, width: int, computed_per_phase) -> tuple[int, int]:
    """The pruned runner's order against ``ledger`` (drafts one by one to the first round, then per phase the
    anchor first), each candidate computing ``computed_per_phase[phase]`` calls; returns (drafted, finished)."""
    drafted = 0
    for _ in range(width):
        ledger.start_candidate()
        try:
            for _ in range(computed_per_phase[0]):
                ledger.draft_call()
            ledger.draft_finished()
        except BudgetSpent:
            ledger.drafting_stopped(width)
            break
        drafted += 1
    running = drafted
    for round_index in range(len(ledger.round_steps)):
        running = ledger.keep_at(round_index, running)
        alive = 0
        for position in range(running):
            ledger.start_candidate()
            next_round = round_index + 1
            try:
                for _ in range(computed_per_phase[next_round]):
                    ledger.call(position == 0, next_round < len(ledger.round_steps))
                ledger.phase_finished(position == 0, next_round if next_round < len(ledger.round_steps) else None)
            except BudgetSpent:
                ledger.cut(position, ledger.round_steps[round_index])
                continue
            alive += 1
        running = alive
    return drafted, running


TWO_ROUNDS = ((3, 12), (8, 2), (1.0, 2.0, 1.0))  # calibrated: 1 call to step 3, 2 from 3 to 12, 1 to the end
ONE_ROUND = ((3,), (1,), (1.0, 1.0))  # calibrated: 1 call to step 3, 1 from 3 to the end


@pytest.mark.parametrize("rounds, computed_per_phase, preview_cost", [
    (TWO_ROUNDS, (3, 9, 4), 0.0), (TWO_ROUNDS, (1, 2, 1), 0.0), (TWO_ROUNDS, (3, 3, 1), 0.0),
    (ONE_ROUND, (3, 13), 0.0), (TWO_ROUNDS, (3, 9, 4), 1.5), (ONE_ROUND, (3, 13), 1.5), (TWO_ROUNDS, (1, 2, 1), 1.0),
    (TWO_ROUNDS, (0, 0, 0), 3.0), (TWO_ROUNDS, (0, 9, 4), 1.5)],
    ids=["skips nothing", "as calibrated", "late phases cheaper", "one survivor skips nothing",
         "skips nothing, previews weighed", "one survivor, previews weighed", "as calibrated, previews weighed",
         "skips everything, previews dear", "drafts skip, survivors do not, previews weighed"])
def test_the_ledger_never_lets_exploration_and_commit_pass_the_budget(rounds, computed_per_phase, preview_cost):
    # 16 steps of one call each; M = 4: 48 calls, 16 of them the commit's; previews charged at their weight.
    full, steps, m = 16, 16, 4
    ledger = AutoLedger((m - 1) * full, full, steps, *rounds, preview_cost=preview_cost)
    drafted, finished = emulated_search(ledger, 24, computed_per_phase)
    assert ledger.spent + full <= m * full
    assert ledger.spent == pytest.approx(ledger.calls + ledger.previews * preview_cost)
    assert finished >= 1
    if computed_per_phase[0] == 0:  # the drafts' previews are all they pay: the width narrows to what those afford
        assert drafted < 24
    elif computed_per_phase == (1, 2, 1):
        assert finished == 2
        if preview_cost == 0:  # as calibrated and previews free: nothing narrowed
            assert (drafted, ledger.notes) == (24, [])
    else:
        assert drafted < 24 and ledger.notes[0].startswith(f"narrowed to N = {drafted} of 24")


def test_the_phases_calls_are_the_calibrated_means_between_the_round_steps():
    tables = PolicyTables.from_record(remembered()[POLICY_FIELD]).tables[0.1]
    # Per draft: 1 call before step 1, 2 between 1 and 3, 1 between 3 and 5, 1 between 5 and 7, 1 to the end.
    assert phase_calls(tables, (1, 5)) == (1.0, 3.0, 2.0)
