"""What one sampling run's step cache computed and skipped, and how it says so in a report line."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

INACTIVE_PREFIX = "cache inactive on this model: "




@dataclasses.dataclass
class CacheStatistics:
    """What one sampling run computed and skipped."""

    calls_computed: int = 0
    calls_skipped: int = 0
    computed_by_branch: dict[str, int] = dataclasses.field(default_factory=dict)
    skipped_by_branch: dict[str, int] = dataclasses.field(default_factory=dict)
    steps_seen: set[int] = dataclasses.field(default_factory=set)
    steps_computed: set[int] = dataclasses.field(default_factory=set)
    steps_skipped: set[int] = dataclasses.field(default_factory=set)
    total_steps: int = 0
    # Calls where some branches could skip and others had to compute, so all computed (the rule of the report's
    # Sec. 3.1 for branches batched in one call), and the branch evaluations those calls could have skipped.
    calls_disagreeing: int = 0
    branch_skips_forgone: int = 0
    # Why the cache computed every call of this run, when it could not handle the model's inputs.
    inactive_reason: str | None = None

    @property
    def calls(self) -> int:
        return self.calls_computed + self.calls_skipped

    @property
    def computed_fraction(self) -> float:
        """Share of transformer calls actually computed (1.0 when none was made)."""
        return self.calls_computed / self.calls if self.calls else 1.0

    @property
    def ideal_speedup(self) -> float:
        """Speed-up if only the transformer cost time: calls made / calls computed."""
        return self.calls / self.calls_computed if self.calls_computed else 1.0

    def record(self, step: int, labels: Sequence[str], computed: bool) -> None:
        self.steps_seen.add(step)
        per_branch = self.computed_by_branch if computed else self.skipped_by_branch
        for label in labels:
            per_branch[label] = per_branch.get(label, 0) + 1
        if computed:
            self.calls_computed += 1
            self.steps_computed.add(step)
        else:
            self.calls_skipped += 1
            self.steps_skipped.add(step)

    def as_dict(self) -> dict:
        return {
            "calls_computed": self.calls_computed,
            "calls_skipped": self.calls_skipped,
            "calls_disagreeing": self.calls_disagreeing,
            "branch_skips_forgone": self.branch_skips_forgone,
            "computed_by_branch": dict(self.computed_by_branch),
            "skipped_by_branch": dict(self.skipped_by_branch),
            "steps": self.total_steps,
            "steps_computed": len(self.steps_computed),
            "skipped_steps": sorted(self.steps_skipped - self.steps_computed),
            "ideal_speedup": self.ideal_speedup,
            "inactive_reason": self.inactive_reason,
        }

    def summary(self) -> str:
        branches = ", ".join(
            f"{label} {self.computed_by_branch.get(label, 0)}"
            for label in sorted(set(self.computed_by_branch) | set(self.skipped_by_branch))
        )
        steps = self.total_steps or len(self.steps_seen)
        summary = (
            f"computed {len(self.steps_computed)}/{steps} steps ({branches}), "
            f"{self.calls_computed}/{self.calls} transformer calls, ~{self.ideal_speedup:.2f}x"
        )
        if self.inactive_reason is not None:
            summary += f"; {INACTIVE_PREFIX}{self.inactive_reason}"
        return summary
