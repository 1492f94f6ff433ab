"""Saved calibration rollouts without a model: a rollout's key changes with what makes it, the file survives a
half-written line, and a file that is not ours is set aside, never trusted."""

import json

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


def test_rollouts_are_saved_as_they_finish_and_a_half_written_line_is_skipped(tmp_path):
    path = tmp_path / "calibration_rollouts" / "model.jsonl"
    saved = SavedRollouts(path)
    saved.add("a", ROLLOUT)
    assert SavedRollouts(path).get("a") == ROLLOUT and SavedRollouts(path).problems == []
    with path.open("a") as file:
        file.write('{"key": "b", "scores": [0.1')  # a crash mid-write
    again = SavedRollouts(path)
    assert again.get("a") == ROLLOUT and again.get("b") is None
    (problem,) = again.problems
    assert problem.endswith("1 unreadable line(s) ignored (a run stopped mid-write, or the file was edited); their "
                            "rollouts are computed again")
    again.add("c", ROLLOUT)  # starts on a line of its own
    assert SavedRollouts(path).get("c") == ROLLOUT


@pytest.mark.parametrize("content", ['{"not": "ours"}\n{"key": "a", "scores": [1], "seconds": 1, "calls": 1, '
                                     '"skipped": 0}\n', "\x00\x01garbage", ""])
def test_a_file_that_is_not_ours_is_set_aside_and_nothing_in_it_is_used(tmp_path, content):
    path = tmp_path / "model.jsonl"
    path.write_text(content)
    saved = SavedRollouts(path)
    assert saved.rollouts == {} and not path.exists() and (tmp_path / "model.jsonl.ignored").exists()
    (problem,) = saved.problems
    assert f"ignored, because it is not a {FORMAT} file" in problem and "every rollout is computed again" in problem
    saved.add("a", ROLLOUT)
    assert json.loads(path.read_text().splitlines()[0])["format"] == FORMAT


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
