"""A pruned search saves each candidate's state at each round's step (with its x0 estimate) and each survivor's
end; re-queued after a cancel it reads them back, computes only what it lacks and ends as an uninterrupted run."""

import pytest
import torch

from cachedsearch_core.draft_store import DraftStore
from cachedsearch_core.pruning import PruningPlan
from report_text import numbers
from test_pruning import SEED, STEPS, recipe_for, wan  # noqa: F401 (the fixture)

SEEDS = [SEED, SEED + 1, SEED + 2, SEED + 3]
SCORES = [0.3, 0.9, 0.1, 0.7]
PLAN = PruningPlan(prune_step=3, keep=2)


class Cancelled(Exception):
    pass


def forward_count(model):
    counts = [0]
    handle = model.model.diffusion_model.register_forward_pre_hook(lambda *_: counts.__setitem__(0, counts[0] + 1))
    return counts, handle


def run(engine, wan, saved, score_previews=None):  # noqa: F811
    search = engine.extension.nodes
    previews = []

    def scored(estimates):
        previews.extend(estimates)
        return SCORES if score_previews is None else score_previews(estimates)

    counts, handle = forward_count(wan[0])
    try:
        result = search.pruned_search.run_pruned_search(recipe_for(engine, wan), SEEDS, PLAN, scored, saved=saved)
    finally:
        handle.remove()
    return result, previews, counts[0]


def test_a_pruned_search_cancelled_after_its_round_resumes_computing_only_the_survivors_ends(engine, wan, tmp_path):  # noqa: F811
    search = engine.extension.nodes
    saved = search.saved_drafts.SavedDrafts(DraftStore(str(tmp_path)), "setup")
    alone, alone_previews, alone_calls = run(engine, wan, None)
    assert alone_calls == len(SEEDS) * 3 + 2 * (STEPS - 3)

    def cancel(estimates):
        raise Cancelled

    with pytest.raises(Cancelled):
        run(engine, wan, saved, cancel)
    resumed, previews, calls = run(engine, wan, saved)
    assert calls == 2 * (STEPS - 3)  # only the survivors' ends
    assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(previews, alone_previews))
    assert resumed.preview_scores == alone.preview_scores and resumed.survivor_indices == alone.survivor_indices
    assert torch.equal(resumed.candidates.draft_latents, alone.candidates.draft_latents)
    assert [c.draft.calls_computed for c in resumed.pruned] == [c.draft.calls_computed for c in alone.pruned]
    assert all(c.draft.reused for c in resumed.pruned)
    # the cost line counts only what this run computed, as the forward hook counted it; the rest was read back
    assert alone.candidates.cost().search_calls == alone_calls
    resumed_cost = resumed.candidates.cost()
    assert resumed_cost.search_calls == calls and resumed_cost.read_back_calls == alone_calls - calls
    assert numbers(resumed_cost.reuse_line()) == [alone_calls - calls]  # the calls read back

    again, _, calls = run(engine, wan, saved)
    assert calls == 0
    assert torch.equal(again.candidates.draft_latents, alone.candidates.draft_latents)
    assert again.candidates.drafts_saved and resumed.candidates.drafts_saved and not alone.candidates.drafts_saved
    again_cost = again.candidates.cost()
    assert again_cost.search_calls == 0 and again_cost.reused_drafts == 2 and again_cost.read_back_calls == 2 * 3
