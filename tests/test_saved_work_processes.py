"""Saved work shared by several processes (ComfyUI-Distributed's local workers, one ComfyUI per GPU on one user
folder): four processes saving drafts into one folder under a small cap while a fifth is killed part-way leave no
file without its record, no record without its file, the bytes on disk within the cap, and every draft saved after
the oldest one kept still there; a latent write killed half-way is never read back."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import torch

from cachedsearch_core import Draft, StageCalls
from cachedsearch_core.draft_store import DraftStore
from cachedsearch_core.saved_keys import draft_key
from cachedsearch_core.saved_work import INDEX_FILE, SWEEP_GRACE_SECONDS

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROCESSES, SAVES, KILLED_AFTER = 4, 30, 10
# A process saving drafts of its own setup, one each time it is told to (so that the processes save at the same
# time, each of their saves racing the others'); it prints, for each save, its key and a time before the save began
# (the save's record is newer than it).
WORKER = """
import sys, time, torch
from cachedsearch_core.draft_store import DraftStore
from cachedsearch_core.saved_keys import draft_key
from cachedsearch_core.records import Draft, StageCalls
folder, name, saves, cap = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
store = DraftStore(folder, max_bytes=cap)
for seed in range(saves):
    sys.stdin.readline()
    before = time.time()
    store.add(draft_key(name, seed), Draft(seed, 1.0, 7, 3, (StageCalls(7, 3),)),
              torch.full((1, 4, 3, 8, 8), float(seed)))
    print(draft_key(name, seed), before, flush=True)
"""


def start(folder, name: str, saves: int, cap: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WORKER, str(folder), name, str(saves), str(cap)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def acknowledged(output: str) -> dict[str, float]:
    return {key: float(before) for key, before in (line.split() for line in output.splitlines() if line.strip())}


def age(folder: pathlib.Path) -> None:
    """Dates every file in ``folder`` back past the sweep's grace: the store is next opened a while later."""
    past = time.time() - SWEEP_GRACE_SECONDS - 60
    for path in folder.iterdir():
        os.utime(path, (past, past))


@pytest.mark.slow
def test_four_processes_and_a_killed_fifth_keep_the_cap_on_disk_and_lose_no_record(tmp_path):
    folder = tmp_path / "saved"
    probe = DraftStore(tmp_path / "probe")
    probe.add(draft_key("probe", 0), Draft(0, 1.0, 7, 3, (StageCalls(7, 3),)), torch.zeros(1, 4, 3, 8, 8))
    entry = probe.size  # one draft's file and index line, with the header
    cap = 12 * entry
    workers = [start(folder, f"process {index}", SAVES, cap) for index in range(PROCESSES)]
    killed = start(folder, "killed", SAVES, cap)
    acks = {process: [] for process in (*workers, killed)}
    for turn in range(SAVES):
        running = [*workers, killed] if turn <= KILLED_AFTER else workers
        for process in running:  # every process saves its next draft at once
            process.stdin.write("go\n")
            process.stdin.flush()
        if turn == KILLED_AFTER:  # part-way through its eleventh save
            killed.send_signal(signal.SIGKILL)
            running = workers
        for process in running:
            line = process.stdout.readline()
            assert line, process.stderr.read()
            acks[process].append(line)
    assert killed.wait() == -signal.SIGKILL
    for worker in workers:
        worker.stdin.close()
        assert worker.wait() == 0, worker.stderr.read()
    saves = acknowledged("".join(line for lines in acks.values() for line in lines))
    assert len(saves) == PROCESSES * SAVES + KILLED_AFTER

    age(folder)
    store = DraftStore(folder, max_bytes=cap)  # the next ComfyUI to open it
    records = store.work.index.records
    named = {record.file for record in records.values()}
    files = {path.name for path in folder.glob("*.safetensors")}
    leftovers = sorted(path.name for path in folder.iterdir() if path.name.endswith(".tmp"))
    on_disk = sum(path.stat().st_size for path in folder.iterdir())
    oldest_kept = min(record.saved_at for record in records.values())
    lost = sorted(key for key, before in saves.items() if before > oldest_kept and key not in records)
    print(f"processes {PROCESSES + 1}, saves {len(saves)}, kills 1, records lost {len(lost)}, orphan files "
          f"{len(files - named) + len(leftovers)}, dangling records {len(named - files)}, bytes on disk {on_disk} "
          f"against the cap {cap} (one entry {entry})")
    assert files - named == set() and leftovers == []  # no file without its record
    assert named - files == set()  # no record without its file
    assert on_disk <= cap + entry
    assert lost == []
    assert store.problems == [] or all("unreadable line" in problem for problem in store.problems)
    assert json.loads((folder / INDEX_FILE).read_text().splitlines()[0])["format"] == "cachedsearch saved work"


HALF_WRITE = """
import os, signal, sys, torch
from cachedsearch_core import safe_files
from cachedsearch_core.draft_store import DraftStore
from cachedsearch_core.saved_keys import draft_key
from cachedsearch_core.records import Draft, StageCalls

opened = os.fdopen


class HalfWritten:
    def __init__(self, file):
        self.file = file

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.file.close()

    def write(self, data):  # the process dies with half the latent file written
        self.file.write(data[:len(data) // 2])
        self.file.flush()
        os.kill(os.getpid(), signal.SIGKILL)


safe_files.os.fdopen = lambda descriptor, mode: HalfWritten(opened(descriptor, mode))
DraftStore(sys.argv[1]).add(draft_key("s", 0), Draft(0, 1.0, 7, 3, (StageCalls(7, 3),)), torch.ones(1, 4, 3, 8, 8))
"""


@pytest.mark.slow
def test_a_latent_write_killed_half_way_is_never_read_back_and_is_swept(tmp_path):
    folder = tmp_path / "saved"
    killed = subprocess.run([sys.executable, "-c", HALF_WRITE, str(folder)], cwd=ROOT, capture_output=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [path for path in folder.iterdir() if path.name.endswith(".tmp")]  # the half-written file is there
    store = DraftStore(folder)
    assert store.get(draft_key("s", 0)) is None and store.latent(draft_key("s", 0)) is None
    age(folder)
    DraftStore(folder)  # opened after the grace
    assert sorted(path.name for path in folder.iterdir() if path.name != "index.lock") == []
