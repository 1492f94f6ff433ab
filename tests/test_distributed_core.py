"""Seed slices, the draft wire format and the master's inbox (no ComfyUI)."""

import threading

import pytest
import torch

from cachedsearch_core import Draft, candidate_seeds
from cachedsearch_core.draft_exchange import DraftInbox, DraftMessage, decode_draft, encode_draft
from cachedsearch_core.seed_slices import seed_slices, slice_of


@pytest.mark.parametrize("num_candidates, participants", [(8, 2), (8, 3), (5, 4), (2, 3), (64, 7), (1, 1)])
def test_slices_are_contiguous_disjoint_and_cover_the_single_machine_seeds(num_candidates, participants):
    names = ["master", *[str(k) for k in range(1, participants)]]
    slices = seed_slices(100, num_candidates, names)
    assert [s.participant for s in slices] == names
    union = [seed for s in slices for seed in s.seeds]
    assert union == candidate_seeds(100, num_candidates)
    sizes = [len(s.seeds) for s in slices]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_slices_follow_the_documented_formula():
    slices = seed_slices(42, 8, ["master", "1", "2"])
    assert [s.seeds for s in slices] == [(42, 43, 44), (45, 46, 47), (48, 49)]
    assert slice_of(slices, "2") == (48, 49)
    assert seed_slices(0, 2, ["master", "a", "b"])[2].seeds == ()


@pytest.mark.parametrize("participants, message", [([], "participants: got none"),
                                                   (["master", "1", "1"], "each participant may appear once")])
def test_slices_reject_bad_participant_lists(participants, message):
    with pytest.raises(ValueError, match=message):
        seed_slices(0, 4, participants)


def test_a_draft_survives_the_wire_bit_for_bit():
    latent = torch.randn(1, 16, 3, 8, 8, dtype=torch.float32)
    draft = Draft(seed=2**63 + 5, seconds=1.234567890123, calls_computed=7, calls_skipped=5)
    blob = encode_draft(DraftMessage("exec_1_ab_12", "3", draft, latent))
    decoded = decode_draft(blob)
    assert decoded.draft == draft and decoded.job_id == "exec_1_ab_12" and decoded.participant == "3"
    assert decoded.latent.dtype == latent.dtype and torch.equal(decoded.latent, latent)
    assert len(blob) < latent.numel() * 4 + 600  # the latent's bytes plus a small header


@pytest.mark.parametrize("blob, message", [(b"", "too short"), (b"\xff" * 8 + b"{}", "runs past the end"),
                                           (None, "expected format")])
def test_foreign_blobs_are_refused_with_a_clear_message(blob, message):
    if blob is None:
        from safetensors.torch import save
        blob = save({"x": torch.zeros(2)}, metadata={"format": "other"})
    with pytest.raises(ValueError, match=message):
        decode_draft(blob)


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def message(seed, participant="1", job="job"):
    return DraftMessage(job, participant, Draft(seed, 1.0, 3, 2), torch.full((1, 2), float(seed)))


def test_inbox_keeps_early_drafts_tracks_silence_and_refuses_dropped_or_closed():
    clock = FakeClock()
    inbox = DraftInbox(clock=clock)
    assert inbox.deliver(message(5))  # before the master claimed the job
    inbox.claim("job")
    clock.now += 4
    assert inbox.silent_seconds("job", "1") == 4
    assert inbox.silent_seconds("job", "2") == 4  # never heard: since the job began
    assert inbox.heartbeat("job", "2")
    assert inbox.silent_seconds("job", "2") == 0
    inbox.drop("job", "1")
    assert not inbox.deliver(message(6)) and not inbox.heartbeat("job", "1")
    assert sorted(inbox.drafts("job")) == [5]
    assert inbox.status()["open"]["job"]["received"] == {"1": [5]}
    inbox.close("job", "done")
    assert not inbox.heartbeat("job", "2") and not inbox.deliver(message(7, "2"))
    assert inbox.status() == {"open": {}, "closed": {"job": "done"}}
    with pytest.raises(ValueError, match="already closed"):
        inbox.claim("job")


def test_unclaimed_jobs_are_forgotten_and_closed_ids_are_bounded():
    clock = FakeClock()
    inbox = DraftInbox(clock=clock, unclaimed_seconds=60, remembered_closed=2)
    inbox.deliver(message(1, job="orphan"))
    inbox.claim("kept")
    clock.now += 61
    inbox.heartbeat("other", "1")
    assert set(inbox.status()["open"]) == {"kept", "other"}
    for job in ("a", "b", "c"):
        inbox.close(job, "done")
    assert list(inbox.status()["closed"]) == ["b", "c"]


def test_waiting_master_wakes_when_a_draft_arrives():
    inbox = DraftInbox()
    inbox.claim("job")
    woke = threading.Event()

    def master():
        while 9 not in inbox.drafts("job"):
            inbox.wait(5.0)
        woke.set()

    thread = threading.Thread(target=master)
    thread.start()
    inbox.deliver(message(9))
    assert woke.wait(5.0)
    thread.join(5.0)
