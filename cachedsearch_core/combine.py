"""Ranking by several verifiers at once, each normalised across the candidates of one search.

The report warns that search can game a single verifier (its score rises while held-out metrics fall) and finds
ImageReward and VideoScore agree only weakly (median within-prompt Spearman +0.24, "Video-native verifier
robustness"). A weighted combination of per-verifier normalised scores is the guard: a candidate must look good
to several judges to win.

Normalisation, because raw scales differ (ImageReward is a z-scored reward, VideoScore lives on [1, 4] with a
median within-prompt spread of only 0.083):

* ``rank average`` (default): each verifier's scores become ranks scaled to [0, 1] (ties share their mean rank).
  A verifier can move a candidate by at most its weight, however extreme the score it hands out, so one gamed or
  miscalibrated judge cannot outvote the others with an outlier.
* ``z-score``: (score - mean) / standard deviation across the candidates. Keeps how far apart candidates are,
  so a clear winner under one verifier counts for more than a near-tie, but one outlier can dominate.

A verifier whose scores are all equal carries no information about this search and contributes 0 either way.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from .records import Ranking

RANK_AVERAGE = "rank average"
Z_SCORE = "z-score"
NORMALISATIONS = (RANK_AVERAGE, Z_SCORE)


def scaled_ranks(scores: Sequence[float]) -> list[float]:
    """Ranks in [0, 1], 1 for the highest score; tied scores share the mean of their ranks."""
    count = len(scores)
    if count == 1:
        return [0.0]
    order = sorted(range(count), key=lambda index: scores[index])
    ranks = [0.0] * count
    start = 0
    while start < count:
        end = start
        while end + 1 < count and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 / (count - 1)
        start = end + 1
    return ranks


def z_scores(scores: Sequence[float]) -> list[float]:
    mean = sum(scores) / len(scores)
    spread = math.sqrt(sum((score - mean) ** 2 for score in scores) / len(scores))
    # Equal scores are told from the scores, not from the computed spread: that is the mean's rounding (three
    # scores of 0.1 have a mean 2e-17 above them), and rounding over itself would give every candidate -1.
    if min(scores) == max(scores) or spread == 0.0:
        return [0.0] * len(scores)
    return [(score - mean) / spread for score in scores]


def normalise(scores: Sequence[float], normalisation: str) -> list[float]:
    if normalisation == RANK_AVERAGE:
        ranks = scaled_ranks(scores)
        # centred, so a constant verifier (all ranks 0.5) contributes 0 like it does under z-scores
        return [rank - sum(ranks) / len(ranks) for rank in ranks]
    if normalisation == Z_SCORE:
        return z_scores(scores)
    raise ValueError(f"normalisation: got {normalisation!r}; choose one of {list(NORMALISATIONS)}")


def unique_names(names: Sequence[str]) -> list[str]:
    """Verifier names made distinct for the table's column headers ("ImageReward", "ImageReward #2")."""
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return unique


def combine_rankings(rankings: Sequence[Ranking], weights: Sequence[float],
                     normalisation: str = RANK_AVERAGE) -> Ranking:
    """One ranking from several of the same candidates: the weighted mean of each verifier's normalised scores.

    The result's columns hold every verifier's raw scores, so the table shows what each judge said.
    """
    if len(rankings) != len(weights) or not rankings:
        raise ValueError(f"rankings: got {len(rankings)} rankings and {len(weights)} weights; connect at least one")
    names = unique_names([ranking.verifier for ranking in rankings])
    count = len(rankings[0].scores)
    for name, ranking in zip(names, rankings):
        if len(ranking.scores) != count:
            raise ValueError(f"rankings: {names[0]!r} scored {count} candidates but {name!r} scored "
                             f"{len(ranking.scores)}; connect rankings of the same search's drafts")
    for name, weight in zip(names, weights):
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weight for {name!r}: got {weight}; use a non-negative number (0 leaves it out)")
    if sum(weights) <= 0:
        raise ValueError(f"weights: all are 0 ({list(weights)}); give at least one verifier a positive weight")
    combined = [0.0] * count
    for ranking, weight in zip(rankings, weights):
        for index, value in enumerate(normalise(ranking.scores, normalisation)):
            combined[index] += weight * value / sum(weights)
    columns = tuple((name, ranking.scores) for name, ranking in zip(names, rankings))
    return Ranking(tuple(combined), verifier=f"combined ({normalisation})", columns=columns)


@dataclasses.dataclass(frozen=True)
class VerifierCombination:
    """Several verifiers scoring together, combined as ``combine_rankings`` combines their rankings.

    verifiers: the judges (any objects with a ``name``), at least one.
    weights: one non-negative weight each, not all 0.
    normalisation: one of ``NORMALISATIONS``.
    """

    verifiers: tuple
    weights: tuple[float, ...]
    normalisation: str = RANK_AVERAGE

    def __post_init__(self):
        object.__setattr__(self, "verifiers", tuple(self.verifiers))
        object.__setattr__(self, "weights", tuple(float(weight) for weight in self.weights))
        if self.normalisation not in NORMALISATIONS:
            raise ValueError(f"normalisation: got {self.normalisation!r}; choose one of {list(NORMALISATIONS)}")
        names = self.names
        for position, (name, weight) in enumerate(zip(names, self.weights), start=1):
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"weight_{position} ({name}): got {weight}; use a non-negative number (0 leaves it "
                                 "out)")
        if len(self.verifiers) != len(self.weights) or not self.verifiers:
            raise ValueError(f"verifiers: got {len(self.verifiers)} verifiers and {len(self.weights)} weights; "
                             "connect at least one")
        if sum(self.weights) <= 0:
            raise ValueError(f"weights: all are 0 ({list(self.weights)}); give at least one verifier a positive "
                             "weight")

    @property
    def names(self) -> list[str]:
        return unique_names([verifier.name for verifier in self.verifiers])

    @property
    def name(self) -> str:
        parts = ", ".join(f"{name} x {weight:g}" for name, weight in zip(self.names, self.weights))
        return f"combined ({self.normalisation}) of {parts}"

    def combine(self, scores: Sequence[Sequence[float]]) -> list[float]:
        """One combined score per candidate from ``scores[candidate][verifier]``, the candidates being one search's
        (normalised across them, as Combine Scores normalises across a search's drafts)."""
        per_verifier = list(zip(*scores))
        rankings = [Ranking(tuple(values), verifier=name) for values, name in zip(per_verifier, self.names)]
        return list(combine_rankings(rankings, self.weights, self.normalisation).scores)
