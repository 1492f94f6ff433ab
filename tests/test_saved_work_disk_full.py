"""Drafts that cannot be kept (a full disk, a read-only folder): the search delivers every draft all the same, the
Sampler's panel says in one line that they were not kept, nothing half-written is left in the folder, and the next
run, once there is room, saves them again."""

import contextlib
import errno
import os
import subprocess

import pytest
import torch

from cachedsearch_core.draft_store import DraftStore
from cachedsearch_core.saved_work import INDEX_FILE, LOCK_FILE
from report_text import says
from test_pruning import SEED, recipe_for, wan  # noqa: F401 (the fixture)

SEEDS = [SEED, SEED + 1, SEED + 2]


def search(engine, wan, folder):  # noqa: F811
    """The Sampler's search with saved drafts in ``folder``: its candidates and the panel's cost payload."""
    nodes = engine.extension.nodes
    saved = nodes.saved_drafts.SavedDrafts(DraftStore(folder), "setup")
    candidates = nodes.candidates.run_search(recipe_for(engine, wan), SEEDS, saved=saved)
    (cost,) = nodes.sampler_node.search_output(candidates).ui["cachedsearch_cost"]
    return candidates, cost


def kept(folder) -> list[str]:
    """What the store keeps in ``folder``: every file but the lock."""
    return sorted(path.name for path in folder.iterdir() if path.name != LOCK_FILE) if folder.is_dir() else []


def test_a_full_disk_keeps_no_draft_says_so_on_the_panel_and_the_next_run_saves_them(engine, wan, tmp_path,  # noqa: F811
                                                                                      monkeypatch):
    folder = tmp_path / "saved"
    alone, _ = search(engine, wan, tmp_path / "elsewhere")

    def disk_full(descriptor):  # the latent file's bytes do not fit: the file system says so when they are flushed
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    full, cost = search(engine, wan, folder)
    assert torch.equal(full.draft_latents, alone.draft_latents)  # delivered all the same
    # the 3 drafts, the system's reason and the folder
    assert says(cost["drafts_not_kept"], 3, os.strerror(errno.ENOSPC), str(folder)), cost["drafts_not_kept"]
    assert cost["drafts_not_kept"] in full.report().splitlines() and not full.drafts_saved
    assert kept(folder) == []  # no latent file, no record
    monkeypatch.undo()

    again, cost = search(engine, wan, folder)  # space is back
    assert cost["drafts_not_kept"] is None and again.drafts_saved and cost["reused_drafts"] == 0
    assert len(kept(folder)) == 1 + len(SEEDS)  # the index and a latent each
    reused, cost = search(engine, wan, folder)
    assert cost["reused_drafts"] == len(SEEDS) and torch.equal(reused.draft_latents, alone.draft_latents)


def test_a_full_index_write_leaves_no_torn_record_and_no_latent(tmp_path, monkeypatch):
    store = DraftStore(tmp_path)
    store.work.add("first", "draft", {"seed": 0}, {"samples": torch.zeros(2)})
    index = (tmp_path / INDEX_FILE).read_bytes()

    class FullDisk:
        """The index file as a full disk takes a write: a few bytes of the line, then no space."""

        def __init__(self, file):
            self.file = file

        def __getattr__(self, name):
            return getattr(self.file, name)

        def __enter__(self):
            return self

        def __exit__(self, *exception):
            self.file.close()

        def write(self, data):
            if len(data) > 5:
                return self.file.write(data[:5])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    opened = type(tmp_path).open
    monkeypatch.setattr(type(tmp_path), "open", lambda path, *args, **kwargs: FullDisk(opened(path, *args, **kwargs))
                        if path.name == INDEX_FILE else opened(path, *args, **kwargs))
    with pytest.raises(OSError, match="No space left"):
        store.work.add("second", "draft", {"seed": 1}, {"samples": torch.ones(2)})
    monkeypatch.undo()
    assert (tmp_path / INDEX_FILE).read_bytes() == index
    assert kept(tmp_path) == sorted([INDEX_FILE, "first.safetensors"])
    assert DraftStore(tmp_path).problems == []


@contextlib.contextmanager
def mounted(folder, options: str):
    """A small tmpfs at ``folder`` (root only: otherwise the test is skipped)."""
    folder.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"a tmpfs cannot be mounted here ({error}); the injected full disk above covers the path")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def remount(folder, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True)


def test_a_real_full_disk_and_a_read_only_folder(engine, wan, tmp_path):  # noqa: F811
    with mounted(tmp_path / "disk", "size=4k") as disk:
        full, cost = search(engine, wan, disk / "saved")  # one page: no room for a latent and the index
        assert says(cost["drafts_not_kept"], 3, os.strerror(errno.ENOSPC)), cost["drafts_not_kept"]
        assert not [path for path in (disk / "saved").iterdir() if path.name.endswith(".tmp")]
        remount(disk, "size=1m")  # space is back
        again, cost = search(engine, wan, disk / "saved")
        assert cost["drafts_not_kept"] is None and again.drafts_saved
        remount(disk, "ro")
        read_only, cost = search(engine, wan, disk / "elsewhere")
        assert says(cost["drafts_not_kept"], 3, os.strerror(errno.EROFS)), cost["drafts_not_kept"]
        reused, cost = search(engine, wan, disk / "saved")  # what is there is still read
        assert cost["reused_drafts"] == len(SEEDS) and torch.equal(reused.draft_latents, full.draft_latents)
