"""The fixed-budget search on ComfyUI's real samplers (in process, CPU), and through a real server."""

import pytest
import torch

from cachedsearch_core.budget import BudgetPlan, budget_width
from report_text import line_of, numbers, refusal
from scripts.tiny_models import WAN21_T2V_FILE

pytestmark = pytest.mark.slow  # in process, but several seconds a test: not in the fast tier

LATENT = dict(width=32, height=32, length=5, batch_size=1)
SETTINGS = dict(steps=8, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
SKIPPING = dict(mode="adaptive", tau=0.15, warmup_steps=1, cooldown_steps=1, static_interval=2)
SEED = 120
WIDEST = 8


@pytest.fixture(scope="module")
def plain_model(engine):
    return engine.one("ModelSamplingSD3", model=engine.one("UNETLoader", unet_name=WAN21_T2V_FILE,
                                                           weight_dtype="default"), shift=8.0)


@pytest.fixture(scope="module")
def wan(engine, plain_model):
    model = plain_model
    positive = engine.one("CachedSearchTestConditioning", text_seed=1, tokens=8, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=8, pooled=False)
    latent = engine.one("EmptyHunyuanLatentVideo", **LATENT)
    return engine.one("CachedSearchApplyCache", model=model, **SKIPPING), positive, negative, latent


def plan(engine, rollouts, unit="transformer calls", max_candidates=WIDEST):
    return engine.one("CachedSearchBudget", budget_rollouts=rollouts, budget_unit=unit, max_candidates=max_candidates)


def search(engine, wan, budget=None, n=3, seed=SEED, model=None):
    cached, positive, negative, latent = wan
    return engine.run("CachedSearchSampler", model=model or cached, positive=positive, negative=negative,
                      latent_image=latent, seed=seed, num_candidates=n, budget=budget, **SETTINGS)


def budget_lines(report):
    """The report's budget lines (in transformer calls: no wall time in them)."""
    return [line for line in report.splitlines() if line.startswith("budget:")]


@pytest.fixture(scope="module")
def widest(engine, wan):
    """The fixed-width search over all WIDEST seeds: each draft's cost as the cache counted it."""
    drafts, candidates, _ = search(engine, wan, n=WIDEST)
    costs = [draft.calls_computed for draft in candidates.drafts]
    full = {draft.calls_computed + draft.calls_skipped for draft in candidates.drafts}
    assert len(full) == 1 and len(set(costs)) > 1  # seeds differ in cost: the width depends on which ones fit
    return drafts, costs, full.pop()


@pytest.mark.parametrize("rollouts", [2, 3, 4, 5])
def test_call_budget_drafts_the_largest_width_that_fits_and_the_same_twice(engine, wan, widest, rollouts):
    widest_drafts, costs, full = widest
    expected = budget_width(costs, full, rollouts)
    assert 1 <= expected < WIDEST
    runs = [search(engine, wan, budget=plan(engine, rollouts)) for _ in range(2)]
    for drafts, candidates, report in runs:
        assert candidates.seeds == [SEED + index for index in range(expected)]
        assert torch.equal(drafts["samples"], widest_drafts["samples"][:expected])  # the same drafts as unbudgeted
        outcome = candidates.budget
        assert (outcome.width, outcome.full_cost) == (expected, full)
        assert list(outcome.draft_costs) == costs[:expected]  # the meter counted what the cache computed
        allowance = (rollouts - 1) * full
        assert outcome.stopped_draft_cost == allowance - sum(costs[:expected])  # stopped at the last call that fit
        assert f"budget: N = {expected} chosen (draft {expected + 1} stopped after" in report
        assert "deterministic" in report
    assert runs[0][1].budget == runs[1][1].budget
    assert budget_lines(runs[0][2]) == budget_lines(runs[1][2])


def test_recommit_compares_the_predicted_and_measured_full_rollout(engine, wan, widest, plain_model):
    _, _, full = widest
    _, candidates, _ = search(engine, wan, budget=plan(engine, 3))
    scores = " ".join(str(index % 2) for index in range(len(candidates)))
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores=scores)
    delivered, seed, report = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking,
                                         mode="commit")
    _, positive, negative, latent = wan
    reference = engine.one("KSampler", model=plain_model, positive=positive, negative=negative, latent_image=latent,
                           seed=SEED + 1, **SETTINGS)
    assert seed == SEED + 1
    assert torch.equal(delivered["samples"], reference["samples"])
    assert not torch.equal(candidates.draft_latents[1:2], reference["samples"])  # the draft itself was lossy
    assert numbers(line_of(report, "budget: recommit"))[:2] == [full, full]  # predicted and measured calls


def scripted_clock(model, seconds_per_call):
    """A clone of ``model`` whose computed transformer calls each take ``seconds_per_call`` on the returned clock."""
    import comfy.patcher_extension

    now = {"seconds": 0.0}

    def tick(executor, *args, **kwargs):
        output = executor(*args, **kwargs)
        now["seconds"] += seconds_per_call
        return output

    timed = model.clone()
    # Added after the cache's wrapper: it runs inside it and sees only the calls the cache computes.
    timed.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "test_scripted_clock", tick)
    return timed, lambda: now["seconds"]


@pytest.mark.parametrize("seconds_per_call", [1.0, 0.25])
def test_wall_time_budget_with_scripted_costs_fits_the_largest_width(engine, wan, widest, seconds_per_call):
    budget_search = engine.extension.nodes.budget_search
    _, costs, full = widest
    cached, positive, negative, latent = wan
    timed, clock = scripted_clock(cached, seconds_per_call)
    stages = engine.extension.nodes.stages
    recipe = stages.StagedRecipe.single(stages.KSamplerStage(timed, positive, negative, **SETTINGS), latent)
    with torch.inference_mode():
        candidates = budget_search.run_budget_search(recipe, SEED, BudgetPlan(3, "wall time", WIDEST), clock=clock)
    outcome = candidates.budget
    # Seconds are calls x seconds_per_call: the full rollout predicted from the computed fraction is exact.
    assert outcome.full_cost == pytest.approx(full * seconds_per_call)
    assert outcome.width == budget_width([cost * seconds_per_call for cost in costs], full * seconds_per_call, 3)
    assert "N depends on wall time" in candidates.report()


def test_wall_time_budget_on_the_real_clock_reports_predicted_and_measured_seconds(engine, wan):
    _, candidates, report = search(engine, wan, budget=plan(engine, 3, unit="wall time", max_candidates=4))
    outcome = candidates.budget
    assert 1 <= outcome.width == len(candidates) <= 4
    assert outcome.full_cost > 0 and outcome.plan.unit.value == "wall time"
    assert "N depends on wall time" in report
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates,
                         scores=" ".join("1" for _ in range(len(candidates))))
    _, _, recommit_report = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    assert numbers(line_of(recommit_report, "budget: recommit"))[0] == round(outcome.full_cost, 2)  # predicted s
    _, _, kept_report = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="keep")
    assert not any(line.startswith("budget: recommit") for line in kept_report.splitlines())  # nothing measured


def test_budget_on_the_advanced_and_expert_samplers(engine, wan, widest):
    _, costs, full = widest
    cached, positive, negative, latent = wan
    guider = engine.one("CFGGuider", model=cached, positive=positive, negative=negative, cfg=SETTINGS["cfg"])
    sigmas = engine.one("BasicScheduler", model=cached, scheduler="simple", steps=SETTINGS["steps"], denoise=1.0)
    _, candidates, report = engine.run("CachedSearchSamplerAdvanced", guider=guider,
                                       sampler=engine.one("KSamplerSelect", sampler_name="euler"), sigmas=sigmas,
                                       latent_image=latent, seed=SEED, num_candidates=2, budget=plan(engine, 3))
    assert len(candidates) == budget_width(costs, full, 3)

    # Two stages on one model: a draft's cost is the sum over its stages, the full rollout every call of both.
    experts_inputs = dict(model_high=cached, model_low=cached, positive=positive, negative=negative,
                          latent_image=latent, seed=SEED, steps=8, split_step=4, cfg=5.0, sampler_name="euler",
                          scheduler="simple")
    _, widest_experts, _ = engine.run("CachedSearchSamplerExperts", num_candidates=WIDEST, **experts_inputs)
    expert_costs = [draft.calls_computed for draft in widest_experts.drafts]
    _, candidates, report = engine.run("CachedSearchSamplerExperts", num_candidates=2, budget=plan(engine, 3),
                                       **experts_inputs)
    assert len(candidates) == budget_width(expert_costs, full, 3)
    assert [draft.stage_calls for draft in candidates.drafts] == \
        [draft.stage_calls for draft in widest_experts.drafts[: len(candidates)]]
    assert "high noise: " in report and f"budget: N = {len(candidates)} chosen" in report


def test_progress_bar_ends_full_when_the_budget_stops_the_search_early(engine, wan, widest):
    """The bar spans max_candidates x steps (the width is not known in advance); a search the budget stops at a
    smaller width still ends with a full bar, and the bar never runs backwards."""
    import comfy.utils

    seen = []
    comfy.utils.set_progress_bar_global_hook(lambda value, total, *_, **__: seen.append((value, total)))
    try:
        _, candidates, _ = search(engine, wan, budget=plan(engine, 3))
    finally:
        comfy.utils.set_progress_bar_global_hook(None)
    assert candidates.budget.width < WIDEST
    assert {total for _, total in seen} == {WIDEST * SETTINGS["steps"]}
    values = [value for value, _ in seen]
    assert values == sorted(values) and values[-1] == WIDEST * SETTINGS["steps"]
    assert values[-2] <= (candidates.budget.width + 1) * SETTINGS["steps"]  # before the fill: drafts' own steps


def test_max_candidates_ends_the_search_with_budget_left(engine, wan):
    _, candidates, report = search(engine, wan, budget=plan(engine, 8, max_candidates=2))
    assert candidates.seeds == [SEED, SEED + 1]
    assert "max_candidates 2 reached" in report


def test_bad_budget_inputs_get_errors_naming_the_input(engine, wan):
    node = engine.nodes["CachedSearchBudget"]
    assert "budget_rollouts: got 1" in node.validate_inputs(budget_rollouts=1, budget_unit="transformer calls",
                                                            max_candidates=8)
    assert "max_candidates: got 65" in node.validate_inputs(budget_rollouts=4, budget_unit="wall time",
                                                            max_candidates=65)
    assert node.validate_inputs(budget_rollouts=4, budget_unit="wall time", max_candidates=8) is True
    with pytest.raises(ValueError, match=refusal("budget_unit", "'seconds'")):
        plan(engine, 4, unit="seconds")
    with pytest.raises(ValueError, match="seed: got 18446744073709551612; with 8 candidates"):
        search(engine, wan, budget=plan(engine, 4), seed=0xFFFF_FFFF_FFFF_FFFF - 3)



def test_cancel_mid_search_leaves_nothing_behind(engine, wan):
    import comfy.model_management
    import comfy.patcher_extension
    import comfy.utils

    cached = wan[0]
    budget = plan(engine, 3)
    clean_drafts, clean_candidates, clean_report = search(engine, wan, budget=budget)
    pressing, counts = engine.press_cancel_at(cached, run=2, call=3)
    comfy.utils.set_progress_bar_global_hook(None)
    try:
        with pytest.raises(comfy.model_management.InterruptProcessingException):
            search(engine, wan, budget=budget, model=pressing)
    finally:
        comfy.model_management.interrupt_current_processing(False)
    assert counts["runs"] == 2
    assert comfy.utils.PROGRESS_BAR_HOOK is None
    full_compute = engine.extension.nodes.full_compute
    for model in (cached, pressing):
        for wrapper_type in (comfy.patcher_extension.WrappersMP.PREDICT_NOISE,
                             comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL):
            assert not model.get_wrappers(wrapper_type, full_compute.METER_KEY)
            options = model.model_options["transformer_options"].get("wrappers", {})
            assert full_compute.METER_KEY not in options.get(wrapper_type, {})
    # The meter's hook on the shared transformer block went with the cancel.
    assert not full_compute.first_transformer_block(cached)._forward_pre_hooks
    drafts, candidates, report = search(engine, wan, budget=budget)
    assert torch.equal(drafts["samples"], clean_drafts["samples"])
    assert candidates.budget == clean_candidates.budget
    assert budget_lines(report) == budget_lines(clean_report)


def test_budget_search_through_the_server_reports_the_budget_line(comfy_server):
    from scripts.graphs import wan_search

    graph = wan_search(seed=SEED, steps=8, verifier_prompt="a red fox", filename_prefix="budget")
    graph["budget"] = {"class_type": "CachedSearchBudget",
                       "inputs": {"budget_rollouts": 3, "budget_unit": "transformer calls", "max_candidates": 6}}
    graph["search"]["inputs"]["budget"] = ["budget", 0]
    entry = comfy_server.run_prompt(graph)
    outputs = entry["outputs"]
    (budget,) = outputs["search"]["cachedsearch_budget"]
    assert budget["unit"] == "transformer calls" and budget["deterministic"] is True
    assert 1 <= budget["width"] == len(outputs["search"]["cachedsearch_drafts"]) <= 6
    assert budget["predicted_total"] <= budget["budget"] == 3 * budget["full_cost"]
    (delivery,) = outputs["recommit"]["cachedsearch_delivery"]
    assert delivery["budget"]["measured_commit"] == budget["full_cost"]
    assert f"budget: N = {budget['width']} chosen" in outputs["recommit"]["text"][0]
    info = comfy_server.get("/object_info/CachedSearchBudget")["CachedSearchBudget"]
    assert all(options[1].get("tooltip") for options in info["input"]["required"].values())
    sampler = comfy_server.get("/object_info/CachedSearchSampler")["CachedSearchSampler"]
    assert "wall time" in sampler["input"]["optional"]["budget"][1]["tooltip"]
    status, body = comfy_server.queue_prompt(dict(graph, budget={**graph["budget"], "inputs": {
        **graph["budget"]["inputs"], "budget_rollouts": 1}}))
    assert status == 400
    assert "budget_rollouts" in str(body["node_errors"]["budget"])
