"""The search's records, at the bottom of the core: a draft with the transformer calls it computed and skipped
(in all and per stage), a verifier's ranking, and the candidates' seeds (report Sec. 3.2). Every other layer reads
these; they read nothing of the core."""

from __future__ import annotations

import dataclasses
import math

MAX_CANDIDATES = 64
MAX_SEED = 0xFFFF_FFFF_FFFF_FFFF  # ComfyUI's seed range


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
    def calls(self) -> int:
        """Every call of the stage: computed and skipped."""
        return self.computed + self.skipped


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
    # Read from the drafts an earlier run saved (``draft_store``): its calls and seconds are that run's, and this
    # search paid nothing for it.
    reused: bool = False
    # Of a draft continued from a state an earlier run saved (a pruned search's candidate at a round): the computed
    # calls and seconds read back with that state, which this search did not pay.
    reused_calls: int = 0
    reused_seconds: float = 0.0

    @classmethod
    def of_stages(cls, seed: int, seconds: float, stage_calls: tuple[StageCalls, ...], **rest) -> Draft:
        """The draft whose calls in all are its stages' (the one place they are summed)."""
        return cls(seed=seed, seconds=seconds, calls_computed=sum(stage.computed for stage in stage_calls),
                   calls_skipped=sum(stage.skipped for stage in stage_calls), stage_calls=tuple(stage_calls), **rest)

    def with_stages(self, stage_calls: tuple[StageCalls, ...], seconds: float | None = None,
                    cache_inactive_reason: str | None = None) -> Draft:
        """The draft with ``stage_calls`` (and ``seconds``, when given; a ``cache_inactive_reason`` it lacked)."""
        return Draft.of_stages(self.seed, self.seconds if seconds is None else seconds, stage_calls,
                               cache_inactive_reason=self.cache_inactive_reason or cache_inactive_reason,
                               reused=self.reused, reused_calls=self.reused_calls, reused_seconds=self.reused_seconds)

    @property
    def paid_calls(self) -> int:
        """The calls this search computed for the draft."""
        return 0 if self.reused else self.calls_computed - self.reused_calls

    @property
    def paid_seconds(self) -> float:
        """The seconds this search spent on the draft."""
        return 0.0 if self.reused else self.seconds - self.reused_seconds

    @property
    def calls(self) -> int:
        """Every transformer call of its trajectory, computed and skipped: what a full rollout computes."""
        return self.calls_computed + self.calls_skipped

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
