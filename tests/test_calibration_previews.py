"""Calibrate records each cached rollout's previews (issue 51 item 1) through the one preview seam
(``cachedsearch_core/previews.py``, ``nodes/previews.py``): the scores equal what a pruned search's previews score
for the same seed (within the VAE's rounding), an older saved rollout without previews is completed (sampled only to
its last preview step, its own scores kept), so is a rollout a cancel left without them, and the cost before the run
names the previews' verifier calls."""

import dataclasses
import statistics
import time

import pytest
import torch

from cachedsearch_core.previews import (
    X0_PREVIEW,
    PreviewCost,
    RolloutPreviews,
    cached_rollout,
    preview_call_equivalents,
    preview_steps,
)
from cachedsearch_core.pruning import PREVIEW_FRAMES, CacheWindow
from cachedsearch_core.saved_rollouts import SavedRollout

STEPS, WARMUP, COOLDOWN, TAU = 8, 1, 1, 0.3
SEEDS = (5, 6)
FRAMES = 2  # Calibrate's frames_per_candidate: what its rollouts are judged on, not its previews
PROMPT = "a red ball"
# How far two scores of one preview may differ: the VAE's output moves in its last bits with how many clips one call
# decodes (Calibrate decodes a prompt's seeds together, a pruned search each candidate alone, and ComfyUI splits a
# call by free memory), and a pixel that crosses a level moves the score (4e-6 of it once on these models). Another
# seed, step or frame moves it by far more (docs/pruning-and-budget.md, "Calibrate records previews").
VAE_ROUNDING = 1e-4


def same_previews(scores, expected) -> bool:
    """Whether two sequences of preview scores (floats) agree, each within ``VAE_ROUNDING`` of itself."""
    return list(scores) == pytest.approx(list(expected), rel=VAE_ROUNDING, abs=0)


def test_preview_steps_spread_over_where_a_pruning_plan_may_prune():
    # warmup 1, cooldown 1 of 8: a Pruning Plan prunes at 2..6; at most 4 of them, first and last included
    assert preview_steps([CacheWindow(0, 8, 1, 1)], 8, most=4) == (2, 3, 5, 6)
    assert preview_steps([CacheWindow(0, 8, 1, 1)], 8, most=6) == (2, 3, 4, 5, 6)
    assert preview_steps([CacheWindow(0, 8, 1, 1)], 8) == (2, 6)  # by default the first and the last
    # two experts: the switch at 4 is a prune step too, though both windows exclude it
    experts = [CacheWindow(0, 4, 1, 1), CacheWindow(4, 4, 1, 1)]
    assert preview_steps(experts, 8) == (2, 4, 6)
    assert preview_steps([CacheWindow(0, 8, 1, 1), CacheWindow(8, 8, 1, 1)], 16) == (2, 8, 14)  # the switch, always
    assert preview_steps([CacheWindow(0, 4, 2, 2)], 4) == ()


def test_a_previews_record_reads_back_and_an_older_rollout_has_none():
    previews = RolloutPreviews("x0", (2, 5), ((0.25,), (0.5,)), (4, 7), 0.125)
    rollout = SavedRollout((0.75,), 2.0, 16, 6, previews)
    assert SavedRollout.from_record(rollout.record()) == rollout
    older = {"scores": [0.75], "seconds": 2.0, "calls": 16, "skipped": 6}
    assert SavedRollout.from_record(older).previews is None
    with pytest.raises(ValueError, match="previews"):
        SavedRollout.from_record({**older, "previews": {**previews.record(), "steps": [5, 2]}})


def test_the_chooser_reads_exact_calls_before_each_scored_step_and_in_all():
    previews = RolloutPreviews("x0", (2, 5), ((0.25, 9.0), (0.5, 8.0)), (4, 7), 0.125)
    record = cached_rollout(prompt=0, seed=3, tau=TAU, score=0.75, computed=12, steps=STEPS, previews=previews)
    assert record.previews == {2: 0.25, 5: 0.5}
    spent = [sum(record.computed_calls[:step]) for step in range(STEPS + 1)]
    assert (spent[2], spent[5], spent[STEPS]) == (4, 7, 12)


def test_a_previews_cost_in_calls_is_its_median_seconds_over_a_computed_calls():
    # Previews of 0.2, 0.3 (median) and 2.0 s each (the first loaded the VAE); full rollouts at 0.1 s a call (the
    # median; the first loaded the model, 0.5 s a call).
    recorded = [RolloutPreviews("x0", (2, 5), ((0.25,), (0.5,)), (4, 7), 0.6),
                RolloutPreviews("x0", (2,), ((0.25,),), (4,), 2.0),
                RolloutPreviews("x0", (2,), ((0.25,),), (4,), 0.2)]
    full = [(30.0, 60), (6.0, 60), (5.0, 60)]
    assert preview_call_equivalents(recorded, full) == pytest.approx(0.3 / 0.1)
    with pytest.raises(ValueError, match="none recorded"):
        preview_call_equivalents([], full)
    with pytest.raises(ValueError, match="full rollouts"):
        preview_call_equivalents(recorded, [(0.0, 60)])


def test_the_cost_before_the_run_counts_a_verifier_call_per_preview_step_of_each_cached_rollout():
    cost = PreviewCost(cached_rollouts=12, steps=(2, 4, 6), seeds=12)  # one tau: no seed's previews are shared
    assert cost.verifier_calls == 36
    assert cost.as_dict() == {"preview_verifier_calls": 36, "preview_steps": [2, 4, 6]}
    assert "36 more verifier calls (" in cost.sentence() and "2, 4, 6" in cost.sentence()
    # three taus of 4 seeds: a preview the taus of a seed reach alike is scored once, so 36 at most
    shared = PreviewCost(cached_rollouts=12, steps=(2, 4, 6), seeds=4)
    assert "36 more verifier calls at most" in shared.sentence() and "scored once" in shared.sentence()


@pytest.fixture
def node_run():
    """Inference mode, as ComfyUI runs a node (the models were loaded in it)."""
    with torch.inference_mode():
        yield


@pytest.fixture(scope="module")
def world(engine):
    from scripts.tiny_models import WAN21_VAE_FILE

    model, positive, negative, latent = engine.tiny_wan_t2v()
    vae = engine.one("VAELoader", vae_name=WAN21_VAE_FILE)
    verifier = engine.one("CachedSearchLoadImageReward", ckpt_name="ImageReward.pt", dtype="fp32")
    return model, positive, negative, latent, vae, verifier


@pytest.fixture(scope="module")
def long_world(engine, world):
    """``world`` on a video of as many latent frames as a preview shows at the Pruning Plan's default."""
    latent = engine.one("EmptyHunyuanLatentVideo", width=32, height=32, length=4 * PREVIEW_FRAMES - 3, batch_size=1)
    assert latent["samples"].shape[2] == PREVIEW_FRAMES
    return (*world[:3], latent, *world[4:])


def _rollouts(engine, world, folder, seeds=SEEDS):
    """A calibration's rollouts of one prompt on ``seeds``, saved in ``folder``."""
    core = engine.extension.cachedsearch_core  # the loaded extension's, which Calibrate uses
    rollouts_module = engine.extension.nodes.calibration_rollouts
    model, positive, negative, latent, vae, verifier = world
    judge = rollouts_module.Judge(vae, verifier, PROMPT, FRAMES, latent, core.video_score.AVERAGE, "")
    saved = rollouts_module.SavedSetup(core.saved_rollouts.SavedRollouts(str(folder)), "test setup")
    plan = core.calibration.CalibrationPlan((TAU,), len(seeds), seeds[0], 0.9)
    prompts = [rollouts_module.CalibrationPrompt(PROMPT, positive)]
    return rollouts_module.Rollouts(None, plan, prompts, STEPS, judge, "test", saved, [], len(seeds))


def _cached_arm(engine, world):
    """Our cache at TAU on the model, and the recipe of a prompt on it."""
    search = engine.extension.nodes
    model, _, negative, latent, _, _ = world
    settings = search.calibration_rollouts.stage_arm_settings(TAU, WARMUP, COOLDOWN)
    cached = search.calibration_rollouts.cached_model(model, WARMUP, COOLDOWN, TAU)

    def recipe_of(prompt):
        stage = search.stages.KSamplerStage(cached, prompt.positive, negative, STEPS, 5.0, "euler", "simple")
        return search.stages.StagedRecipe.single(stage, latent)
    return settings, recipe_of


@pytest.mark.slow  # in process, several seconds
def test_recorded_previews_are_the_pruned_search_previews_of_the_same_seeds(engine, long_world, tmp_path,
                                                                            node_run, monkeypatch):
    """Of a Pruning Plan at its default preview frames, whatever K Calibrate judges its rollouts on: Budget "auto"
    then applies at the Pruning Plan's default. The seeds' 4 estimates decoded 2 a call after the first alone (timed
    to price them), so in calls of 1, 2 and 1: each preview stays with its seed and step across the calls."""
    search = engine.extension.nodes
    monkeypatch.setattr(search.previews, "DECODED_TOGETHER", 2)
    monkeypatch.setattr(search.previews, "TIMED_ALONE", 1)
    settings, recipe_of = _cached_arm(engine, long_world)
    rollouts = _rollouts(engine, long_world, tmp_path)
    assert rollouts.judge.preview_frames == PREVIEW_FRAMES != FRAMES  # what the memory records
    rollouts.run("tau", "tau", settings, recipe_of)
    recorded = [rollouts.recorded_previews["tau", 0, seed] for seed in SEEDS]
    steps = preview_steps([CacheWindow(0, STEPS, WARMUP, COOLDOWN)], STEPS)
    assert all(previews.steps == steps and previews.kind == X0_PREVIEW.name for previews in recorded)
    _, _, _, _, vae, verifier = long_world
    recipe = recipe_of(rollouts.prompts[0])
    default_frames = search.pruning_nodes.PruningPlanNode.define_schema().inputs
    (frames_input,) = [widget for widget in default_frames if widget.id == "preview_frames"]
    for index, step in enumerate(steps):
        pruning = search.pruning_nodes.PreviewPruning(0.5, step, 1, frames_input.default, vae, verifier, PROMPT)
        outcome = pruning.search(recipe, list(SEEDS)).pruning
        assert same_previews(outcome.preview_scores, [previews.scores[index][0] for previews in recorded])
        # what each pruned candidate computed before the step is what the rollout computed before it
        dropped = {candidate.draft.seed: candidate.draft.calls_computed for candidate in outcome.pruned}
        assert all(dropped[seed] == previews.computed_before[index]
                   for seed, previews in zip(SEEDS, recorded) if seed in dropped)
    # the seeds' previews differ by more than the rounding at every step, and so do a seed's steps
    assert not any(same_previews(*(previews.scores[index] for previews in recorded)) for index in range(len(steps)))
    assert not any(same_previews(previews.scores[0], previews.scores[-1]) for previews in recorded)


@pytest.mark.slow
def test_an_older_saved_rollout_is_completed_not_run_again(engine, world, tmp_path, node_run):
    model = world[0]
    settings, recipe_of = _cached_arm(engine, world)
    first = _rollouts(engine, world, tmp_path)
    first.run("tau", "tau", settings, recipe_of)
    keys = [first.saved.key(first.prompts[0], seed, settings) for seed in SEEDS]
    whole = [first.saved.rollouts.get(key) for key in keys]
    # as an older version saved them: no previews, and final scores of their own that a re-run would not give
    older = [dataclasses.replace(rollout, scores=(123.0 + index,), previews=None)
             for index, rollout in enumerate(whole)]
    for key, rollout in zip(keys, older):
        first.saved.rollouts.add(key, rollout)

    calls = []
    # a computed call runs the patch embedding; a skipped one does not
    hook = model.model.diffusion_model.patch_embedding.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        again = _rollouts(engine, world, tmp_path)
        again.run("tau", "tau", settings, recipe_of)
    finally:
        hook.remove()
    completed = [again.saved.rollouts.get(key) for key in keys]
    for before, after, rollout in zip(older, completed, whole):
        assert after == dataclasses.replace(before, previews=after.previews)  # its own scores and costs kept
        assert same_previews([score for (score,) in after.previews.scores],
                             [score for (score,) in rollout.previews.scores])
        assert after.previews.computed_before == rollout.previews.computed_before
    # each sampled only to its last preview step (the calls computed before it), one verifier call per step
    assert len(calls) == sum(rollout.previews.computed_before[-1] for rollout in whole) < \
        sum(rollout.calls - rollout.skipped for rollout in whole)
    assert again.scored_previews.verifier_calls == sum(len(rollout.previews.steps) for rollout in whole)
    assert again.reused == len(SEEDS)


@pytest.mark.slow
def test_a_cancel_before_a_prompts_previews_are_scored_loses_only_them(engine, world, tmp_path, node_run):
    """A prompt's previews are scored together once all its seeds ran; each rollout is saved as it finishes. A
    cancel in the last seed's rollout leaves the first saved without previews: the next run completes it (sampled
    only to its last preview step) and computes the other, and records what an uninterrupted run records."""
    import comfy.model_management

    settings, recipe_of = _cached_arm(engine, world)
    alone = _rollouts(engine, world, tmp_path / "uninterrupted")
    alone.run("tau", "tau", settings, recipe_of)
    pressing, counts = engine.press_cancel_at(world[0], 2, 1)  # the second seed's first call
    _, pressed_recipe_of = _cached_arm(engine, (pressing, *world[1:]))
    cancelled = _rollouts(engine, world, tmp_path / "resumed")
    try:
        with pytest.raises(comfy.model_management.InterruptProcessingException):
            cancelled.run("tau", "tau", settings, pressed_recipe_of)
    finally:
        comfy.model_management.interrupt_current_processing(False)
    keys = [cancelled.saved.key(cancelled.prompts[0], seed, settings) for seed in SEEDS]
    first, second = (cancelled.saved.rollouts.get(key) for key in keys)
    assert counts["runs"] == 2 and first is not None and first.previews is None and second is None

    again = _rollouts(engine, world, tmp_path / "resumed")
    again.run("tau", "tau", *(_cached_arm(engine, (pressing, *world[1:]))))
    uninterrupted = [alone.saved.rollouts.get(key) for key in keys]
    # the first sampled again only to its last preview step (a run of its own), the second in full
    assert again.reused == 1 and counts["runs"] == 4
    for resumed, whole in zip((again.saved.rollouts.get(key) for key in keys), uninterrupted):
        assert (resumed.scores, resumed.calls, resumed.skipped) == (whole.scores, whole.calls, whole.skipped)
        assert resumed.previews.computed_before == whole.previews.computed_before
        assert same_previews([score for (score,) in resumed.previews.scores],
                             [score for (score,) in whole.previews.scores])


def _default_sweep(engine, world, folder, every_preview: bool = False):
    """Calibrate's default sweep (4 seeds, the full arm and 5 taus) of one prompt, saved in ``folder``: the
    rollouts and the seconds they took; with ``every_preview``, every preview scored anew and decoded alone (as a
    pruned search pays for it)."""
    search = engine.extension.nodes
    rollouts_module = search.calibration_rollouts
    model, _, negative, latent, _, _ = world
    rollouts = _rollouts(engine, world, folder, seeds=tuple(range(4)))
    if every_preview:
        class EveryPreview(search.previews.ScoredPreviews):
            def scores(self, scorer, model, estimates):
                scored = []
                for estimate in estimates:
                    self._scored.clear()
                    scored += super().scores(scorer, model, [estimate])
                return scored
        rollouts.scored_previews = EveryPreview()

    def arm(tau):
        cached = rollouts_module.cached_model(model, WARMUP, COOLDOWN, tau)

        def recipe_of(prompt):
            stage = search.stages.KSamplerStage(cached, prompt.positive, negative, STEPS, 5.0, "euler", "simple")
            return search.stages.StagedRecipe.single(stage, latent)
        return rollouts_module.stage_arm_settings(tau, WARMUP, COOLDOWN), recipe_of

    start = time.perf_counter()
    for tau in (None, *engine.extension.cachedsearch_core.calibration.DEFAULT_TAUS):
        rollouts.run(f"tau {tau}", "arm", *arm(tau))
    return rollouts, time.perf_counter() - start


@pytest.mark.slow
def test_the_cost_before_the_run_names_the_preview_calls_the_run_makes(engine, world, tmp_path, node_run):
    """The canvas's cost line (``planned_preview_cost``) bounds the verifier calls Calibrate's default sweep (4
    seeds, 5 taus) makes for previews: a preview several taus of a seed reach alike is scored once, and each
    rollout's record still prices it as a search pays it. Prints the measured cost and a preview's price beside
    scoring every preview, each decoded alone (what a pruned search pays), in the same run (seconds are not
    asserted)."""
    rollouts_module = engine.extension.nodes.calibration_rollouts
    taus = engine.extension.cachedsearch_core.calibration.DEFAULT_TAUS
    inputs = {"seeds": 4, "first_seed": 0, "capture_target": 0.9, "steps": STEPS, "warmup_steps": WARMUP,
              "cooldown_steps": COOLDOWN, "taus": " ".join(map(str, taus)), "easycache_thresholds": "",
              "lazycache_thresholds": ""}
    planned = rollouts_module.planned_preview_cost(inputs, prompts=1)
    rollouts, seconds = _default_sweep(engine, world, tmp_path / "once")
    every, every_seconds = _default_sweep(engine, world, tmp_path / "every", every_preview=True)
    assert every.scored_previews.verifier_calls == planned.verifier_calls == 4 * len(taus) * len(planned.steps)
    assert rollouts.recorded_previews.keys() == every.recorded_previews.keys()
    for key, previews in rollouts.recorded_previews.items():
        assert same_previews(*([score for (score,) in scores] for scores in (previews.scores,
                                                                             every.recorded_previews[key].scores)))
        assert previews.computed_before == every.recorded_previews[key].computed_before
        assert previews.seconds > 0  # what its previews cost when scored, shared or not
    # one verifier call per distinct preview (a seed's estimate at a step): every tau's first step is the warmup's
    distinct = {(seed, step, scores) for (_, _, seed), previews in rollouts.recorded_previews.items()
                for step, scores in zip(previews.steps, previews.scores)}
    assert rollouts.scored_previews.verifier_calls == len(distinct) <= planned.verifier_calls - 4 * (len(taus) - 1)
    calibration = engine.extension.cachedsearch_core.calibration
    count = calibration.sweep_rollouts(rollouts_module.calibrate_plans(inputs["taus"], 4, 0, 0.9))
    line = rollouts_module.with_preview_cost(count, planned)["line"]
    assert f"{planned.verifier_calls} more verifier calls at most" in line
    # and the report after the run says what they took
    made = rollouts.scored_previews
    assert made.previews == planned.verifier_calls
    assert f"previews: {made.previews} recorded with {made.verifier_calls} verifier calls" in \
        rollouts.header("", world[5], 1.0)[2]

    def added(run, run_seconds):
        spent = run.scored_previews
        # what the chooser weighs a preview at (preview_call_equivalents' median)
        priced = statistics.median(previews.seconds / len(previews.steps)
                                   for previews in run.recorded_previews.values())
        return (f"previews {spent.seconds:.2f} s of {run_seconds:.2f} s "
                f"({spent.seconds / (run_seconds - spent.seconds):.1%} added), {spent.verifier_calls} verifier calls, "
                f"a preview priced {priced * 1000:.0f} ms")
    print(f"\n[preview cost] each preview scored once: {added(rollouts, seconds)}; every preview scored: "
          f"{added(every, every_seconds)}; steps {planned.steps}")
