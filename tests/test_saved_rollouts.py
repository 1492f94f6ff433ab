"""Saved calibration rollouts without a model: a rollout's key changes with what makes it, the file survives a
half-written line, a file that is not ours is set aside (kept, reported, never trusted), and the file keeps at most
its cap of records, rewritten whole or not at all."""

import dataclasses
import json
import os
import re

import pytest
import torch

from cachedsearch_core.saved_rollouts import FORMAT, SavedRollout, SavedRollouts, fingerprint, rollout_key

ROLLOUT = SavedRollout(scores=(0.25, 1.5), seconds=3.0, calls=20, skipped=8)


def test_a_fingerprint_follows_the_content_not_the_object():
    conditioning = [[torch.ones(1, 4, 8), {"pooled_output": None}]]
    assert fingerprint(conditioning) == fingerprint([[torch.ones(1, 4, 8), {"pooled_output": None}]])
    assert fingerprint(conditioning) != fingerprint([[torch.ones(1, 4, 8) * 2, {"pooled_output": None}]])
    assert fingerprint(torch.zeros(2, 3)) != fingerprint(torch.zeros(3, 2))
    assert fingerprint({"steps": 20}) != fingerprint({"steps": 21})


def test_a_key_changes_with_the_prompt_the_seed_and_the_arm():
    arm = {"engine": "CachedSearch cache", "tau": 0.1, "warmup_steps": 5, "cooldown_steps": 5}
    key = rollout_key("setup", "prompt", 3, arm)
    assert key == rollout_key("setup", "prompt", 3, dict(reversed(arm.items())))
    assert len({key, rollout_key("other setup", "prompt", 3, arm), rollout_key("setup", "other", 3, arm),
                rollout_key("setup", "prompt", 4, arm), rollout_key("setup", "prompt", 3, {**arm, "tau": 0.2})}) == 5


def test_rollouts_are_saved_as_they_finish_and_a_half_written_line_is_skipped_and_removed(tmp_path):
    path = tmp_path / "calibration_rollouts" / "model.jsonl"
    saved = SavedRollouts(path)
    saved.add("a", ROLLOUT)
    assert SavedRollouts(path).get("a") == ROLLOUT and SavedRollouts(path).problems == []
    with path.open("a") as file:
        file.write('{"key": "b", "scores": [0.1')  # a crash mid-write
    again = SavedRollouts(path)
    assert again.get("a") == ROLLOUT and again.get("b") is None
    (problem,) = again.problems
    assert problem == f"{path}: 1 unreadable line(s) ignored (a run stopped mid-write, or the file was edited) and " \
        "removed from the file; their rollouts are computed again"
    assert path.read_text().splitlines()[1:] == [json.dumps(ROLLOUT.record("a"))]  # compacted
    again.add("c", ROLLOUT)
    reloaded = SavedRollouts(path)
    assert reloaded.get("c") == ROLLOUT and reloaded.problems == []


def test_a_record_that_ends_without_its_newline_is_kept_and_the_next_starts_on_its_own_line(tmp_path):
    path = tmp_path / "model.jsonl"
    path.write_text(json.dumps({"format": FORMAT, "version": 1}) + "\n" + json.dumps(ROLLOUT.record("a")))
    saved = SavedRollouts(path)
    assert saved.get("a") == ROLLOUT and saved.problems == []
    saved.add("b", ROLLOUT)
    reloaded = SavedRollouts(path)
    assert list(reloaded.records) == ["a", "b"] and reloaded.problems == []


def set_aside_files(path):
    return sorted(path.parent.glob(f"{path.name}.corrupt-*"))


@pytest.mark.parametrize("content", [b'{"not": "ours"}\n{"key": "a", "scores": [1], "seconds": 1, "calls": 1, '
                                     b'"skipped": 0}\n', b"\x00\x01garbage", b"\xff\xfe not UTF-8",
                                     b'{"format": "cachedsearch calibration rollouts", "version": 2}\n'])
def test_a_file_that_is_not_ours_is_set_aside_whole_reported_and_the_next_run_works(tmp_path, content):
    path = tmp_path / "model.jsonl"
    path.write_bytes(content)
    saved = SavedRollouts(path)
    assert saved.records == {} and not path.exists()
    (aside,) = set_aside_files(path)
    assert aside.read_bytes() == content  # nothing in it is lost
    (problem,) = saved.problems
    assert problem.startswith(f"{path}: set aside, because it is not a {FORMAT} (version 1) file")
    assert problem.endswith(f"; moved to {aside.name} beside it, and every rollout in it is computed again")
    assert re.fullmatch(r"model\.jsonl\.corrupt-\d{8}T\d{6}Z-[0-9a-f]{6}", aside.name)
    saved.add("a", ROLLOUT)
    assert json.loads(path.read_text().splitlines()[0])["format"] == FORMAT
    again = SavedRollouts(path)
    assert again.get("a") == ROLLOUT and again.problems == []


def test_every_set_aside_file_gets_a_name_of_its_own(tmp_path):
    path = tmp_path / "model.jsonl"
    for attempt in range(3):
        path.write_text(f"not ours {attempt}")
        SavedRollouts(path)
    assert sorted(aside.read_text() for aside in set_aside_files(path)) == [f"not ours {n}" for n in range(3)]


def test_an_empty_file_is_a_new_one(tmp_path):
    path = tmp_path / "model.jsonl"
    path.write_text("")  # created, then stopped before its header
    saved = SavedRollouts(path)
    assert saved.problems == [] and set_aside_files(path) == []
    saved.add("a", ROLLOUT)
    assert SavedRollouts(path).get("a") == ROLLOUT


def test_the_cap_holds_after_many_appends_and_keeps_the_newest(tmp_path):
    path = tmp_path / "model.jsonl"
    saved = SavedRollouts(path, max_records=20)
    for index in range(500):
        saved.add(f"k{index}", dataclasses.replace(ROLLOUT, seconds=float(index)))
        assert len(path.read_text().splitlines()) <= 1 + 20  # the header and at most the cap
    reloaded = SavedRollouts(path, max_records=20)
    assert reloaded.problems == [] and reloaded.records == saved.records
    assert list(reloaded.records)[-1] == "k499" and "k0" not in reloaded.records
    assert [rollout.seconds for rollout in reloaded.records.values()] == list(range(500 - len(reloaded.records), 500))
    assert len(reloaded.records) >= 18  # the oldest dropped a tenth of the cap at a time, not all at once


def test_a_file_over_the_cap_is_compacted_on_loading_to_its_newest_records(tmp_path):
    path = tmp_path / "model.jsonl"
    unbounded = SavedRollouts(path, max_records=None)  # as files grew before the cap
    for index in range(100):
        unbounded.add(f"k{index % 60}", dataclasses.replace(ROLLOUT, seconds=float(index)))  # 40 keys written twice
    capped = SavedRollouts(path, max_records=30)
    assert list(capped.records) == [f"k{index % 60}" for index in range(73, 100)]  # 30 less a tenth, newest
    assert capped.get("k39").seconds == 99 and capped.problems == []
    assert len(path.read_text().splitlines()) == 1 + 27


def test_a_failed_compaction_leaves_the_file_as_it_was_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "model.jsonl"
    saved = SavedRollouts(path, max_records=5)
    for index in range(5):
        saved.add(f"k{index}", ROLLOUT)
    before = path.read_bytes()

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        saved.add("k5", ROLLOUT)  # at the cap: compacts first
    assert path.read_bytes() == before and [entry.name for entry in tmp_path.iterdir()] == ["model.jsonl"]
    monkeypatch.undo()
    assert list(SavedRollouts(path, max_records=5).records) == [f"k{index}" for index in range(5)]


@pytest.mark.parametrize("record", [
    {"key": "a", "scores": [], "seconds": 1, "calls": 1, "skipped": 0},
    {"key": "a", "scores": [float("nan")], "seconds": 1, "calls": 1, "skipped": 0},
    {"key": "a", "scores": [1.0], "seconds": 1, "calls": 1, "skipped": 2},
    {"key": "a", "scores": [1.0], "seconds": 1, "calls": 1},
    {"scores": [1.0], "seconds": 1, "calls": 1, "skipped": 0},
])
def test_a_record_out_of_range_is_not_trusted(tmp_path, record):
    path = tmp_path / "model.jsonl"
    path.write_text(json.dumps({"format": FORMAT, "version": 1}) + "\n" + json.dumps(record) + "\n")
    saved = SavedRollouts(path)
    assert saved.get("a") is None and len(saved.problems) == 1
