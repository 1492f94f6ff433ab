"""The cost formulas every plan and report shares, in plain numbers: a cached rollout's share of a full one, the
break-even width, a total's share of full best-of-N, the cache's skipped share, and the extra work (calls, seconds) a
search paid for besides its finished drafts ("CachedSearch: Training-Free Cached Exploration for Test-Time Search in
Video Diffusion", Sec. 3.3). Calibration predicts with them before anything ran; ``cost.SearchCost`` reads a search's
records through them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from .records import Draft

# A cached rollout's time over a full rollout's (gamma) at Apply Cache's default tau 0.10, as the technical report
# measured it on Wan 2.1 (about 2x): what a cost is predicted with before any rollout of the setup has run.
MEASURED_CACHED_SHARE = 0.5


def rollouts_time(full_rollouts: int, cached_rollouts: int, cached_share: float = MEASURED_CACHED_SHARE) -> float:
    """Full-rollout times of ``full_rollouts`` at full compute and ``cached_rollouts`` that each take
    ``cached_share`` of one."""
    return full_rollouts + cached_rollouts * cached_share


def speedup_of(cached_share: float) -> float:
    """How many times faster a cached rollout that takes ``cached_share`` of a full one runs."""
    return 1 / cached_share


def break_even_width(gamma: float, commit_fraction: float) -> float:
    """The width above which N drafts and a commit cost less than full best-of-N: N C_c + C_commit < N C_f for
    N > C_commit / (C_f - C_c), with gamma = C_c / C_f and commit_fraction = C_commit / C_f (1 for a full commit,
    0 for a free one or none). Infinite when drafts are no cheaper than full rollouts."""
    if gamma >= 1.0:
        return math.inf
    return commit_fraction / (1.0 - gamma)


def share_of_full_best_of(total: float, width: int, full_rollout: float) -> float:
    """What ``total`` is of full best-of-``width``, whose rollouts cost ``full_rollout`` each (in any one unit)."""
    return total / (width * full_rollout)


def calls_per_stage(drafts: Sequence[Draft], stage_names: Sequence[str]) -> tuple[tuple[str, int, int], ...]:
    """Per stage (in order): its name, and the skipped calls and calls of ``drafts`` in it."""
    return tuple((name, sum(draft.stage_calls[index].skipped for draft in drafts),
                  sum(draft.stage_calls[index].calls for draft in drafts))
                 for index, name in enumerate(stage_names))


@dataclasses.dataclass(frozen=True)
class ExtraWork:
    """What a search paid for besides its finished drafts, in plain numbers: the transformer calls computed and the
    seconds of drafts that did not finish (pruned, or stopped by a budget) and of scoring previews. Pruning and the
    budget each say what theirs was; the cost model adds it up."""

    calls: int = 0
    seconds: float = 0.0
    # Computed calls of that work read back from an earlier run's saved drafts: not in ``calls``.
    read_back_calls: int = 0

    @classmethod
    def of_drafts(cls, drafts: Sequence[Draft], seconds: float = 0.0) -> ExtraWork:
        """The calls this search computed for ``drafts`` and their seconds (what was read back from an earlier
        run's saved drafts costs nothing), with ``seconds`` more (e.g. scoring their previews)."""
        return cls(sum(draft.paid_calls for draft in drafts), sum(draft.paid_seconds for draft in drafts) + seconds,
                   sum(draft.calls_computed - draft.paid_calls for draft in drafts))


def skipped_share(skipped: int, calls: int) -> float | None:
    """The share of ``calls`` transformer calls the cache skipped; None when there were none."""
    return skipped / calls if calls else None


def fewer_calls_factor(skipped: int, calls: int) -> float | None:
    """How many times fewer calls were computed than asked for (calls / computed); None when nothing was skipped
    or everything was."""
    return calls / (calls - skipped) if 0 < skipped < calls else None
