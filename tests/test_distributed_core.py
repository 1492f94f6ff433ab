"""Seed slices, the draft wire format and the master's inbox (no ComfyUI)."""

import json
import struct
import threading

import pytest
import torch

from cachedsearch_core import Draft, candidate_seeds
from cachedsearch_core.records import MAX_SEED
from cachedsearch_core.draft_exchange import (
    WIRE_FORMAT, DraftInbox, DraftMessage, MessageRefused, decode_draft, encode_draft,
)
from cachedsearch_core.seed_slices import seed_slices, slice_of
from report_text import numbers, refusal


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


@pytest.mark.parametrize("participants, facts", [([], ["none"]),
                                                 (["master", "1", "1"], ["['master', '1', '1']"])])
def test_slices_reject_bad_participant_lists(participants, facts):
    with pytest.raises(ValueError, match=refusal("participants", *facts)):
        seed_slices(0, 4, participants)


def test_a_draft_survives_the_wire_bit_for_bit():
    latent = torch.randn(1, 16, 3, 8, 8, dtype=torch.float32)
    draft = Draft(seed=2**63 + 5, seconds=1.234567890123, calls_computed=7, calls_skipped=5)
    blob = encode_draft(DraftMessage("exec_1_ab_12", "3", draft, latent, "token-3"))
    decoded = decode_draft(blob)
    assert decoded.draft == draft and decoded.job_id == "exec_1_ab_12" and decoded.participant == "3"
    assert decoded.token == "token-3"
    assert decoded.latent.dtype == latent.dtype and torch.equal(decoded.latent, latent)
    assert len(blob) < latent.numel() * 4 + 600  # the latent's bytes plus a small header


def blob_with(metadata=None, header=None, tensors=None):
    """A draft blob with some header fields replaced (``metadata``), or a whole header of our own (``header``)."""
    from safetensors.torch import save

    if header is not None:
        text = json.dumps(header).encode()
        return struct.pack("<Q", len(text)) + text
    fields = {"format": WIRE_FORMAT, "job_id": "job", "participant": "1", "token": "t", "seed": "5",
              "seconds": "1.5", "calls_computed": "3", "calls_skipped": "2", **(metadata or {})}
    return save(tensors or {"latent": torch.zeros(1, 2)}, metadata=fields)


@pytest.mark.parametrize("blob, facts", [  # after "draft: ", what is wrong: the part, the value got, what to send
    (b"", ["0 bytes", "too short"]),
    (b"\xff" * 8 + b"{}", ["header", "past the end"]),
    (blob_with(header=[1, 2]), ["header", "no metadata"]),
    (blob_with(header={"__metadata__": {"format": 5}}), ["header", "no metadata"]),
    (b"\x04\x00\x00\x00\x00\x00\x00\x00nope", ["header", "not JSON"]),
    (blob_with({"format": "other"}), ["format", "'other'", repr(WIRE_FORMAT)]),
    (blob_with({"format": "cachedsearch-draft-1"}), ["format", "'cachedsearch-draft-1'", repr(WIRE_FORMAT)]),
    (blob_with(header={"__metadata__": {"format": WIRE_FORMAT}, "latent": {"dtype": "F32", "shape": [1000],
                                                                          "data_offsets": [0, 4000]}}),
     ["data", "header"]),
    (blob_with(tensors={"x": torch.zeros(2)}), ["tensors", "['x']", "'latent'"]),
    (blob_with({"seed": "9" * 5000}), ["seed", repr("9" * 40)]),  # the value cut at 40 characters
    (blob_with({"seed": "-1"}), ["seed", "'-1'", 0, MAX_SEED]),
    (blob_with({"seed": "\u00b2"}), ["seed"]),
    (blob_with({"seconds": "nan"}), ["seconds", "'nan'", "finite"]),
    (blob_with({"seconds": "1e999"}), ["seconds", "'1e999'"]),
    (blob_with({"calls_skipped": "x"}), ["calls_skipped", "'x'"]),
])
def test_foreign_or_broken_blobs_are_refused_naming_what_is_wrong(blob, facts):
    with pytest.raises(ValueError, match=refusal("draft", *facts)):
        decode_draft(blob)


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def message(seed, participant="1", job="job", token=""):
    return DraftMessage(job, participant, Draft(seed, 1.0, 3, 2), torch.full((1, 2), float(seed)), token)


def refused(reason, match, call, *args, keep_going=False):
    with pytest.raises(MessageRefused, match=match) as error:
        call(*args)
    assert (error.value.reason, error.value.keep_going) == (reason, keep_going)


def test_a_worker_claims_its_seeds_and_only_its_token_delivers_them_once():
    inbox = DraftInbox(clock=FakeClock())
    token = inbox.claim("job", "1", [5, 6])  # before the master opened the job (a worker can start first)
    before = inbox.status()
    refused("forbidden", "token: does not match", inbox.deliver, message(5, token="guess"))
    refused("forbidden", "token: does not match", inbox.deliver, message(5, participant="2", token=token))
    refused("forbidden", "token: does not match", inbox.heartbeat, "job", "1", "guess")
    refused("forbidden", "seed: got 7; job 'job' handed participant '1' seeds 5, 6", inbox.deliver,
            message(7, token=token))
    refused("conflict", "participant: '1' already claimed", inbox.claim, "job", "1", [5, 6])
    refused("conflict", "seeds: 6 of job 'job' is already claimed by participant '1'", inbox.claim, "job", "2",
            [6, 7])
    refused("invalid", "a claim lists 1 to 64 seeds, each once", inbox.claim, "job", "2", [7, 7])
    refused("invalid", "would hold 66 seeds", inbox.claim, "job", "2", range(10, 74))
    refused("forbidden", "token: does not match", inbox.heartbeat, "other job", "1", token)
    assert inbox.status() == before  # nothing a refused message said was taken
    inbox.deliver(message(5, token=token))
    refused("conflict", "seed: 5 of job 'job' was already delivered", inbox.deliver, message(5, token=token),
            keep_going=True)
    inbox.heartbeat("job", "1", token)
    job = inbox.status()["open"]["job"]
    assert (job["opened"], job["claimed"], job["received"], job["messages"]) == (False, {"1": [5, 6]}, {"1": [5]},
                                                                                 {"1": 3})


def test_the_master_opens_the_job_with_the_seeds_it_hands_and_drops_a_claim_that_differs():
    clock = FakeClock()
    inbox = DraftInbox(clock=clock)
    good, wrong, stranger = (inbox.claim("job", participant, seeds)
                             for participant, seeds in (("1", [2, 3]), ("2", [4, 5]), ("7", [9])))
    inbox.deliver(message(2, token=good))
    inbox.deliver(message(4, participant="2", token=wrong))
    dropped = inbox.open_job("job", {"1": (2, 3), "2": (4,), "5": (6,)})
    # why each was dropped: the seeds it claimed, then those the master handed it (none to participant 7)
    assert {participant: numbers(why) for participant, why in dropped.items()} == {"2": [4, 5, 4], "7": [9]}
    assert sorted(inbox.drafts("job")) == [2]  # the dropped claim's draft went with it
    refused("gone", "participant: '2' was dropped from job 'job' \\(it claimed seeds 4, 5", inbox.heartbeat, "job",
            "2", wrong)
    refused("forbidden", "seeds: got 8; job 'job' hands participant '3' no seeds", inbox.claim, "job", "3", [8])
    refused("forbidden", "seeds: got 6, 7; job 'job' hands participant '5' seeds 6", inbox.claim, "job", "5", [6, 7])
    refused("conflict", "participant: '2' already claimed", inbox.claim, "job", "2", [4])
    inbox.claim("job", "5", [6])
    clock.now += 4
    assert inbox.silent_seconds("job", "1") == 4
    assert inbox.silent_seconds("job", "3") == 4  # never heard: since the master opened the job
    inbox.heartbeat("job", "1", good)
    assert inbox.silent_seconds("job", "1") == 0
    inbox.drop("job", "1", "silent for 61 s")
    refused("gone", "silent for 61 s", inbox.deliver, message(3, token=good))
    assert inbox.status()["open"]["job"]["received"] == {"1": [2]}
    inbox.close("job", "done")
    refused("gone", "job_id: search job 'job' was closed \\(done\\)", inbox.heartbeat, "job", "1", good)
    refused("gone", "was closed", inbox.claim, "job", "5", [1])
    assert inbox.status()["open"] == {} and inbox.status()["closed"] == {"job": "done"}
    with pytest.raises(ValueError, match="already closed"):
        inbox.open_job("job", {})


def test_open_jobs_are_capped_and_unopened_ones_forgotten_after_their_last_message():
    clock = FakeClock()
    inbox = DraftInbox(clock=clock, unopened_seconds=60, max_open_jobs=2, remembered_closed=2)
    first = inbox.claim("a", "1", [1])
    inbox.claim("b", "1", [1])
    refused("full", "already holds 2 open search jobs, the most it keeps \\(2\\)", inbox.claim, "c", "1", [1])
    inbox.open_job("own", {})  # the master's own search is never refused: the oldest unopened job makes room
    assert set(inbox.status()["open"]) == {"b", "own"}
    refused("forbidden", "token", inbox.heartbeat, "a", "1", first)
    clock.now += 61  # "b" last heard 61 s ago, never opened; "own" is the master's
    assert set(inbox.status()["open"]) == {"own"}
    kept = inbox.claim("d", "1", [1])
    clock.now += 59
    inbox.heartbeat("d", "1", kept)  # a message keeps an unopened job
    clock.now += 59
    assert set(inbox.status()["open"]) == {"own", "d"}
    for job in ("x", "y", "z"):
        inbox.close(job, "done")
    assert list(inbox.status()["closed"]) == ["y", "z"]
    assert inbox.status()["limits"] == {"open_jobs": 2, "seeds_per_job": 64, "unopened_seconds": 60}


def test_waiting_master_wakes_when_a_draft_arrives():
    inbox = DraftInbox()
    inbox.open_job("job", {"1": (9,)})
    token = inbox.claim("job", "1", [9])
    woke = threading.Event()

    def master():
        while 9 not in inbox.drafts("job"):
            inbox.wait(5.0)
        woke.set()

    thread = threading.Thread(target=master)
    thread.start()
    inbox.deliver(message(9, token=token))
    assert woke.wait(5.0)
    thread.join(5.0)
