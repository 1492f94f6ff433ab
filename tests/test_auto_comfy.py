"""Budget "auto" on ComfyUI's real runtime (in process, CPU, tiny random-weight Wan): the chosen pruned search runs
with the run-time ledger, and when this prompt's cache skips far less than the calibration said (here: nothing at
all, against a calibration that claimed most calls skipped) it narrows, keeps fewer and cuts survivors so that the
transformer calls it computes, counted by a forward hook on the diffusion model, and the commit stay within M full
renders."""

import contextlib

import pytest
import torch

from scripts.tiny_models import WAN21_VAE_FILE

STEPS, SEED, M = 8, 700, 3
SETTINGS = dict(steps=STEPS, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
OFF = dict(mode="off", tau=0.5, warmup_steps=1, cooldown_steps=1, static_interval=2)


class ScriptedVerifier:
    """Scores preview i (in call order) with a fixed spread of numbers."""

    name = "scripted"

    def __init__(self):
        self.calls = 0

    def score(self, prompt, frames):
        self.calls += 1
        return torch.full((frames.shape[0],), float((self.calls * 7) % 11))


@contextlib.contextmanager
def forward_calls(patcher):
    """Every forward the diffusion model's first transformer block finishes (a torch forward hook, whatever ComfyUI
    wraps around it): a call the ledger refuses stops as that block starts, after the patch embedding."""
    counted = [0]
    handle = patcher.model.diffusion_model.blocks[0].register_forward_hook(
        lambda module, args, output: counted.__setitem__(0, counted[0] + 1))
    try:
        yield counted
    finally:
        handle.remove()


@pytest.fixture(scope="module")
def wan(engine):
    model, positive, negative, latent = engine.tiny_wan_t2v(length=9)
    return model, positive, negative, latent, engine.one("VAELoader", vae_name=WAN21_VAE_FILE)


def pruning_plan(engine, vae):
    return engine.one("CachedSearchPruningPlan", vae=vae, verifier=ScriptedVerifier(), prompt="a red ball", keep=2,
                      prune_fraction=0.4, prune_step=0, preview_frames=2, schedule="auto")


def auto_run(engine, wan, rounds, keeps, drafts_as_calibrated, saved=None):
    """The chosen pruned search of 12 seeds on the cache-off model with a ledger whose calibration said a draft
    computes a quarter of its calls (with ``drafts_as_calibrated``, all of them to the first round): the
    candidates, the ledger and the transformer calls computed (forwards the first block finished)."""
    model, positive, negative, latent, vae = wan
    cached = engine.one("CachedSearchApplyCache", model=model, **OFF)
    recipe = engine.extension.nodes.sampler_node.ksampler_recipe(cached, positive, negative, latent, **SETTINGS)
    phases = tuple(0.25 * (end - start) for start, end in zip((0, *rounds), (*rounds, STEPS)))
    if drafts_as_calibrated:
        phases = (float(rounds[0]), *phases[1:])
    # The extension's own classes (ComfyUI imported it as a package of its own): its runner catches its BudgetSpent.
    core = engine.extension.cachedsearch_core
    ledger = core.auto_ledger.AutoLedger((M - 1) * STEPS, STEPS, STEPS, rounds, keeps, phases)
    plan = core.pruning.PruningPlan(rounds[0], keeps[0], 2, later_rounds=tuple(
        core.pruning.PruneRound(step, keep) for step, keep in zip(rounds[1:], keeps[1:])))
    with torch.inference_mode(), forward_calls(model) as counted:
        candidates = pruning_plan(engine, vae).search(recipe, list(range(SEED, SEED + 12)), saved=saved, plan=plan,
                                                      ledger=ledger)
    return candidates, ledger, counted[0]


@pytest.mark.parametrize("rounds, keeps, drafts_as_calibrated", [
    ((3, 5), (3, 2), False), ((3,), (1,), False), ((3, 5), (3, 2), True)],
    ids=["two rounds", "one round", "drafts as calibrated, the rest dearer"])
def test_a_prompt_whose_cache_skips_less_than_calibrated_stays_within_the_budget(engine, wan, rounds, keeps,
                                                                                 drafts_as_calibrated):
    candidates, ledger, counted = auto_run(engine, wan, rounds, keeps, drafts_as_calibrated)
    # cond and uncond run batched in one forward per step: the forwards are the computed calls.
    assert counted == ledger.calls
    assert counted + STEPS <= M * STEPS
    if drafts_as_calibrated:
        assert any(note.startswith("seed ") and " cut after step " in note for note in ledger.notes)
    else:
        assert len(candidates.pruning.seeds) < 12 and ledger.notes[0].startswith(
            f"narrowed to N = {len(candidates.pruning.seeds)} of 12")
    # At least one candidate reached the end at full length, and every candidate is a survivor or dropped.
    assert candidates.drafts and all(draft.calls_computed == STEPS for draft in candidates.drafts)
    outcome = candidates.pruning
    assert sorted([*outcome.survivor_indices, *(outcome.seeds.index(p.draft.seed) for p in outcome.pruned)]) == \
        list(range(len(outcome.seeds)))


def test_outside_a_server_run_auto_drafts_as_today_and_says_why(engine, wan):
    model, positive, negative, latent, vae = wan
    budget = engine.one("CachedSearchBudget", budget_rollouts=3, budget_unit="transformer calls", max_candidates=4,
                        choose="auto")
    output = engine.output("CachedSearchSampler", model=engine.one("CachedSearchApplyCache", model=model, **OFF),
                           positive=positive, negative=negative, latent_image=latent, seed=SEED, num_candidates=2,
                           budget=budget, **SETTINGS)
    _, candidates, report = output.result
    (shown,) = output.ui["cachedsearch_budget"]
    # No prompt graph in process, so no model file to find a calibration by: today's rule (with the cache off every
    # draft is full compute and the commit free, so 3 full renders buy 3 drafts), and the line.
    assert shown["auto"]["used"] is False and "outside a server run" in shown["auto"]["line"]
    assert shown["width"] == len(candidates.drafts) == 3 and shown["auto"]["line"] in report


def test_schedule_auto_without_a_budget_is_refused_naming_the_input(engine, wan):
    model, positive, negative, latent, vae = wan
    pruning = engine.one("CachedSearchPruningPlan", vae=vae, verifier=ScriptedVerifier(), prompt="a red ball",
                         keep=2, prune_fraction=0.4, prune_step=0, preview_frames=2, schedule="auto")
    with pytest.raises(ValueError, match="^schedule: got 'auto'"):
        engine.output("CachedSearchSampler", model=engine.one("CachedSearchApplyCache", model=model, **OFF),
                      positive=positive, negative=negative, latent_image=latent, seed=SEED, num_candidates=2,
                      pruning=pruning, **SETTINGS)


@pytest.mark.parametrize("drafts_as_calibrated", [False, True], ids=["narrowed", "survivors cut"])
def test_states_an_earlier_search_saved_are_charged_as_when_computed_so_the_search_ends_as_an_uninterrupted_one(
        engine, wan, tmp_path, drafts_as_calibrated):
    rounds, keeps = (3, 5), (3, 2)
    extension = engine.extension
    saved_drafts = extension.nodes.saved_drafts

    def store(name):
        return saved_drafts.SavedDrafts(extension.cachedsearch_core.draft_store.DraftStore(tmp_path / name), "auto")

    alone, alone_ledger, alone_calls = auto_run(engine, wan, rounds, keeps, drafts_as_calibrated, store("alone"))
    # An earlier search of the first 3 seeds (a plain pruned search of the same plan) left their states behind.
    earlier = store("resumed")
    model, positive, negative, latent, vae = wan
    recipe = extension.nodes.sampler_node.ksampler_recipe(engine.one("CachedSearchApplyCache", model=model, **OFF),
                                                          positive, negative, latent, **SETTINGS)
    plan = extension.cachedsearch_core.pruning.PruningPlan(3, 2, 2, later_rounds=(
        extension.cachedsearch_core.pruning.PruneRound(5, 1),))
    with torch.inference_mode():
        pruning_plan(engine, vae).search(recipe, [SEED, SEED + 1, SEED + 2], saved=earlier, plan=plan)
    resumed, resumed_ledger, resumed_calls = auto_run(engine, wan, rounds, keeps, drafts_as_calibrated, earlier)
    assert resumed_calls < alone_calls
    assert (resumed_ledger.calls, resumed_ledger.notes) == (alone_ledger.calls, alone_ledger.notes)
    assert resumed.pruning.rounds == alone.pruning.rounds and resumed.seeds == alone.seeds
    assert torch.equal(resumed.draft_latents, alone.draft_latents)
