"""The artist's pick: which candidate Recommit delivers when a person chooses instead of, or against, the verifier.

Candidate k (1-based) is the k-th seed of the search in seed order, pruned candidates included: a pruned search of
8 seeds has candidates 1 to 8 whatever it dropped, and a survivor keeps its number. A pruned candidate has no
finished draft (its rollout stopped at the prune step), but its seed is known, so it can still be committed.
"""

from __future__ import annotations

import dataclasses

from .search_report import COMMIT_FREE_DELIVERY, DELIVERED_BY, WINNER_LINE_PREFIX

VERIFIERS_CHOICE = 0  # the `pick` that leaves the choice to the verifier's ranking
MODES = tuple(DELIVERED_BY)  # commit, keep


@dataclasses.dataclass(frozen=True)
class PickChoices:
    """What a pick chooses among: every seed of the search in seed order (``seeds``) and, in draft order, the
    candidate indices (0-based, seed order) whose draft finished (``finished``; all of them unless pruned)."""

    seeds: tuple[int, ...]
    finished: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "seeds", tuple(int(seed) for seed in self.seeds))
        object.__setattr__(self, "finished", tuple(int(index) for index in self.finished))
        if not self.seeds:
            raise ValueError("candidates: the search made none; a pick needs at least one candidate")
        if any(not 0 <= index < len(self.seeds) for index in self.finished) or not self.finished:
            raise ValueError(f"finished: {self.finished} must name at least one of the {len(self.seeds)} candidates")

    def __len__(self) -> int:
        return len(self.seeds)

    def candidate_of_draft(self, draft_index: int) -> int:
        """The candidate number (1-based, seed order) of the ``draft_index``-th finished draft."""
        return self.finished[draft_index] + 1

    def draft_of_candidate(self, candidate: int) -> int | None:
        """The index among the finished drafts of candidate ``candidate`` (1-based); None when it was pruned."""
        index = candidate - 1
        return self.finished.index(index) if index in self.finished else None

    def check_among(self, pick_among: int) -> None:
        """A pick made among ``pick_among`` candidates belongs to a search of that width (0: unchecked)."""
        if pick_among and pick_among != len(self):
            raise ValueError(
                f"pick_among: got {pick_among} but this search has {len(self)} candidates, so the pick was made "
                "among another search's drafts and nothing is delivered; pick again from this search's drafts, or "
                "set pick_among to 0 to skip this check"
            )

    def check_choice(self, candidate: int, mode: str, input_name: str = "pick") -> None:
        """Raise a ValueError naming the input (``input_name`` for the candidate) when candidate ``candidate``
        (1-based) cannot be delivered by ``mode``."""
        if mode not in MODES:
            raise ValueError(f"mode: got {mode!r}; use 'commit' (full compute) or 'keep' (the draft as it is)")
        if not 1 <= candidate <= len(self):
            verifiers = " or 0 for the verifier's choice" if input_name == "pick" else ""
            raise ValueError(
                f"{input_name}: got {candidate}; this search has {len(self)} candidates, so use 1 to {len(self)} "
                f"(candidate k is the k-th seed from the sampler's seed){verifiers}"
            )
        if mode == "keep" and self.draft_of_candidate(candidate) is None:
            raise ValueError(
                f"mode: keep needs a finished draft, but candidate {candidate} (seed {self.seeds[candidate - 1]}) was "
                "pruned before its draft finished; use commit, which generates that seed at full compute"
            )

    def preselected(self, verifier_winner: int | None) -> int:
        """The candidate a waiting Recommit shows as chosen: the verifier's (``verifier_winner``: its index among
        the finished drafts), or 0 without a ranking."""
        return self.candidate_of_draft(verifier_winner) if verifier_winner is not None else 0


@dataclasses.dataclass(frozen=True)
class Pick:
    """The candidate Recommit delivers and who chose it."""

    candidate: int  # 1-based, seed order
    seed: int
    draft_index: int | None  # among the finished drafts; None for a pruned candidate (commit only)
    picked_by: str  # "verifier" or "you"
    mode: str
    verifier_choice: tuple[int, int] | None  # (candidate, seed) the verifier preferred; None without a ranking

    def report_line(self, commit_free: bool = False) -> str:
        """The report's line saying what was delivered and who chose it; ``commit_free``: the delivered draft
        computed every call and was delivered without sampling again."""
        delivered = COMMIT_FREE_DELIVERY if commit_free and self.mode == "commit" else DELIVERED_BY[self.mode]
        if self.picked_by == "verifier":
            return f"{WINNER_LINE_PREFIX}candidate {self.candidate}, seed {self.seed}, delivered by {delivered}"
        if self.verifier_choice is None:
            preferred = "no verifier ranked the drafts"
        else:
            preferred = f"the verifier preferred candidate {self.verifier_choice[0]} (seed {self.verifier_choice[1]})"
        return f"picked by you: candidate {self.candidate} (seed {self.seed}); {preferred}; delivered by {delivered}"

    def delivery_fields(self, pick_among: int) -> dict:
        """The Recommit panel's fields for this pick (JSON-ready)."""
        verifier_choice = None
        if self.verifier_choice is not None:
            verifier_choice = {"candidate": self.verifier_choice[0], "seed": self.verifier_choice[1]}
        return {"candidate": self.candidate, "seed": self.seed, "mode": self.mode, "picked_by": self.picked_by,
                "verifier_choice": verifier_choice, "pick_among": pick_among}


def resolve_pick(choices: PickChoices, pick: int, mode: str, verifier_winner: int | None = None,
                 pick_among: int = 0) -> Pick:
    """The candidate to deliver: candidate ``pick`` (1-based, seed order), or with ``pick`` 0 the verifier's winner
    (``verifier_winner``: its index among the finished drafts; None without a ranking).

    Raises a ValueError naming the input for a pick made among another search (``pick_among``), a pick out of
    range, no ranking and no pick, and keep on a pruned candidate.
    """
    choices.check_among(pick_among)
    verifier_choice = None
    if verifier_winner is not None:
        candidate = choices.candidate_of_draft(verifier_winner)
        verifier_choice = (candidate, choices.seeds[candidate - 1])
    if pick == VERIFIERS_CHOICE:
        if verifier_choice is None:
            raise ValueError(
                f"ranking: not connected and pick is 0 (the verifier's choice); connect a verifier's ranking or set "
                f"pick to a candidate (1 to {len(choices)})"
            )
        candidate, picked_by = verifier_choice[0], "verifier"
    else:
        candidate, picked_by = pick, "you"
    choices.check_choice(candidate, mode)
    return Pick(candidate, choices.seeds[candidate - 1], choices.draft_of_candidate(candidate), picked_by, mode,
                verifier_choice)


def with_pick_line(report: str, pick: Pick, commit_free: bool = False) -> str:
    """The search report with its winner line replaced by the pick's line (appended when it has none: no
    ranking)."""
    lines = report.splitlines()
    line = pick.report_line(commit_free)
    for index, existing in enumerate(lines):
        if existing.startswith(WINNER_LINE_PREFIX):
            lines[index] = line
            return "\n".join(lines)
    return "\n".join([*lines, line])

