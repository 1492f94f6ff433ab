"""The store of finished drafts (cachedsearch_core.draft_store over saved_work, the store Calibrate's rollouts share):
latents back bit for bit, read only when asked, the one cap evicting the oldest first whatever their kind, a broken
latent file or index line set aside and reported, and a search's cost counting reused drafts at zero."""

import dataclasses
import json

import pytest
import torch

from cachedsearch_core import Draft, SearchCost, StageCalls
from cachedsearch_core.cost_formulas import ExtraWork
from cachedsearch_core.draft_store import DraftStore
from cachedsearch_core.saved_keys import draft_key
from cachedsearch_core.saved_rollouts import SavedRollout, SavedRollouts
from cachedsearch_core.saved_work import INDEX_FILE, WORK_FORMAT
from report_text import numbers


def drafted(seed: int, skipped: int = 3) -> Draft:
    return Draft(seed=seed, seconds=1.5 + seed, calls_computed=10 - skipped, calls_skipped=skipped,
                 stage_calls=(StageCalls(10 - skipped, skipped),))


def latent(seed: int) -> torch.Tensor:
    return torch.randn(1, 4, 3, 8, 8, generator=torch.Generator().manual_seed(seed))


def test_a_saved_draft_comes_back_bit_for_bit_in_a_new_store_on_the_same_folder(tmp_path):
    store = DraftStore(tmp_path)
    store.add(draft_key("setup", 7), drafted(7), latent(7))
    again = DraftStore(tmp_path)  # as a restarted server opens it
    saved = again.get(draft_key("setup", 7))
    assert saved.draft == drafted(7)
    assert torch.equal(again.latent(draft_key("setup", 7)), latent(7))
    assert again.get(draft_key("other setup", 7)) is None and again.get(draft_key("setup", 8)) is None
    assert again.problems == []


def test_records_open_without_reading_any_latent(tmp_path, monkeypatch):
    store = DraftStore(tmp_path)
    for seed in range(3):
        store.add(draft_key("s", seed), drafted(seed), latent(seed))
    read = []
    import cachedsearch_core.saved_work as module

    original = module.load_file
    monkeypatch.setattr(module, "load_file", lambda path: read.append(path) or original(path))
    again = DraftStore(tmp_path)
    assert [again.get(draft_key("s", seed)).draft.seed for seed in range(3)] == [0, 1, 2]
    assert read == []
    again.latent(draft_key("s", 1))
    assert len(read) == 1


def test_the_cap_evicts_the_oldest_drafts_first(tmp_path):
    probe = DraftStore(tmp_path / "probe")
    probe.add(draft_key("s", 0), drafted(0), latent(0))
    one = probe.size  # a draft's latent file and index line
    store = DraftStore(tmp_path, max_bytes=3 * one + 10)
    for seed in range(5):
        store.add(draft_key("s", seed), drafted(seed), latent(seed))
    kept = [seed for seed in range(5) if store.get(draft_key("s", seed)) is not None]
    assert kept == [2, 3, 4]
    assert sorted(path.name for path in tmp_path.glob("*.safetensors")) == \
        sorted(f"{draft_key('s', seed)}.safetensors" for seed in kept)
    assert store.size <= 3 * one + 10
    assert [seed for seed in range(5) if DraftStore(tmp_path).get(draft_key("s", seed))] == [2, 3, 4]


def test_files_set_aside_are_kept_a_week_then_swept_when_the_store_opens(tmp_path):
    """A latent file set aside as unreadable is outside the cap: kept for a look, then deleted by an opening a week
    later; the store's own files stay."""
    import os

    from cachedsearch_core.saved_work import SET_ASIDE_KEEP_SECONDS

    store = DraftStore(tmp_path)
    for seed in range(2):
        store.add(draft_key("s", seed), drafted(seed), latent(seed))
    (tmp_path / f"{draft_key('s', 0)}.safetensors").write_bytes(b"not a safetensors file")
    assert DraftStore(tmp_path).latent(draft_key("s", 0)) is None
    (aside,) = tmp_path.glob("*.corrupt-*")
    DraftStore(tmp_path)
    assert aside.exists()  # kept for now
    week_ago = aside.stat().st_mtime - SET_ASIDE_KEEP_SECONDS - 60
    os.utime(aside, (week_ago, week_ago))
    again = DraftStore(tmp_path)
    assert not aside.exists()
    assert torch.equal(again.latent(draft_key("s", 1)), latent(1))


def test_a_corrupt_latent_file_is_set_aside_and_reported_and_the_others_stay(tmp_path):
    store = DraftStore(tmp_path)
    for seed in range(2):
        store.add(draft_key("s", seed), drafted(seed), latent(seed))
    broken = tmp_path / f"{draft_key('s', 0)}.safetensors"
    broken.write_bytes(b"not a safetensors file")
    again = DraftStore(tmp_path)
    assert again.latent(draft_key("s", 0)) is None
    (problem,) = again.problems
    assert "set aside" in problem and "draft is computed again" in problem
    assert not broken.exists() and len(list(tmp_path.glob(f"{broken.name}.corrupt-*"))) == 1
    assert again.get(draft_key("s", 0)) is None  # dropped: the next search computes and saves it anew
    assert DraftStore(tmp_path).get(draft_key("s", 0)) is None
    assert torch.equal(again.latent(draft_key("s", 1)), latent(1))


def test_a_missing_latent_file_and_a_torn_index_line_are_reported_never_fatal(tmp_path):
    store = DraftStore(tmp_path)
    for seed in range(3):
        store.add(draft_key("s", seed), drafted(seed), latent(seed))
    (tmp_path / f"{draft_key('s', 1)}.safetensors").unlink()
    with (tmp_path / INDEX_FILE).open("a") as index:
        index.write('{"key": "torn", "seed": 4, "sec')
    again = DraftStore(tmp_path)
    assert "1 unreadable line" in again.problems[0] and f"{WORK_FORMAT.item}s are computed again" in again.problems[0]
    assert again.latent(draft_key("s", 1)) is None
    assert "missing" in again.problems[-1] and "draft is computed again" in again.problems[-1]
    assert torch.equal(again.latent(draft_key("s", 2)), latent(2))


def test_a_foreign_index_file_is_set_aside(tmp_path):
    (tmp_path / INDEX_FILE).write_text('{"format": "something else", "version": 1}\n')
    store = DraftStore(tmp_path)
    (problem,) = store.problems
    assert "set aside" in problem and f"every {WORK_FORMAT.item} in it is computed again" in problem
    store.add(draft_key("s", 0), drafted(0), latent(0))
    assert DraftStore(tmp_path).get(draft_key("s", 0)) is not None


def test_the_cap_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="max_bytes: got 0"):
        DraftStore(tmp_path, max_bytes=0)


def test_reused_drafts_cost_nothing_and_the_cost_says_how_many():
    drafts = [dataclasses.replace(drafted(seed), reused=seed < 5) for seed in range(8)]
    cost = SearchCost.of_search(drafts)
    fresh = SearchCost.of_search([drafted(seed) for seed in range(8)])
    assert cost.search_calls == 3 * 7 and fresh.search_calls == 8 * 7
    assert cost.search_seconds == pytest.approx(sum(1.5 + seed for seed in range(5, 8)))
    assert cost.mean_draft_seconds == fresh.mean_draft_seconds  # a reused draft still measures a draft
    assert numbers(cost.reuse_line()) == [5, 8]  # 5 of 8 drafts reused, at no cost
    assert fresh.reuse_line() is None and "reused" not in " ".join(fresh.report_lines())
    assert cost.report_lines()[0] == cost.reuse_line()
    assert "(5 reused drafts at 0)" in cost.line() and cost.as_dict()["reused_drafts"] == 5


def test_a_draft_that_cannot_be_written_is_reported_and_the_search_goes_on(engine, tmp_path):
    saved_drafts = engine.extension.nodes.saved_drafts
    store = engine.extension.cachedsearch_core.draft_store.DraftStore(tmp_path / "drafts")
    (tmp_path / "drafts").write_text("")  # where the folder should be, a file: nothing can be written there
    saved = saved_drafts.SavedDrafts(store, "setup")
    saved.save_draft(drafted(3), latent(3))  # no exception: the search keeps its draft in memory
    assert numbers(saved.not_kept_line())[0] == 1  # the one draft not kept
    assert saved.notes() == (saved.not_kept_line(),) and store.problems == []


def test_extra_tensors_come_back_with_the_latent(tmp_path):
    estimate = latent(99)
    DraftStore(tmp_path).add(draft_key("s", 0), drafted(0), latent(0), extras={"x0": estimate})
    tensors = DraftStore(tmp_path).tensors(draft_key("s", 0))
    assert sorted(tensors) == ["samples", "x0"]
    assert torch.equal(tensors["x0"], estimate) and torch.equal(tensors["samples"], latent(0))


def test_drafts_and_calibration_rollouts_share_one_index_and_one_cap_oldest_first(tmp_path):
    rollout = SavedRollout(scores=(0.5,), seconds=2.0, calls=20, skipped=8)
    SavedRollouts(tmp_path).add("rollout 0", rollout)
    drafts = DraftStore(tmp_path)
    drafts.add(draft_key("s", 0), drafted(0), latent(0))
    assert SavedRollouts(tmp_path).get("rollout 0") == rollout  # a draft's store keeps the rollouts it holds
    assert len((tmp_path / INDEX_FILE).read_text().splitlines()) == 1 + 2  # one header, one line each
    full = DraftStore(tmp_path, max_bytes=drafts.size + 10)  # room for what is there, not one more draft
    full.add(draft_key("s", 1), drafted(1), latent(1))
    assert SavedRollouts(tmp_path).get("rollout 0") is None and DraftStore(tmp_path).get(draft_key("s", 0)) is None
    assert DraftStore(tmp_path).get(draft_key("s", 1)) is not None
    assert DraftStore(tmp_path).get("rollout 0") is None  # a key of another kind is not a draft


def test_an_entry_of_an_unknown_kind_is_kept_as_it_is(tmp_path):
    index = tmp_path / INDEX_FILE
    tmp_path.mkdir(exist_ok=True)
    header = json.dumps({"format": "cachedsearch saved work", "version": 1})
    future = json.dumps({"key": "k", "kind": "a later version's", "saved_at": 1.0, "size": 10, "file": None, "x": 1})
    index.write_text(header + "\n" + future + "\n")
    DraftStore(tmp_path).add(draft_key("s", 0), drafted(0), latent(0))
    assert index.read_text().splitlines()[1] == future and DraftStore(tmp_path).problems == []


def test_a_draft_record_out_of_range_is_dropped_and_reported(tmp_path):
    store = DraftStore(tmp_path)
    store.add(draft_key("s", 0), drafted(0), latent(0))
    lines = (tmp_path / INDEX_FILE).read_text().splitlines()
    record = json.loads(lines[1])
    (tmp_path / INDEX_FILE).write_text("\n".join([lines[0], json.dumps({**record, "seconds": -1})]) + "\n")
    again = DraftStore(tmp_path)
    assert again.get(draft_key("s", 0)) is None
    (problem,) = again.problems
    assert "out of range" in problem and "draft is computed again" in problem


def test_a_draft_continued_from_a_saved_state_costs_only_what_was_computed_after_it():
    continued = dataclasses.replace(drafted(0), reused_calls=4, reused_seconds=1.0)  # 7 computed, 4 read back
    dropped = dataclasses.replace(drafted(1), reused=True)  # a pruned candidate read back whole
    cost = SearchCost.of_search([continued, drafted(2)], ExtraWork.of_drafts([dropped]), width=3)
    assert cost.search_calls == (7 - 4) + 7 and cost.read_back_calls == 4 + 7
    assert cost.search_seconds == pytest.approx((1.5 - 1.0) + 3.5)
    assert cost.mean_draft_seconds == pytest.approx((1.5 + 3.5) / 2)  # a draft still measures a whole draft
    assert numbers(cost.reuse_line()) == [11]  # the calls read back, at no cost; no whole draft reused
    assert "11 calls read back" in cost.calls_line() and cost.as_dict()["reuse_line"] == cost.reuse_line()


def test_the_folders_cap_is_kept_by_every_store_opened_on_it_and_clearing_one_model_frees_its_bytes(tmp_path):
    from cachedsearch_core.saved_work import DEFAULT_MAX_BYTES, write_cap

    assert DraftStore(tmp_path).work.max_bytes == DEFAULT_MAX_BYTES
    store = DraftStore(tmp_path)
    for seed in range(4):
        store.add(draft_key("s", seed), drafted(seed), latent(seed), model="a.safetensors" if seed < 3 else "b.gguf")
    SavedRollouts(tmp_path).add("rollout", SavedRollout(scores=(0.5,), seconds=2.0, calls=20, skipped=8))
    one = max(count_size[1] for count_size in store.by_model().values()) // 3
    write_cap(tmp_path, 2 * one)  # as the setting does, while this store is open elsewhere
    assert DraftStore(tmp_path).work.max_bytes == 2 * one
    assert store.by_model() == {"a.safetensors": (3, store.by_model()["a.safetensors"][1]),
                                "b.gguf": (1, store.by_model()["b.gguf"][1])}
    before = store.size
    removed, freed = store.clear("a.safetensors")
    assert removed == 3 and freed == before - store.size > 3 * latent(0).numel() * 4
    assert list(store.by_model()) == ["b.gguf"] and len(list(tmp_path.glob("*.safetensors"))) == 1
    assert SavedRollouts(tmp_path).get("rollout") is not None  # a calibration's rollouts stay
    assert store.clear() == (1, before - store.size - freed) and not list(tmp_path.glob("*.safetensors"))


def test_a_packed_latent_comes_back_with_every_part_or_not_at_all(tmp_path):
    """A latent packed of parts (LTX-2's video and audio) is saved a tensor a part, their count in the record, and
    read back as the tuple of them; a file that lost either part is set aside and reported, never read in part."""
    from safetensors.torch import save_file

    video, audio = latent(1), torch.randn(1, 8, 9, 16, generator=torch.Generator().manual_seed(2))
    for lost in ("samples.1", "samples"):
        DraftStore(tmp_path).add(draft_key("s", 0), drafted(0), (video, audio))
        store = DraftStore(tmp_path)
        assert store.get(draft_key("s", 0)).latent_parts == 2
        read = store.latent(draft_key("s", 0))
        assert isinstance(read, tuple) and len(read) == 2
        assert torch.equal(read[0], video) and torch.equal(read[1], audio)
        (entry,) = store.work.entries("draft")
        save_file({name: part for name, part in (("samples", video), ("samples.1", audio)) if name != lost},
                  str(tmp_path / entry.file))
        assert store.latent(draft_key("s", 0)) is None and store.get(draft_key("s", 0)) is None
        assert len(store.problems) == 1 and "computed again" in store.problems[0]
