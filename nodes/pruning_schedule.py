"""The Pruning Plan's schedule widget as its text reads: empty (one prune, as the other widgets say), "auto" (the
rounds a calibration chooses, with a Budget) or rounds (``PruningSchedule``). The node and the route that checks
the text as it is typed (``schedule_route``) both read it here."""

from __future__ import annotations

from ..cachedsearch_core.pruning import PruningSchedule

AUTO = "auto"


def is_auto(text: str | None) -> bool:
    return bool(text) and text.strip().lower() == AUTO


def read_schedule(text: str | None) -> PruningSchedule | None:
    """The schedule typed on the node, or None when empty (one prune) or "auto" (rounds chosen with a Budget);
    raises ValueError, naming the round, on a schedule it cannot read."""
    return PruningSchedule(text) if text and text.strip() and not is_auto(text) else None


def schedule_message(text: str | None) -> str | bool:
    """validate_inputs' answer for the schedule: True, or why it cannot be read."""
    try:
        read_schedule(text)
    except ValueError as error:
        return str(error)
    return True


def schedule_rounds(text: str | None) -> int:
    """How many rounds a valid schedule prunes in (0 when empty or "auto": one prune, or rounds chosen later)."""
    schedule = read_schedule(text)
    return 0 if schedule is None else len(schedule.rounds)
