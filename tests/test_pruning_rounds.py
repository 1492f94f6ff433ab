"""Pruning in several rounds (a Pruning Plan schedule) on ComfyUI's real runtime (in process, CPU, tiny
random-weight models): the transformer calls are the schedule's formula, counted here by a forward hook on the
diffusion model; a winner that survived every round and a candidate dropped in round 1 that the artist picks are
committed exactly as the stock graph; bad schedules are refused naming the input."""

import contextlib
import re

import pytest
import torch

from cachedsearch_core.budget import BudgetPlan, BudgetUnit
from cachedsearch_core.pick import Pick
from cachedsearch_core.pruned_budget import pruned_budget_width
from cachedsearch_core.pruning import CacheWindow, PruningSchedule, pruned_search_steps
from report_text import line_of, numbers, refusal
from scripts.tiny_models import WAN21_VAE_FILE, WAN22_A14B_FILES

VIDEO_LENGTH = 9  # 3 latent frames
STEPS = 8
SETTINGS = dict(steps=STEPS, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
OFF = dict(mode="off", tau=0.5, warmup_steps=1, cooldown_steps=1, static_interval=2)
STATIC = dict(OFF, mode="static")
SEED = 500
PROMPT = "a red ball on the grass"


def brute_force_steps(width, steps, rounds):
    """Each candidate's steps, summed: it runs until the round that drops it, or to the end."""
    running = list(range(width))
    reached = {index: steps for index in running}
    for step, keep in rounds:
        for index in running[keep:]:
            reached[index] = step
        running = running[:keep]
    return sum(reached.values())


@pytest.mark.parametrize("width, steps, rounds", [
    (8, 50, [(20, 4)]), (8, 50, [(10, 4), (20, 2)]), (16, 50, [(5, 8), (10, 4), (20, 2)]), (12, 16, [(3, 6)]),
])
def test_the_formula_is_every_candidates_steps_until_it_is_dropped(width, steps, rounds):
    assert pruned_search_steps(width, steps, rounds) == brute_force_steps(width, steps, rounds)
    assert pruned_search_steps(8, 50, [(20, 4)]) == 8 * 20 + 4 * 30  # the report's single prune: N p + k (T - p)


def test_a_schedule_reads_shares_steps_counts_and_halvings():
    plan = PruningSchedule("20%:4, 40%:2").plan(8, 50)
    assert [(r.step, r.keep) for r in plan.rounds] == [(10, 4), (20, 2)]
    assert plan.search_steps(8, 50) == 8 * 10 + 4 * 10 + 2 * 30
    halving = PruningSchedule(" 20% : 1/2 ,40%:1/2, 60%:1/2").plan(12, 50)
    assert [(r.step, r.keep) for r in halving.rounds] == [(10, 6), (20, 3), (30, 2)]  # a share rounds up
    assert [(r.step, r.keep) for r in PruningSchedule("3:3, 5:2").plan(4, 8).rounds] == [(3, 3), (5, 2)]


@pytest.mark.parametrize("text, facts", [
    ("20%", ["'20%'", "'20%'"]),  # the part it cannot read, in the whole text
    ("20%:4; 40%:2", ["'20%:4; 40%:2'"]),
    ("120%:4", [1, "'120%:4'", 120, 0, 100]),  # round, its text, where it prunes, the range of shares
    ("2.5:4", [1, "'2.5:4'"]),
    ("20%:3/2", [1, "'20%:3/2'", "3/2", 0, 1]),
    # rounds out of order need no steps to be refused: before anything runs (the Pruning Plan's validation)
    ("70%:4, 40%:2", [2, "'40%:2'", 40, 1, 70]),  # round 2 prunes at 40 %, round 1 at 70 %
    ("20%:4, 20%:2", [2, "'20%:2'", 20, 1, 20]),
    ("5:3, 3:2", [2, "'3:2'", 3, 1, 5]),
    ("3:3, 3:2", [2, "'3:2'", 3, 1, 3]),
])
def test_an_unreadable_schedule_is_refused_naming_the_input(text, facts):
    with pytest.raises(ValueError, match=refusal("schedule", *facts)):
        PruningSchedule(text)


WINDOW = [CacheWindow(0, 8, 1, 1)]  # the cache skips only at steps 2 to 6


@pytest.mark.parametrize("text, width, facts", [
    # a share and a step compare only at a search's steps: round 2 at step 3 of 8, round 1's 50 % at step 4
    ("50%:3, 3:2", 4, [2, "'3:2'", 3, 8, 1, 4]),
    # round 2 at step 7 of 8, outside the cache's window (8 steps, warmup 1, cooldown 1: between 1 and 7)
    ("3:3, 7:2", 4, [2, "'7:2'", 7, 8, 8, 1, 1, 1, 7]),
    ("1:3, 4:2", 4, [1, "'1:3'", 1, 8, 8, 1, 1]),
    # round 2 keeps 3 of the 3 that reach it (round 1 kept 3): keep at most 2
    ("3:3, 5:3", 4, [2, "'5:3'", 3, 3, 1, 3, 2]),
    ("3:2, 5:3", 4, [2, "'5:3'", 3, 2]),
    ("3:5, 5:2", 4, [1, "'3:5'", 5, 4, 4]),  # keeps 5 of 4 candidates: at most 4
    ("3:1/2, 4:1/2, 5:1/2", 2, [2, "'4:1/2'", 1, 1]),
])
def test_a_schedule_that_cannot_apply_is_refused_naming_the_input_and_the_round(text, width, facts):
    with pytest.raises(ValueError, match=refusal("schedule", *facts)):
        PruningSchedule(text).plan(width, STEPS).check_stages(width, WINDOW)


# On ComfyUI's real runtime.


class ScriptedVerifier:
    """Scores each preview with the next scripted number, in call order (one call per candidate still running, in
    seed order, round after round)."""

    name = "scripted"

    def __init__(self, scores):
        self.scores = list(scores)
        self.calls = 0

    def score(self, prompt, frames):
        self.calls += 1
        return torch.full((frames.shape[0],), self.scores.pop(0))


@pytest.fixture(scope="module")
def wan(engine):
    model, positive, negative, latent = engine.tiny_wan_t2v(length=VIDEO_LENGTH)
    return model, positive, negative, latent, engine.one("VAELoader", vae_name=WAN21_VAE_FILE)


@contextlib.contextmanager
def forward_calls(*patchers):
    """Counts every forward of each model's diffusion model (a torch forward hook, whatever ComfyUI wraps
    around it): the live list of counts, one per patcher."""
    counts = [0] * len(patchers)
    handles = []
    for index, patcher in enumerate(patchers):
        def hook(module, args, index=index):
            counts[index] += 1
        handles.append(patcher.model.diffusion_model.register_forward_pre_hook(hook))
    try:
        yield counts
    finally:
        for handle in handles:
            handle.remove()


def plan(engine, vae, scores, schedule, **inputs):
    return engine.one("CachedSearchPruningPlan", vae=vae, verifier=ScriptedVerifier(scores), prompt=PROMPT,
                      **(dict(keep=2, prune_fraction=0.4, prune_step=0, preview_frames=2, schedule=schedule) | inputs))


def sampler(engine, wan, cache, pruning, n=4):
    model, positive, negative, latent, _ = wan
    return engine.output("CachedSearchSampler", model=engine.one("CachedSearchApplyCache", model=model, **cache),
                         positive=positive, negative=negative, latent_image=latent, seed=SEED, num_candidates=n,
                         pruning=pruning, **SETTINGS)


def ksampler(engine, wan, seed):
    model, positive, negative, latent, _ = wan
    return engine.one("KSampler", model=model, positive=positive, negative=negative, latent_image=latent, seed=seed,
                      **SETTINGS)["samples"]


def recommit(engine, candidates, **inputs):
    with torch.inference_mode():
        output = engine.nodes["CachedSearchRecommit"].PREPARE_CLASS_CLONE({}).execute(
            candidates=candidates, **(dict(mode="commit") | inputs))
    return output.result


# Round 1 at step 3 scores 4 (keeps 2, 3, 4), round 2 at step 5 scores those 3 (keeps 2, 4).
TWO_ROUNDS = ("3:3, 5:2", [0.1, 0.9, 0.5, 0.7, 0.8, 0.2, 0.6], [(3, 3), (5, 2)], [SEED + 1, SEED + 3])
# Three rounds: at 2 keep 3 (1, 2, 4), at 4 keep 2 (2, 4), at 6 keep 1 (4).
THREE_ROUNDS = ("2:3, 4:2, 6:1", [0.9, 0.8, 0.1, 0.7, 0.1, 0.5, 0.6, 0.2, 0.3], [(2, 3), (4, 2), (6, 1)],
                [SEED + 3])


@pytest.mark.parametrize("schedule, scores, rounds, survivors", [TWO_ROUNDS, THREE_ROUNDS],
                         ids=["two rounds", "three rounds"])
def test_the_calls_of_a_schedule_are_its_formula_and_survivors_continue_where_they_stopped(
        engine, wan, schedule, scores, rounds, survivors):
    model, *_, vae = wan
    pruning = plan(engine, vae, scores, schedule)
    with forward_calls(model) as counted:
        output = sampler(engine, wan, OFF, pruning)
    drafts, candidates, report = output.result
    # cond and uncond run batched in one forward per step, so the forwards are the formula's steps.
    assert counted[0] == pruned_search_steps(4, STEPS, rounds)
    assert counted[0] == sum(d.calls_computed for d in candidates.drafts) + sum(
        p.draft.calls_computed for p in candidates.pruning.pruned)
    assert candidates.seeds == survivors
    assert [d.calls_computed for d in candidates.drafts] == [STEPS] * len(survivors)
    outcome = candidates.pruning
    assert [record.step for record in outcome.rounds] == [step for step, _ in rounds]
    assert {p.draft.seed: p.draft.calls_computed for p in outcome.pruned} == {
        SEED + index: outcome.dropped_at(index) for index in range(4) if SEED + index not in survivors}
    (cost,) = output.ui["cachedsearch_cost"]
    assert (cost["search_calls"], cost["full_calls"], cost["num_candidates"]) == (counted[0], 4 * STEPS, 4)
    assert f"pruned in {len(rounds)} rounds of {STEPS} steps" in report
    # The panel: each round's step, who was scored, kept and dropped; every row its score at each round reached.
    (shown,) = output.ui["cachedsearch_pruning"]
    assert [(r["step"], r["kept"]) for r in shown["rounds"]] == [
        (step, [i + 1 for i in record.kept]) for (step, _), record in zip(rounds, outcome.rounds)]
    rows = output.ui["cachedsearch_drafts"]
    assert all(len(row["round_scores"]) >= 1 and row["preview_score"] == row["round_scores"][-1]["score"]
               for row in rows)
    assert [row.get("prune_step") for row in rows] == [outcome.dropped_at(i) for i in range(4)]
    # Continued from where they stopped: the survivors' drafts are the unpruned drafts (up to the leftover-noise
    # round trip of each split), nothing recomputed.
    unpruned, _, _ = sampler(engine, wan, OFF, None).result
    reference = unpruned["samples"][[seed - SEED for seed in survivors]]
    assert (drafts["samples"] - reference).abs().max().item() <= 1e-4 * reference.abs().max().item()


@pytest.mark.slow  # test_pruning_node checks the same for one round in the fast tier
def test_rounds_keep_the_caches_schedule_of_the_unpruned_search(engine, wan):
    """Splits add no cooldown before and no warmup after a round: with the static schedule (every 2nd step after
    warmup 1, cooldown 1 of 8) survivors compute steps 0, 1, 3, 5, 7 as unpruned drafts do. A round at a step the
    cache would skip costs each survivor that one call: the cache's transformation vector does not cross a split."""
    vae = wan[4]
    schedule, scores, _, survivors = TWO_ROUNDS  # rounds at 3 and 5, both computed steps
    _, candidates, _ = sampler(engine, wan, STATIC, plan(engine, vae, scores, schedule)).result
    assert [(d.calls_computed, d.calls_skipped) for d in candidates.drafts] == [(5, 3)] * len(survivors)
    # Dropped at step 3 (computed 0, 1; skipped 2) and at 5 (computed 0, 1, 3; skipped 2, 4).
    assert sorted((p.draft.calls_computed, p.draft.calls_skipped) for p in candidates.pruning.pruned) == [
        (2, 1), (3, 2)]
    _, candidates, _ = sampler(engine, wan, STATIC, plan(engine, vae, THREE_ROUNDS[1], THREE_ROUNDS[0])).result
    # Rounds at 2, 4 and 6: the survivor computes 0, 1, 2, 3, 4, 5, 6, 7 (its skipped steps start each piece).
    assert [(d.calls_computed, d.calls_skipped) for d in candidates.drafts] == [(8, 0)]


def test_a_winner_of_every_round_and_a_candidate_dropped_in_round_1_commit_as_the_stock_ksampler(engine, wan):
    _, vae = wan[0], wan[4]
    skipping = dict(OFF, mode="adaptive")
    schedule, scores, _, survivors = TWO_ROUNDS
    _, candidates, _ = sampler(engine, wan, skipping, plan(engine, vae, scores, schedule)).result
    assert candidates.seeds == survivors and candidates.pruning.dropped_at(0) == 3
    assert all(d.calls_skipped > 0 for d in candidates.drafts)
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0.2, 0.7")
    delivered, seed, _ = recommit(engine, candidates, ranking=ranking)
    assert seed == SEED + 3 and torch.equal(delivered["samples"], ksampler(engine, wan, SEED + 3))
    # Candidate 1 was dropped in round 1; the artist picks it and its seed is generated at full compute.
    picked, picked_seed, report = recommit(engine, candidates, ranking=ranking, pick=1)
    assert picked_seed == SEED and torch.equal(picked["samples"], ksampler(engine, wan, SEED))
    # the report says who chose it and what the verifier preferred (candidate 4), in the product's own line
    you = Pick(candidate=1, seed=SEED, draft_index=None, picked_by="you", mode="commit", verifier_choice=(4, SEED + 3))
    assert you.report_line() in report


def test_bad_schedules_stop_the_search_before_sampling_naming_the_input(engine, wan):
    model, *_, vae = wan
    with forward_calls(model) as counted:
        # round 2 keeps 3 of the 3 that reach it; round 2 at step 2 of 8 before round 1's step 4; step 7 of 8
        # outside the cache's window (8 steps, warmup 1, cooldown 1)
        for schedule, facts in [("3:3, 5:3", [2, "'5:3'", 3, 3]), ("50%:3, 2:2", [2, "'2:2'", 2, 8, 1, 4]),
                                ("3:3, 7:2", [2, "'7:2'", 7, 8, 8, 1, 1])]:
            with pytest.raises(ValueError, match=refusal("schedule", *facts)):
                sampler(engine, wan, dict(OFF, mode="adaptive"), plan(engine, vae, [], schedule))
    assert counted == [0]
    node = engine.nodes["CachedSearchPruningPlan"]
    # the node's validation is the schedule's own refusal, word for word
    with pytest.raises(ValueError) as unreadable:
        PruningSchedule("20% 4")
    assert node.validate_inputs(schedule="20% 4") == str(unreadable.value)
    assert re.match(refusal("schedule", "'20% 4'", "'20% 4'"), str(unreadable.value))
    assert node.validate_inputs(schedule="") is True and node.validate_inputs(schedule=None) is True
    # falling steps are refused by the plan's own validation, before the graph runs
    assert re.match(refusal("schedule", 2, "'40%:2'", 40, 1, 70), node.validate_inputs(schedule="70%:4, 40%:2"))


def experts(engine):
    return tuple(engine.one("ModelSamplingSD3", shift=5.0, model=engine.one("UNETLoader", unet_name=name,
                                                                              weight_dtype="default"))
                 for name in WAN22_A14B_FILES["t2v"])


@pytest.mark.slow  # test_pruning_node prunes two experts in one round in the fast tier
def test_two_expert_rounds_at_the_switch_and_inside_the_low_noise_expert(engine, wan):
    _, positive, negative, latent, vae = wan
    high, low = experts(engine)
    graph = dict(positive=positive, negative=negative, latent_image=latent, seed=SEED, num_candidates=4, steps=8,
                 split_step=4, cfg=3.5, sampler_name="euler", scheduler="simple")
    cached_high, cached_low = (engine.one("CachedSearchApplyCache", model=m, **OFF) for m in (high, low))
    pruning = plan(engine, vae, [0.1, 0.9, 0.5, 0.7, 0.8, 0.2, 0.6], "4:3, 6:2")
    with forward_calls(high, low) as counted:
        _, candidates, report = engine.run("CachedSearchSamplerExperts", model_high=cached_high,
                                           model_low=cached_low, pruning=pruning, **graph)
    # All four run the high-noise expert (steps 0-4); three run the low one to 6, two to the end.
    assert counted == [4 * 4, 3 * 2 + 2 * 2] and sum(counted) == pruned_search_steps(4, 8, [(4, 3), (6, 2)])
    assert candidates.seeds == [SEED + 1, SEED + 3]
    assert [[stage.computed for stage in d.stage_calls] for d in candidates.drafts] == [[4, 4], [4, 4]]
    assert "pruned in 2 rounds of 8 steps" in report

    shared = dict(steps=8, cfg=3.5, sampler_name="euler", scheduler="simple", positive=positive, negative=negative)

    def stock(seed):
        leftover = engine.one("KSamplerAdvanced", model=high, add_noise="enable", noise_seed=seed,
                              latent_image=latent, start_at_step=0, end_at_step=4,
                              return_with_leftover_noise="enable", **shared)
        return engine.one("KSamplerAdvanced", model=low, add_noise="disable", noise_seed=0, latent_image=leftover,
                          start_at_step=4, end_at_step=10000, return_with_leftover_noise="disable", **shared)["samples"]

    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0, 1")
    delivered, seed, _ = recommit(engine, candidates, ranking=ranking)
    assert seed == SEED + 3 and torch.equal(delivered["samples"], stock(SEED + 3))
    picked, picked_seed, _ = recommit(engine, candidates, ranking=ranking, pick=1)  # dropped at the switch
    assert picked_seed == SEED and torch.equal(picked["samples"], stock(SEED))


def test_advanced_sampler_prunes_in_rounds_inside_its_sigmas(engine, wan):
    model, positive, negative, latent, vae = wan
    cached = engine.one("CachedSearchApplyCache", model=model, **OFF)
    guider = engine.one("CFGGuider", model=cached, positive=positive, negative=negative, cfg=5.0)
    sampler_ = engine.one("KSamplerSelect", sampler_name="euler")
    sigmas = engine.one("BasicScheduler", model=cached, scheduler="simple", steps=8, denoise=1.0)
    inputs = dict(guider=guider, sampler=sampler_, sigmas=sigmas, latent_image=latent, seed=SEED, num_candidates=4)
    schedule, scores, rounds, survivors = THREE_ROUNDS
    with forward_calls(model) as counted:
        drafts, candidates, _ = engine.run("CachedSearchSamplerAdvanced", **inputs,
                                           pruning=plan(engine, vae, scores, schedule))
    assert counted == [pruned_search_steps(4, 8, rounds)] and candidates.seeds == survivors
    unpruned, _, _ = engine.run("CachedSearchSamplerAdvanced", **inputs)
    reference = unpruned["samples"][[seed - SEED for seed in survivors]]
    assert (drafts["samples"] - reference).abs().max().item() <= 1e-4 * reference.abs().max().item()


# Width from savings: a Budget and a Pruning Plan on one sampler.


def checked_plan_at(schedule, steps=STEPS):
    def plan_at(width):
        plan = PruningSchedule(schedule).plan(width, steps)
        plan.check_stages(width, [CacheWindow(0, steps)])
        return plan
    return plan_at


halving_plan_at = checked_plan_at("3:1/2, 5:1/2")


def test_a_budget_buys_the_widest_n_whose_schedule_and_commit_fit():
    # Steps at N: 3 N + 2 ceil(N / 2) + 3 ceil(N / 4); N = 1 and 2 cannot halve twice.
    chosen = pruned_budget_width(halving_plan_at, STEPS, BudgetPlan(rollouts=4, max_candidates=16))
    assert (chosen.width, chosen.width_steps, chosen.wider_steps) == (4, 19, 27)
    assert chosen.predicted_steps == 19 + STEPS <= 4 * STEPS < chosen.wider_steps + STEPS
    assert pruned_budget_width(halving_plan_at, STEPS, BudgetPlan(rollouts=4, max_candidates=3)).width == 3
    # The report's single prune at 50 steps (8 to step 20, 4 on) fits best-of-4 only by the cache's skips: refused.
    # 4 rollouts; the schedule runs 200 steps at N = 4, plus a 50-step commit, more than best-of-4's 200
    with pytest.raises(ValueError, match=refusal("budget_rollouts", 4, 200, 4, 50, 4, 200)):
        pruned_budget_width(checked_plan_at("40%:4", 50), 50, BudgetPlan(rollouts=4))
    with pytest.raises(ValueError, match=refusal("budget_unit", repr(BudgetUnit.WALL_TIME.value))):
        pruned_budget_width(halving_plan_at, STEPS, BudgetPlan(rollouts=4, unit=BudgetUnit.WALL_TIME))
    with pytest.raises(ValueError, match=refusal("schedule", 2, "'5:1/2'")):  # fits no width: the schedule's error
        pruned_budget_width(halving_plan_at, STEPS, BudgetPlan(rollouts=4, max_candidates=2))


def test_a_budget_with_a_pruning_plan_explores_the_widest_n_and_commits_exactly(engine, wan):
    model, positive, negative, latent, vae = wan
    pruning = plan(engine, vae, [0.1, 0.9, 0.5, 0.7, 0.8, 0.2, 0.3], "3:1/2, 5:1/2")
    budget = engine.one("CachedSearchBudget", budget_rollouts=4, budget_unit="transformer calls", max_candidates=16)
    with forward_calls(model) as counted:
        output = engine.output("CachedSearchSampler", model=engine.one("CachedSearchApplyCache", model=model, **OFF),
                               positive=positive, negative=negative, latent_image=latent, seed=SEED,
                               num_candidates=2, pruning=pruning, budget=budget, **SETTINGS)
    _, candidates, report = output.result
    assert len(candidates.pruning.seeds) == 4 and counted == [19]  # num_candidates is ignored
    assert candidates.seeds == [SEED + 1]
    # best-of-4 runs 4 x 8 = 32 steps; N = 4 runs 19 + commit 8 = 27; N = 5 would run 35
    assert numbers(line_of(report, "budget: full")) == [4, 4, 8, 32, 4, 19, 8, 27, 5, 35]
    (shown,) = output.ui["cachedsearch_budget"]
    assert (shown["width"], shown["budget"], shown["predicted_total"], shown["pruned"]) == (4, 32, 27, True)
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="1")
    with forward_calls(model) as counted:
        delivered, seed, commit_report = recommit(engine, candidates, ranking=ranking)
    assert counted == [STEPS] and seed == SEED + 1
    assert torch.equal(delivered["samples"], ksampler(engine, wan, SEED + 1))
    # measured 27 calls with the commit, 84.4 % of full best-of-4's 32
    assert numbers(line_of(commit_report, "budget: measured")) == [27, 84.4, 4, 32]
