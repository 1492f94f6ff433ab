"""What a calibration leaves behind: its result remembered per setup (model file, steps, sampler, scheduler; for two
experts both files and the split) in a small JSON file, and the line Apply Cache shows for it."""

from __future__ import annotations

import json
import math
import pathlib
from typing import Protocol

from .safe_files import set_aside, write_atomically

NOT_A_MEMORY = "it is not a calibration memory (a JSON object of calibrations by setup)"
WHAT_SETTING_ASIDE_LOSES = "the calibrations it remembered are not shown (calibrate again, or restore it by hand)"


class Remembered(Protocol):
    """A calibration's result (one table, one per engine, or two experts'): what it keeps in the memory."""

    def memory_entry(self) -> dict: ...


def setup_key(model_file: str, steps: int, sampler_name: str, scheduler: str) -> str:
    """The setup a calibration holds for: what changes the trajectory the cache sees."""
    return f"{model_file} | {steps} steps | {sampler_name} | {scheduler}"


_SETUP_PARTS = ("steps", "sampler", "scheduler")


def setup_difference(keys, model_file: str, steps: int, sampler_name: str, scheduler: str) -> str | None:
    """What differs between a one-stage setup and the nearest remembered one of the same model file (``keys``: the
    memory's), as "calibrated with sampler euler, this search uses sampler uni_pc"; None when no calibration of that
    file is remembered."""
    wanted = setup_key(model_file, steps, sampler_name, scheduler).split(" | ")
    nearest = None
    for key in keys:
        parts = key.split(" | ")
        if len(parts) != len(wanted) or parts[0] != model_file:
            continue
        differing = [(name, had, has) for name, had, has in zip(_SETUP_PARTS, parts[1:], wanted[1:]) if had != has]
        if nearest is None or len(differing) < len(nearest):
            nearest = differing
    if not nearest:
        return None
    calibrated = " and ".join(had if name == "steps" else f"{name} {had}" for name, had, _ in nearest)
    used = " and ".join(has if name == "steps" else f"{name} {has}" for name, _, has in nearest)
    return f"calibrated with {calibrated}, this search uses {used}"


def experts_setup_key(high_file: str, low_file: str, steps: int, split_step: int, sampler_name: str,
                      scheduler: str) -> str:
    """A two-expert setup: both expert files, and where the low-noise expert takes over."""
    return f"{high_file} + {low_file} | {steps} steps, split at {split_step} | {sampler_name} | {scheduler}"


class CalibrationMemory:
    """Calibrations remembered per setup in one JSON file (the latest result of each setup). A file that is not a
    memory (a crash or an edit broke it) is set aside under a name of its own, never overwritten; ``problems`` says
    so, to show on the node. Each write replaces the file whole (``safe_files.write_atomically``): two writers at
    once never tear it, the later one's file wins."""

    def __init__(self, path: pathlib.Path):
        self.path = pathlib.Path(path)
        self.problems: list[str] = []

    def _load(self) -> dict:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as error:
            return self._set_aside(f"it could not be read ({error})")
        if not text.strip():
            return {}
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as error:
            return self._set_aside(f"it is not JSON ({error})")
        if not (isinstance(entries, dict) and all(isinstance(entry, dict) for entry in entries.values())):
            return self._set_aside(NOT_A_MEMORY)
        return entries

    def _set_aside(self, why: str) -> dict:
        self.problems.append(set_aside(self.path, why, WHAT_SETTING_ASIDE_LOSES))
        return {}

    def remember(self, key: str, calibration: Remembered) -> None:
        """Raises OSError when the file cannot be written (the old one is then left as it was)."""
        entries = self._load()
        entries[key] = calibration.memory_entry()
        write_atomically(self.path, json.dumps(entries, indent=1, sort_keys=True).encode("utf-8"))

    def recall(self, key: str) -> dict | None:
        return self._load().get(key)

    def recall_all(self) -> dict:
        """Every remembered calibration by setup key."""
        return self._load()


def describe_remembered(entry: dict, expert: str | None = None, used_tau: float | None = None) -> str:
    """The line Apply Cache shows for a remembered calibration of its setup (of one expert's cache: ``expert``), and
    whether the node's own tau (``used_tau``, when it uses one) is the calibrated one."""
    subject = "this setup"
    if expert is not None:
        entry, subject = entry[expert], f"this setup's {expert} expert"
    if entry["tau"] == 0:
        line = (f"calibrated for {subject}: tau 0 (no tau saved calls at {100 * entry['capture_target']:.0f} % "
                "capture; cache off)")
    else:
        pooled = f", {entry['prompts']} prompts" if entry.get("prompts", 1) > 1 else ""
        line = f"calibrated for {subject}: tau {entry['tau']:g} (capture {100 * entry['capture']:.0f} %{pooled})"
    if used_tau is None:
        return line
    if math.isclose(used_tau, entry["tau"], abs_tol=1e-9):
        return f"{line}; this node uses it"
    return f"{line}; this node's tau {used_tau:g} differs: set {entry['tau']:g}, or wire Calibrate's tau here"
