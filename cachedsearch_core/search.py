"""Best-of-N search bookkeeping: seeds, drafts, ranking and the search report (report Sec. 3.2); the cost model is
``cost.py``."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from .cost import SearchCost
from .step_cache import INACTIVE_PREFIX

MAX_CANDIDATES = 64
MAX_SEED = 0xFFFF_FFFF_FFFF_FFFF  # ComfyUI's seed range
# How the report says a commit was free: the delivered draft computed every call, so it is the full result.
COMMIT_FREE_DELIVERY = "its draft, which computed every call (commit free)"


def candidate_seeds(seed: int, num_candidates: int) -> list[int]:
    """Candidate i uses ``seed + i``, so any one of them can be replayed by a stock KSampler."""
    if not 1 <= num_candidates <= MAX_CANDIDATES:
        raise ValueError(
            f"num_candidates: got {num_candidates}; use 1 to {MAX_CANDIDATES} (8 is the recommended width)"
        )
    if not 0 <= seed <= MAX_SEED - (num_candidates - 1):
        raise ValueError(
            f"seed: got {seed}; with {num_candidates} candidates the seeds run to seed + {num_candidates - 1}, "
            f"so use a seed from 0 to {MAX_SEED - (num_candidates - 1)}"
        )
    return [seed + index for index in range(num_candidates)]


@dataclasses.dataclass(frozen=True)
class StageCalls:
    """Transformer calls one stage of a draft computed and skipped (each stage runs its own cache)."""

    computed: int
    skipped: int

    @property
    def skipped_fraction(self) -> float:
        calls = self.computed + self.skipped
        return self.skipped / calls if calls else 0.0


@dataclasses.dataclass(frozen=True)
class Draft:
    """One cached draft: its seed, wall time and how many transformer calls the cache computed or skipped,
    in all and (for a staged trajectory) per stage."""

    seed: int
    seconds: float
    calls_computed: int
    calls_skipped: int
    stage_calls: tuple[StageCalls, ...] = ()
    # Set when the cache could not serve this model and computed every call.
    cache_inactive_reason: str | None = None

    @property
    def skipped_fraction(self) -> float:
        calls = self.calls_computed + self.calls_skipped
        return self.calls_skipped / calls if calls else 0.0

    @property
    def skipped_nothing(self) -> bool:
        """The cache computed every transformer call (or there was none): the draft is a full-compute rollout."""
        return self.calls_skipped == 0


@dataclasses.dataclass(frozen=True)
class Ranking:
    """Verifier scores per candidate (seed order) and the winner, the first highest score."""

    scores: tuple[float, ...]
    verifier: str = "scores"
    # Named per-candidate values shown beside the score (VideoScore's aspects, the verifiers a combined score uses).
    columns: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def __post_init__(self):
        scores = tuple(float(score) for score in self.scores)
        if not scores:
            raise ValueError("scores: got none; a ranking needs one score per candidate")
        bad = [index for index, score in enumerate(scores) if not math.isfinite(score)]
        if bad:
            raise ValueError(
                f"scores: candidate(s) {', '.join(str(i + 1) for i in bad)} scored {scores[bad[0]]}; "
                "every score must be a finite number (check the verifier's input frames)"
            )
        object.__setattr__(self, "scores", scores)
        columns = tuple((str(name), tuple(float(value) for value in values)) for name, values in self.columns)
        for name, values in columns:
            if len(values) != len(scores):
                raise ValueError(f"columns: {name!r} has {len(values)} values for {len(scores)} candidates")
        object.__setattr__(self, "columns", columns)

    @property
    def winner(self) -> int:
        """Index of the winning candidate; ties go to the lowest seed (deterministic)."""
        return max(range(len(self.scores)), key=lambda index: (self.scores[index], -index))

    def check_matches(self, num_candidates: int) -> None:
        if len(self.scores) != num_candidates:
            raise ValueError(
                f"ranking: has {len(self.scores)} scores but the search made {num_candidates} candidates; "
                "connect the ranking made from this sampler's drafts (same num_candidates)"
            )


def parse_scores(text: str) -> tuple[float, ...]:
    """Numbers separated by commas, semicolons, spaces or new lines."""
    tokens = [token for token in text.replace(",", " ").replace(";", " ").split() if token]
    if not tokens:
        raise ValueError("scores: got no numbers; write one score per candidate, e.g. '0.12, 0.57, -0.3'")
    try:
        return tuple(float(token) for token in tokens)
    except ValueError:
        raise ValueError(
            f"scores: could not read {text!r} as numbers; write one score per candidate, e.g. '0.12, 0.57, -0.3'"
        ) from None


def search_cost(drafts: Sequence[Draft], pruning=None, budget=None, commit_free: bool = False,
                stage_names: Sequence[str] = ()) -> SearchCost:
    """The cost of a search that finished ``drafts`` (``SearchCost.of_search``), before any commit."""
    return SearchCost.of_search(drafts, pruning, budget, commit_free, stage_names)


def search_report(
    drafts: Sequence[Draft],
    cache_description: str,
    cost: SearchCost,
    ranking: Ranking | None = None,
    stage_names: Sequence[str] = (),
    numbers: Sequence[int] | None = None,
) -> str:
    """The text the sampler and recommit nodes show: per candidate and for the whole search, with ``stage_names``
    the skipped calls of each stage over all drafts, with a ranking the winner and what delivered it, then the
    search's ``cost`` (its commit predicted on the sampler, counted on the recommit). ``numbers``: each draft's
    candidate number (its place in the search's seed order, which a pruned search's survivors keep); 1, 2, ... by
    default."""
    numbers = list(numbers) if numbers is not None else list(range(1, len(drafts) + 1))
    lines = [f"CachedSearch: {len(drafts)} candidate(s), {cache_description}"]
    inactive_reasons = dict.fromkeys(d.cache_inactive_reason for d in drafts if d.cache_inactive_reason)
    lines.extend(f"{INACTIVE_PREFIX}{reason}" for reason in inactive_reasons)
    winner = ranking.winner if ranking is not None else None
    lines.append(f"{'':2}{'#':>3}  {'seed':>20}  {'score':>9}  {'skipped calls':>15}  {'seconds':>8}")
    for index, draft in enumerate(drafts):
        calls = draft.calls_computed + draft.calls_skipped
        score = f"{ranking.scores[index]:9.4f}" if ranking is not None else f"{'-':>9}"
        skipped = f"{draft.calls_skipped}/{calls} ({100 * draft.skipped_fraction:.0f}%)"
        marker = "*" if index == winner else " "
        lines.append(f"{marker:2}{numbers[index]:>3}  {draft.seed:>20}  {score}  {skipped:>15}  {draft.seconds:8.2f}")
    for stage_index, name in enumerate(stage_names):
        computed = sum(draft.stage_calls[stage_index].computed for draft in drafts)
        skipped = sum(draft.stage_calls[stage_index].skipped for draft in drafts)
        fraction = StageCalls(computed, skipped).skipped_fraction
        lines.append(f"{name}: {skipped}/{computed + skipped} calls skipped ({100 * fraction:.0f}%) over all drafts")
    delivered_free = cost.commit_ran and cost.commit_free
    if winner is not None:
        delivered = "the cached draft as-is (keep)" if cost.kept else "recommit at full compute"
        if delivered_free:
            delivered = COMMIT_FREE_DELIVERY
        lines.append(f"winner: candidate {numbers[winner]}, seed {drafts[winner].seed}, delivered by {delivered}")
    if delivered_free:
        lines.append("commit free: the winning draft skipped nothing, so it already is the full-compute result "
                     "(delivered without sampling again)")
    lines.extend(cost.report_lines())
    return "\n".join(lines)
