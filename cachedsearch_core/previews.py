"""The pruning preview, declared once: what a preview kind is called, the tensor a candidate's saved state keeps it
under, where on a trajectory it is scored, and the record Calibrate keeps of a cached rollout's previews (issue 51
item 1), which the policy chooser (``search_policy``) reads.

A preview at prune step p is the verifier's score of the sampler's x0 estimate of its last call before step p,
decoded as the Pruning Plan decodes it (a few latent frames, each on its own). The ComfyUI part (capturing the
estimate during a rollout, decoding and scoring it) is ``nodes/previews.py``.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Sequence

from .judge import spread_frame_indices
from .pruning import CacheWindow
from .search_policy import CachedRollout

# This many prune steps, the first and the last where a Pruning Plan may prune, are scored per cached rollout (and
# every switch between two stages). Each costs a decode of K frames and a verifier call per rollout (the measured
# cost: docs/pruning-and-budget.md, "Calibrate records previews"). The chooser (``policy_chooser``) prunes only at
# steps every rollout scored, in at most two rounds; on the audit world it chose the same policies from the first
# and last step as from four spread steps, and did worse from any one step (2-fold over the calibration's prompts,
# ``bench/auto_budget.py --preview-steps``).
PREVIEW_STEPS = 2


@dataclasses.dataclass(frozen=True)
class PreviewKind:
    """A kind of pruning preview: its name in records and reports, and the name of the tensor a pruned candidate's
    saved state keeps it under (read back by a re-queued search instead of sampling again)."""

    name: str
    saved_tensor: str


# The sampler's own x0 estimate: free to capture, one decode and one verifier call per scored candidate.
X0_PREVIEW = PreviewKind(name="x0", saved_tensor="x0")


def preview_steps(windows: Sequence[CacheWindow], steps: int, most: int = PREVIEW_STEPS) -> tuple[int, ...]:
    """The prune steps to score on a trajectory of ``steps`` whose stages' caches are ``windows``: ``most`` of the
    steps where a Pruning Plan may prune (``CacheWindow.admits``, or a switch between two stages) evenly spread, the
    first and last included, and every switch (where a staged search's stages hand over)."""
    switches = {window.first_step for window in windows[1:] if 1 <= window.first_step < steps}
    allowed = [step for step in range(1, steps) if step in switches or any(w.admits(step) for w in windows)]
    spread = {allowed[index] for index in spread_frame_indices(len(allowed), most)} if allowed else set()
    return tuple(sorted(spread | switches))


@dataclasses.dataclass(frozen=True)
class RolloutPreviews:
    """What Calibrate records of one cached rollout's previews.

    kind: the preview kind's name (``X0_PREVIEW``); steps: the prune steps scored, rising; scores: per step, each
    verifier's score (a combined verifier's parts in order, uncombined, as ``SavedRollout.scores``); computed_before:
    per step, the transformer calls the rollout computed before it; seconds: the decoding and verifier time the
    previews took (not part of the rollout's own seconds)."""

    kind: str
    steps: tuple[int, ...]
    scores: tuple[tuple[float, ...], ...]
    computed_before: tuple[int, ...]
    seconds: float

    @property
    def verifier_calls(self) -> int:
        return sum(len(scores) for scores in self.scores)

    @classmethod
    def from_record(cls, record: dict) -> RolloutPreviews:
        """Raises ValueError when ``record`` is not a complete, consistent previews record."""
        try:
            previews = cls(str(record["kind"]), tuple(int(step) for step in record["steps"]),
                           tuple(tuple(float(score) for score in scores) for scores in record["scores"]),
                           tuple(int(calls) for calls in record["computed_before"]), float(record["seconds"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"incomplete previews ({error})") from None
        if not len(previews.steps) == len(previews.scores) == len(previews.computed_before) or \
                list(previews.steps) != sorted(set(previews.steps)) or min(previews.steps, default=1) < 1 or \
                not all(math.isfinite(score) for scores in previews.scores for score in scores) or \
                list(previews.computed_before) != sorted(previews.computed_before):
            raise ValueError("previews: the steps, scores or calls do not line up")
        return previews

    def record(self) -> dict:
        return {"kind": self.kind, "steps": list(self.steps), "scores": [list(scores) for scores in self.scores],
                "computed_before": list(self.computed_before), "seconds": self.seconds}


def cached_rollout(prompt: int, seed: int, tau: float, score: float, computed: int, steps: int,
                   previews: RolloutPreviews, verifier: int = 0) -> CachedRollout:
    """The chooser's record of a cached rollout of ``steps`` steps that computed ``computed`` calls in all, its
    previews scored by verifier number ``verifier``. Each stretch's calls between scored steps are put on the
    stretch's first step: the replay reads only the calls before a scored step and the total, which stay exact."""
    per_step = [0] * steps
    bounds = (0, *previews.steps)
    totals = (*previews.computed_before, computed)
    for start, before, total in zip(bounds, (0, *previews.computed_before), totals):
        per_step[start] += total - before
    return CachedRollout(prompt, seed, tau, score,
                         {step: scores[verifier] for step, scores in zip(previews.steps, previews.scores)},
                         tuple(per_step))


def preview_call_equivalents(recorded: Iterable[RolloutPreviews], full: Iterable[tuple[float, float]]) -> float:
    """What scoring one preview costs in computed calls: the median seconds of one scored step of the ``recorded``
    previews (decoding and every verifier) over the median seconds of one computed call of the ``full`` rollouts,
    each (sampling seconds, transformer calls) (``SavedRollout.seconds``, sampling time only, and ``.calls``).
    Medians: a calibration's first rollout and first preview also load the model, the VAE and the verifier."""
    per_preview = [previews.seconds / len(previews.steps) for previews in recorded if previews.steps]
    if not per_preview:
        raise ValueError("previews: none recorded; run Calibrate in a server (it records them with the rollouts it "
                         "saves)")
    per_call = [seconds / calls for seconds, calls in full if calls > 0]
    if not per_call or not statistics.median(per_call) > 0:
        raise ValueError(f"full rollouts: got {list(full)!r} (seconds, calls); a full rollout's sampling takes time "
                         "and computes calls")
    return statistics.median(per_preview) / statistics.median(per_call)


@dataclasses.dataclass(frozen=True)
class PreviewCost:
    """What recording previews adds to a calibration, said before it runs: ``cached_rollouts`` (at most, when
    ``at_most``) of ``seeds`` prompt and seed pairs, each scored at ``steps``: one decode of a few frames and one
    verifier call per step and verifier. Where several cached rollouts of a seed reach a step with the same x0
    estimate (every tau samples the warmup alike), that preview is scored once (``nodes/previews.py``
    ``ScoredPreviews``), so the calls are an upper bound then."""

    cached_rollouts: int
    steps: tuple[int, ...]
    seeds: int
    at_most: bool = False

    @property
    def verifier_calls(self) -> int:
        return self.cached_rollouts * len(self.steps)

    @property
    def shared(self) -> bool:
        """Whether some seed has several cached rollouts, whose previews may be the same."""
        return self.cached_rollouts > self.seeds

    def sentence(self) -> str:
        if not self.steps or not self.cached_rollouts:
            return "No previews recorded: the cache window leaves no step to prune at."
        shown = ", ".join(map(str, self.steps))
        at_most = " at most" if self.at_most or self.shared else ""
        shared = "; scored once where taus of a seed reach a step alike" if self.shared else ""
        return (f"Previews: {self.verifier_calls} more verifier calls{at_most} ({len(self.steps)} per cached "
                f"rollout, at steps {shown}{shared}), each on a few decoded frames.")

    def as_dict(self) -> dict:
        return {"preview_verifier_calls": self.verifier_calls, "preview_steps": list(self.steps)}
