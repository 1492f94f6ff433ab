"""Budget "auto" at search time: find the calibration of this search's setup in the calibration memory, ask the
core chooser for the policy a budget of M full renders buys (``auto_policy.choose_auto``), and run it within the
budget (``run_pruned_search`` with an ``AutoLedger``); without a usable calibration, today's rule with one line
saying why."""

from __future__ import annotations

import dataclasses

from ..cachedsearch_core import candidate_seeds
from ..cachedsearch_core.auto_policy import AutoChoice, AutoOutcome, PolicySetup, auto_ledger, choose_auto
from ..cachedsearch_core.budget import BudgetPlan
from ..cachedsearch_core.calibration_memory import setup_difference, setup_key
from ..cachedsearch_core.pruning import PruneRound, PruningPlan
from .auto_setup import cache_setup, verifier_identity
from .budget_search import run_budget_search
from .calibration_graph import calibration_memory, root_model_file
from .candidates import SearchCandidates
from .stages import KSamplerStage, StagedRecipe

ONE_STAGE = ("auto: chooses for a one-stage search (CachedSearch Sampler); this search has other stages or custom "
             "sampling parts, so the budget drafts as today")


def _choice(recipe: StagedRecipe, budget: BudgetPlan, pruning, hidden) -> AutoChoice:
    """The chooser's answer for this search, or why there is none."""
    stage = recipe.stages[0]
    if len(recipe.stages) != 1 or not isinstance(stage, KSamplerStage):
        return AutoChoice(None, ONE_STAGE)
    prompt = getattr(hidden, "prompt", None)
    model_file = root_model_file(prompt, str(hidden.unique_id)) if prompt else None
    if model_file is None:
        return AutoChoice(None, "auto: this search's model file is not known outside a server run, so no "
                          "calibration applies; the budget drafts as today")
    memory = calibration_memory()
    entries = memory.recall_all()
    entry = entries.get(setup_key(model_file, stage.steps, stage.sampler_name, stage.scheduler))
    warmup, cooldown, tau = cache_setup(stage.patcher)
    pruning_node = prompt.get(str(hidden.unique_id), {}).get("inputs", {}).get("pruning")
    # Without a Pruning Plan there are no previews to prune on: only the width is chosen, whatever verifier scored
    # the calibration.
    prunes = pruning is not None and isinstance(pruning_node, list)
    setup = PolicySetup(verifier_identity(prompt, pruning_node[0]) if prunes else None,
                        pruning.preview_frames if prunes else None, warmup, cooldown)
    difference = setup_difference(entries, model_file, stage.steps, stage.sampler_name, stage.scheduler)
    return choose_auto(entry, setup, tau, budget.rollouts, budget.max_candidates, difference)


def _chosen_plan(choice: AutoChoice, preview_frames: int) -> PruningPlan:
    (first_step, first_keep), *later = choice.chosen.rounds
    return PruningPlan(prune_step=first_step, keep=first_keep, preview_frames=preview_frames,
                       later_rounds=tuple(PruneRound(step, keep) for step, keep in later),
                       schedule=choice.chosen.policy.schedule, first_label=f"{first_step}:{first_keep}")


def auto_search(recipe: StagedRecipe, seed: int, budget: BudgetPlan, pruning, announce, saved,
                hidden) -> SearchCandidates:
    """The search Budget "auto" runs: the chosen pruned policy within the budget, or (no rounds chosen, or no
    usable calibration) today's rule, its report and panel saying which and why."""
    choice = _choice(recipe, budget, pruning, hidden)
    if choice.chosen is None:
        candidates = (pruning.search_within(recipe, seed, budget, announce, saved) if pruning is not None
                      else run_budget_search(recipe, seed, budget, announce, saved=saved))
        return dataclasses.replace(candidates, budget=dataclasses.replace(candidates.budget, auto=choice.as_dict()))
    if not choice.chosen.rounds:
        return _plain_search(recipe, seed, budget, choice, announce, saved)
    table = choice.tables
    plan = _chosen_plan(choice, pruning.preview_frames)
    ledger = auto_ledger(table, choice.chosen.rounds, budget.rollouts)
    candidates = pruning.search(recipe, candidate_seeds(seed, choice.chosen.width), announce, saved, plan=plan,
                                ledger=ledger)
    outcome = AutoOutcome(choice, budget.rollouts, table.full_calls, len(candidates.pruning.seeds), ledger.calls,
                          ledger.wasted, tuple(ledger.notes), ledger.previews * ledger.preview_cost)
    return dataclasses.replace(candidates, budget=outcome)


def _plain_search(recipe: StagedRecipe, seed: int, budget: BudgetPlan, choice: AutoChoice, announce,
                  saved) -> SearchCandidates:
    """No pruning chosen: the chosen width as a plain cached search, drafts charged as they run (today's ledger
    stops drafting before the budget is passed, should this prompt's cache skip less than calibrated)."""
    width = choice.chosen.width
    candidates = run_budget_search(recipe, seed, dataclasses.replace(budget, max_candidates=width), announce,
                                   saved=saved)
    outcome = candidates.budget
    shown = choice.as_dict() | {"spent_calls": round(sum(outcome.draft_costs) + (outcome.stopped_draft_cost or 0))}
    if outcome.width < width:
        shown["narrowed"] = [f"drafted {outcome.width} of the chosen {width}: this prompt's cache skipped less than "
                             "calibrated, and the next draft would have passed the budget"]
    return dataclasses.replace(candidates, budget=dataclasses.replace(outcome, auto=shown))
