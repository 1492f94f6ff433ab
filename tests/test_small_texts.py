"""Small texts an artist reads (#53 item 9), from the functions that write them."""

import pytest
from report_text import numbers

pytestmark = pytest.mark.slow  # in process on the engine fixture, which imports ComfyUI


def test_the_progress_text_says_plainly_when_no_draft_was_saved(engine, tmp_path):
    saved_drafts = engine.extension.nodes.saved_drafts
    store = engine.extension.cachedsearch_core.draft_store.DraftStore(tmp_path / "drafts")
    saved = saved_drafts.SavedDrafts(store, "setup")
    # none saved: the 3 to compute; 2 of 3 saved: those, and the 1 to compute
    assert numbers(saved.announcement(0, 3)) == [3] and numbers(saved.announcement(2, 3)) == [2, 3, 1]
    assert saved.announcement(0, 3).startswith("no draft")
