"""Saved calibration rollouts without a model: a rollout's key changes with what makes it, the store's index (shared
with the saved drafts) survives a half-written line, a file that is not ours is set aside (kept, reported, never
trusted), and the index is rewritten whole or not at all."""

import dataclasses
import json
import os
import re

import pytest
import torch

from cachedsearch_core.saved_keys import fingerprint, rollout_key
from cachedsearch_core.saved_rollouts import SavedRollout, SavedRollouts
from cachedsearch_core.saved_work import FORMAT, INDEX_FILE, LOCK_FILE
from report_text import numbers, says

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
    folder = tmp_path / "saved"
    path = folder / INDEX_FILE
    saved = SavedRollouts(folder)
    saved.add("a", ROLLOUT)
    assert SavedRollouts(folder).get("a") == ROLLOUT and SavedRollouts(folder).problems == []
    good = path.read_text().splitlines()[1:]
    with path.open("a") as file:
        file.write('{"key": "b", "kind": "rollout", "scores": [0.1')  # a crash mid-write
    again = SavedRollouts(folder)
    assert again.get("a") == ROLLOUT and again.get("b") is None
    (problem,) = again.problems
    # the file, then its 1 unreadable line
    assert problem.startswith(f"{path}: ") and numbers(problem.removeprefix(f"{path}: ")) == [1], problem
    assert path.read_text().splitlines()[1:] == good  # compacted
    again.add("c", ROLLOUT)
    reloaded = SavedRollouts(folder)
    assert reloaded.get("c") == ROLLOUT and reloaded.problems == []


def record(key: str, rollout: SavedRollout = ROLLOUT) -> dict:
    return {"key": key, "kind": "rollout", "saved_at": 1.0, "size": 100, "file": None, **rollout.record()}


def header() -> str:
    return json.dumps({"format": FORMAT, "version": 1}) + "\n"


def test_a_record_that_ends_without_its_newline_is_kept_and_the_next_starts_on_its_own_line(tmp_path):
    (tmp_path / INDEX_FILE).write_text(header() + json.dumps(record("a")))
    saved = SavedRollouts(tmp_path)
    assert saved.get("a") == ROLLOUT and saved.problems == []
    saved.add("b", ROLLOUT)
    reloaded = SavedRollouts(tmp_path)
    assert list(reloaded.work.index.records) == ["a", "b"] and reloaded.problems == []


def set_aside_files(path):
    return sorted(path.parent.glob(f"{path.name}.corrupt-*"))


@pytest.mark.parametrize("content", [b'{"not": "ours"}\n{"key": "a", "scores": [1], "seconds": 1, "calls": 1, '
                                     b'"skipped": 0}\n', b"\x00\x01garbage", b"\xff\xfe not UTF-8",
                                     b'{"format": "cachedsearch saved work", "version": 2}\n',
                                     b'{"format": "cachedsearch calibration rollouts", "version": 1}\n'])
def test_a_file_that_is_not_ours_is_set_aside_whole_reported_and_the_next_run_works(tmp_path, content):
    path = tmp_path / INDEX_FILE
    path.write_bytes(content)
    saved = SavedRollouts(tmp_path)
    assert saved.work.index.records == {} and not path.exists()
    (aside,) = set_aside_files(path)
    assert aside.read_bytes() == content  # nothing in it is lost
    (problem,) = saved.problems
    # the file, the format and version it is not, and where it was moved
    assert problem.startswith(f"{path}: ") and says(problem, FORMAT, "version 1", aside.name), problem
    assert re.fullmatch(r"index\.jsonl\.corrupt-\d{8}T\d{6}Z-[0-9a-f]{6}", aside.name)
    saved.add("a", ROLLOUT)
    assert json.loads(path.read_text().splitlines()[0])["format"] == FORMAT
    again = SavedRollouts(tmp_path)
    assert again.get("a") == ROLLOUT and again.problems == []


def test_every_set_aside_file_gets_a_name_of_its_own(tmp_path):
    path = tmp_path / INDEX_FILE
    for attempt in range(3):
        path.write_text(f"not ours {attempt}")
        SavedRollouts(tmp_path)
    assert sorted(aside.read_text() for aside in set_aside_files(path)) == [f"not ours {n}" for n in range(3)]


def test_an_empty_file_is_a_new_one(tmp_path):
    path = tmp_path / INDEX_FILE
    path.write_text("")  # created, then stopped before its header
    saved = SavedRollouts(tmp_path)
    assert saved.problems == [] and set_aside_files(path) == []
    saved.add("a", ROLLOUT)
    assert SavedRollouts(tmp_path).get("a") == ROLLOUT


def test_the_cap_evicts_the_oldest_rollouts_and_the_index_keeps_the_newest(tmp_path):
    cap = 3000  # about 20 rollout records
    saved = SavedRollouts(tmp_path, max_bytes=cap)
    for index in range(200):
        saved.add(f"k{index:03d}", dataclasses.replace(ROLLOUT, seconds=float(index)))
    reloaded = SavedRollouts(tmp_path)
    kept = list(reloaded.work.index.records)
    assert 15 <= len(kept) <= 25 and kept == [f"k{index:03d}" for index in range(200 - len(kept), 200)]
    assert len((tmp_path / INDEX_FILE).read_text().splitlines()) == 1 + len(kept)
    sizes = [entry.size for entry in reloaded.work.index.records.values()]
    assert sum(sizes) <= cap < sum(sizes) + max(sizes)  # the newest that fit, no fewer
    assert reloaded.get("k199").seconds == 199 and reloaded.problems == []


def test_a_failed_rewrite_leaves_the_index_as_it_was_and_no_temporary_file(tmp_path, monkeypatch):
    saved = SavedRollouts(tmp_path)
    for index in range(5):
        saved.add(f"k{index}", ROLLOUT)
    path = tmp_path / INDEX_FILE
    before = path.read_bytes()

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        saved.work.index.drop(["k0"])  # what the cap's eviction does
    assert path.read_bytes() == before and sorted(entry.name for entry in tmp_path.iterdir()) == [INDEX_FILE, LOCK_FILE]
    monkeypatch.undo()
    assert list(SavedRollouts(tmp_path).work.index.records) == [f"k{index}" for index in range(5)]


@pytest.mark.parametrize("fields", [
    {"scores": [], "seconds": 1, "calls": 1, "skipped": 0},
    {"scores": [float("nan")], "seconds": 1, "calls": 1, "skipped": 0},
    {"scores": [1.0], "seconds": 1, "calls": 1, "skipped": 2},
    {"scores": [1.0], "seconds": 1, "calls": 1},
])
def test_a_record_out_of_range_is_not_trusted(tmp_path, fields):
    line = {"key": "a", "kind": "rollout", "saved_at": 1.0, "size": 100, "file": None, **fields}
    (tmp_path / INDEX_FILE).write_text(header() + json.dumps(line) + "\n")
    saved = SavedRollouts(tmp_path)
    assert saved.get("a") is None and len(saved.problems) == 1
    assert "a saved rollout's record is" in saved.problems[0]
    assert SavedRollouts(tmp_path).work.index.records == {}  # dropped from the index


@pytest.mark.parametrize("line", [
    {"kind": "rollout", "saved_at": 1.0, "size": 100, "file": None},  # no key
    {"key": "a", "kind": "rollout", "saved_at": 1.0, "size": -1, "file": None},
    {"key": "a", "kind": "rollout", "saved_at": 1.0, "size": 1, "file": "../elsewhere.safetensors"},
])
def test_an_index_line_out_of_range_is_skipped_and_reported(tmp_path, line):
    (tmp_path / INDEX_FILE).write_text(header() + json.dumps({**line, **ROLLOUT.record()}) + "\n")
    saved = SavedRollouts(tmp_path)
    assert saved.get("a") is None and "1 unreadable line(s) ignored" in saved.problems[0]
