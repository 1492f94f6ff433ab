"""What a search cost, against full best-of-N of the same N candidates: one model for every panel and report line
("CachedSearch: Training-Free Cached Exploration for Test-Time Search in Video Diffusion", Sec. 3.3).

Transformer calls lead: they are counted exactly, and on a GPU a video model's time is almost all transformer calls.
Seconds follow, measured on this machine, where model loading, decoding, scoring and Python overhead also count.
A full rollout computes every call a finished draft computed or skipped; full best-of-N is N of them. A commit is
one full rollout; a free commit (the delivered draft computed every call, so it is delivered as it is) and keep
(the draft delivered as drafted) cost nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from .cost_formulas import (ExtraWork, break_even_width, calls_per_stage, fewer_calls_factor, share_of_full_best_of,
                            skipped_share)
from .records import Draft

# Why calls lead, in the note the Sampler's panel shows.
CALLS_CONTEXT = ("Calls are exact and set the time on a GPU; seconds on this machine also count model loading and "
                 "overhead")


def _percent(ratio: float) -> str:
    return f"{100 * ratio:.1f} %"


@dataclasses.dataclass(frozen=True)
class SearchCost:
    """A search's cost in transformer calls and seconds against full best-of-``width``, with what delivered its
    result: a commit (predicted until one ran, then counted and timed), a free commit, or none (keep).

    width: N, every candidate the search started (a pruned search's dropped candidates included).
    finished_drafts: the drafts that ran to the end (a pruned search's survivors).
    rollout_calls: the calls of one full rollout.
    search_calls: the calls every draft computed: finished, pruned and budget-stopped drafts.
    search_seconds: the seconds of those drafts and of scoring a pruned search's previews.
    mean_draft_seconds: the finished drafts' mean seconds (C_c of gamma).
    drafts_full_rollout_seconds: the mean seconds of the finished drafts that skipped nothing, each a full rollout;
        None when every draft skipped calls.
    commit_free: the commit delivers a draft as it is (0 calls, 0 s): before a commit, because every finished draft
        already is its seed's full-compute result; after one, because the delivered draft was.
    measured_commit_calls, measured_commit_seconds: what the commit that ran counted and took; None before.
    kept: keep delivered a draft as drafted: no commit.
    draft_calls, skipped_calls: the finished drafts' transformer calls, and those the cache skipped of them.
    stage_calls: for a trajectory of several stages, per stage (in order) its name and the finished drafts' skipped
        calls and calls in it.
    reused_drafts: the finished drafts read from an earlier run's saved drafts, which cost this search nothing (their
        calls and seconds are not in search_calls and search_seconds; they still measure a draft and a rollout).
    read_back_calls: the computed calls of other work read back from saved drafts (a pruned search's candidates at a
        round, whether dropped there or continued), likewise not in search_calls.
    reused_draft_calls: the calls the reused finished drafts computed when an earlier run drafted them; with
        search_calls and read_back_calls, what the search cost whenever it was computed (``drafted_calls``), which a
        pick that reads the drafts back from disk still shows as the search's cost.
    second_stage_calls: the calls of the stock stages that run once, on the delivered latent only, after the
        Recommit (LTX-2.3's upsample and refine pass), as the graph plans them; None when there are none (or their
        calls cannot be read from the graph). Running the whole pipeline for every candidate pays them N times.
    """

    width: int
    finished_drafts: int
    rollout_calls: int
    search_calls: int
    search_seconds: float
    mean_draft_seconds: float
    drafts_full_rollout_seconds: float | None = None
    commit_free: bool = False
    measured_commit_calls: int | None = None
    measured_commit_seconds: float | None = None
    kept: bool = False
    draft_calls: int = 0
    skipped_calls: int = 0
    stage_calls: tuple[tuple[str, int, int], ...] = ()
    reused_drafts: int = 0
    read_back_calls: int = 0
    reused_draft_calls: int = 0
    second_stage_calls: int | None = None

    def __post_init__(self):
        if not 1 <= self.finished_drafts <= self.width:
            raise ValueError(f"finished_drafts: got {self.finished_drafts} of a search of {self.width} candidates; "
                             "at least one draft finishes, and no more than the candidates started")
        if self.rollout_calls < 1:
            raise ValueError(f"rollout_calls: got {self.rollout_calls}; a full rollout computes at least one "
                             "transformer call (the drafts' calls were not counted)")
        if (self.measured_commit_calls is None) != (self.measured_commit_seconds is None):
            raise ValueError("measured_commit_calls and measured_commit_seconds: a commit that ran has both; "
                             f"got {self.measured_commit_calls} and {self.measured_commit_seconds}")
        if self.kept and (self.commit_ran or self.commit_free):
            raise ValueError("kept: keep delivers a draft without a commit, so the cost has no commit to count")

    @classmethod
    def of_search(cls, drafts: Sequence[Draft], *extra: ExtraWork, width: int | None = None,
                  commit_free: bool = False, stage_names: Sequence[str] = ()) -> SearchCost:
        """The cost of a search that finished ``drafts``, before any commit, with the ``extra`` work it paid for (a
        pruned search's dropped drafts and previews, a fixed-budget search's stopped draft) and ``width`` the
        candidates it started (the finished drafts by default). ``commit_free``: every finished draft already is its
        seed's full-compute result, so whichever wins is delivered as it is. ``stage_names``: the stages' names where
        the trajectory has several, for each stage's skipped share."""
        if not drafts:
            raise ValueError("drafts: got none; a search's cost needs at least one finished draft")
        computed = ExtraWork.of_drafts(drafts)
        full_rollouts = [draft.seconds for draft in drafts if draft.skipped_nothing]
        return cls(
            width=len(drafts) if width is None else width,
            finished_drafts=len(drafts),
            rollout_calls=max(draft.calls for draft in drafts),
            search_calls=computed.calls + sum(work.calls for work in extra),
            search_seconds=computed.seconds + sum(work.seconds for work in extra),
            mean_draft_seconds=sum(draft.seconds for draft in drafts) / len(drafts),
            drafts_full_rollout_seconds=sum(full_rollouts) / len(full_rollouts) if full_rollouts else None,
            commit_free=commit_free,
            draft_calls=sum(draft.calls for draft in drafts),
            skipped_calls=sum(draft.calls_skipped for draft in drafts),
            stage_calls=calls_per_stage(drafts, stage_names) if len(stage_names) > 1 else (),
            reused_drafts=sum(draft.reused for draft in drafts),
            read_back_calls=sum(draft.reused_calls for draft in drafts if not draft.reused)
            + sum(work.read_back_calls for work in extra),
            reused_draft_calls=sum(draft.calls_computed for draft in drafts if draft.reused),
        )

    def after_commit(self, calls: int, seconds: float) -> SearchCost:
        """This search with the commit that ran: ``calls`` counted, ``seconds`` taken (0 and 0.0: it was free)."""
        return dataclasses.replace(self, measured_commit_calls=calls, measured_commit_seconds=seconds,
                                   commit_free=calls == 0)

    def with_second_stage(self, calls: int | None) -> SearchCost:
        """This search with the ``calls`` of a second stage that refines the delivered latent once (None: none)."""
        return dataclasses.replace(self, second_stage_calls=calls)

    def after_keep(self) -> SearchCost:
        """This search with a draft delivered as drafted: nothing added."""
        return dataclasses.replace(self, commit_free=False, kept=True)

    @property
    def commit_ran(self) -> bool:
        return self.measured_commit_calls is not None

    @property
    def commit_was_full_rollout(self) -> bool:
        """A full-compute commit ran: its seconds are a full rollout's."""
        return self.commit_ran and not self.commit_free

    @property
    def pruned(self) -> bool:
        """Some candidates stopped before their draft finished (N counts them)."""
        return self.finished_drafts < self.width

    @property
    def full_calls(self) -> int:
        return self.full_calls_of(self.width)

    def full_calls_of(self, width: int) -> int:
        """The calls full best-of-``width`` computes."""
        return width * self.rollout_calls

    @property
    def commit_calls(self) -> int:
        """The commit's calls: counted once it ran, else one full rollout's; none when free or kept."""
        if self.commit_ran:
            return self.measured_commit_calls
        return 0 if self.commit_free or self.kept else self.rollout_calls

    @property
    def total_calls(self) -> int:
        return self.search_calls + self.commit_calls

    @property
    def pipeline_calls(self) -> int | None:
        """The search, its commit and the second stage once: what the delivered result cost in calls; None
        without a second stage."""
        return None if self.second_stage_calls is None else self.drafted_calls_with_commit + self.second_stage_calls

    @property
    def full_pipeline_calls(self) -> int | None:
        """The whole pipeline (a full first stage and the second stage) run for each of the N candidates."""
        return None if self.second_stage_calls is None else self.width * (self.rollout_calls + self.second_stage_calls)

    @property
    def pipeline_ratio(self) -> float | None:
        """``pipeline_calls`` against ``full_pipeline_calls``: the delivered result's share of the pipeline run N
        times; None without a second stage."""
        return None if self.pipeline_calls is None else self.pipeline_calls / self.full_pipeline_calls

    def second_stage_line(self) -> str | None:
        """The second stage's calls, paid once for the winner, and the whole against the pipeline run N times."""
        if self.pipeline_calls is None:
            return None
        return (f"second stage (after the Recommit, for the winner only): {self.second_stage_calls} calls; the "
                f"search, its commit and the second stage {self.pipeline_calls} against {self.full_pipeline_calls} "
                f"= {self.width} x ({self.rollout_calls} + {self.second_stage_calls}) for the whole pipeline run for "
                f"each candidate ({_percent(self.pipeline_ratio)})")

    @property
    def calls_ratio(self) -> float:
        """The drafts' calls against full best-of-N's."""
        return share_of_full_best_of(self.search_calls, self.width, self.rollout_calls)

    @property
    def calls_ratio_with_commit(self) -> float:
        """The drafts' and the commit's calls against full best-of-N's: the search's cost as delivered."""
        return share_of_full_best_of(self.total_calls, self.width, self.rollout_calls)

    @property
    def drafted_calls(self) -> int:
        """The search's calls whichever run computed them: this run's and those read back from saved drafts."""
        return self.search_calls + self.read_back_calls + self.reused_draft_calls

    @property
    def drafted_ratio(self) -> float:
        """``drafted_calls`` against full best-of-N's: the search's cost however much of it this run read back."""
        return share_of_full_best_of(self.drafted_calls, self.width, self.rollout_calls)

    @property
    def drafted_by_this_run(self) -> bool:
        """This run computed every call of the search (none read back from an earlier run's saved drafts)."""
        return self.drafted_calls == self.search_calls

    @property
    def drafted_calls_with_commit(self) -> int:
        """The search's calls (``drafted_calls``) and the commit's: the search as delivered."""
        return self.drafted_calls + self.commit_calls

    @property
    def drafted_ratio_with_commit(self) -> float:
        return share_of_full_best_of(self.drafted_calls_with_commit, self.width, self.rollout_calls)

    @property
    def commit_ratio(self) -> float:
        return share_of_full_best_of(self.commit_calls, self.width, self.rollout_calls)

    @property
    def over_full_best_of(self) -> bool:
        """The cache skipped too little to pay for the commit: more calls than full best-of-N."""
        return self.drafted_calls_with_commit > self.full_calls

    @property
    def full_rollout_seconds(self) -> float | None:
        """C_f measured on this machine: the commit's seconds once a full one ran, else the mean of the finished
        drafts that skipped nothing; None when neither measured it."""
        full = self.measured_commit_seconds if self.commit_was_full_rollout else self.drafts_full_rollout_seconds
        return full or None  # zero seconds measure nothing (and every ratio would divide by them)

    @property
    def commit_seconds(self) -> float | None:
        """The commit's seconds: measured once it ran, else one full rollout's (None while unmeasured); none when
        free or kept."""
        if self.commit_ran:
            return self.measured_commit_seconds
        return 0.0 if self.commit_free or self.kept else self.full_rollout_seconds

    @property
    def total_seconds(self) -> float | None:
        commit = self.commit_seconds
        return None if commit is None else self.search_seconds + commit

    @property
    def seconds_ratio(self) -> float | None:
        full = self.full_rollout_seconds
        return None if full is None else share_of_full_best_of(self.search_seconds, self.width, full)

    @property
    def seconds_ratio_with_commit(self) -> float | None:
        full, total = self.full_rollout_seconds, self.total_seconds
        return None if full is None or total is None else share_of_full_best_of(total, self.width, full)

    @property
    def gamma(self) -> float | None:
        """C_c / C_f in seconds: a finished draft's mean against a full rollout."""
        full = self.full_rollout_seconds
        return None if full is None else self.mean_draft_seconds / full

    @property
    def break_even_width(self) -> float | None:
        """The width above which this kind of search beats full best-of-N in seconds (``break_even_width``); None
        for a pruned search, whose dropped drafts the N C_c + C_commit model does not hold, and while C_f is
        unmeasured."""
        if self.pruned or self.gamma is None:
            return None
        return break_even_width(self.gamma, self.commit_seconds / self.full_rollout_seconds)

    @property
    def skipped_share(self) -> float | None:
        """The share of the finished drafts' calls the cache skipped (None when they had none)."""
        return skipped_share(self.skipped_calls, self.draft_calls)

    @property
    def fewer_calls_factor(self) -> float | None:
        """The finished drafts' calls over those they computed (``fewer_calls_factor``)."""
        return fewer_calls_factor(self.skipped_calls, self.draft_calls)

    def reuse_line(self) -> str | None:
        """What came from an earlier run's saved drafts: how many drafts, and the calls of candidates resumed from a
        saved state; None when nothing did."""
        parts = []
        if self.reused_drafts:
            parts.append(f"{self.reused_drafts} of {self.finished_drafts} drafts reused from an earlier run (saved on "
                         "disk)")
        if self.read_back_calls:
            parts.append(f"{self.read_back_calls} transformer calls of candidates resumed from states an earlier run "
                         "saved (on disk)")
        return f"{'; '.join(parts)}, at no cost" if parts else None

    def calls_line(self) -> str:
        """The transformer calls: the drafts', and with what delivered the result."""
        text = (f"transformer calls: the drafts computed {self.search_calls} of the {self.full_calls} that full "
                f"best-of-{self.width} computes ({_percent(self.calls_ratio)})")
        if self.reused_drafts:
            text += f" ({self.reused_drafts} reused drafts at 0)"
        if self.read_back_calls:
            text += f" ({self.read_back_calls} calls read back at 0)"
        if self.kept:
            return f"{text}; no commit (keep delivers the draft as drafted)"
        return f"{text}; with the commit ({self.commit_calls}) {self.total_calls} " \
               f"({_percent(self.calls_ratio_with_commit)})"

    def seconds_line(self) -> str:
        """The seconds measured here: the search's, a full rollout's and where that was measured, the ratios, gamma
        and the break-even width."""
        text = f"seconds measured on this machine: the search {self.search_seconds:.2f} s"
        full = self.full_rollout_seconds
        if full is None:
            measured_by = "no full rollout was measured (keep runs no commit)" if self.kept else \
                "a full rollout's seconds are measured by a commit"
            return f"{text}, mean draft {self.mean_draft_seconds:.2f} s; {measured_by}"
        source = "the commit" if self.commit_was_full_rollout else "the drafts that skipped nothing"
        text += f", full rollout {full:.2f} s ({source}): {_percent(self.seconds_ratio)} of full best-of-{self.width}"
        if self.kept:
            text += " (no commit)"
        else:
            text += f", with the commit ({self.commit_seconds:.2f} s) {_percent(self.seconds_ratio_with_commit)}"
        text += f"; gamma (mean draft / full rollout) {self.gamma:.2f}"
        if self.break_even_width is not None:
            text += f", break-even width N* = {self.break_even_width:.2f}"
        return text

    def report_lines(self) -> list[str]:
        return [line for line in (self.reuse_line(), self.calls_line(), self.second_stage_line(), self.seconds_line())
                if line]

    def line(self) -> str:
        """The cost in one line for the panels: the calls, the seconds' ratios once a full rollout's seconds are
        measured, and why calls lead."""
        text = self.calls_line()
        if self.seconds_ratio is not None:
            with_commit = "" if self.kept else f", with the commit {_percent(self.seconds_ratio_with_commit)}"
            text += f"; in seconds {_percent(self.seconds_ratio)}{with_commit}"
        return f"{text}. {CALLS_CONTEXT}"

    def as_dict(self) -> dict:
        """JSON-ready, for the Sampler's and the Recommit's panels (infinite break-even widths as None)."""
        break_even = self.break_even_width
        return {"num_candidates": self.width, "finished_drafts": self.finished_drafts,
                "rollout_calls": self.rollout_calls, "full_calls": self.full_calls,
                "search_calls": self.search_calls, "commit_calls": self.commit_calls,
                "calls_ratio": self.calls_ratio, "calls_ratio_with_commit": self.calls_ratio_with_commit,
                "search_seconds": round(self.search_seconds, 3), "full_rollout_seconds": self.full_rollout_seconds,
                "commit_seconds": self.commit_seconds, "seconds_ratio": self.seconds_ratio,
                "seconds_ratio_with_commit": self.seconds_ratio_with_commit, "gamma": self.gamma,
                "break_even_width": break_even if break_even is not None and math.isfinite(break_even) else None,
                "commit_ran": self.commit_ran, "commit_free": self.commit_free, "kept": self.kept,
                "draft_calls": self.draft_calls, "skipped_calls": self.skipped_calls,
                "skipped_share": self.skipped_share, "fewer_calls_factor": self.fewer_calls_factor,
                "mean_draft_seconds": self.mean_draft_seconds, "reused_drafts": self.reused_drafts,
                "read_back_calls": self.read_back_calls, "reuse_line": self.reuse_line(),
                "drafted_calls": self.drafted_calls, "drafted_ratio": self.drafted_ratio,
                "drafted_ratio_with_commit": self.drafted_ratio_with_commit,
                "drafted_by_this_run": self.drafted_by_this_run,
                "drafted_calls_with_commit": self.drafted_calls_with_commit, "commit_ratio": self.commit_ratio,
                "over_full_best_of": self.over_full_best_of,
                "stage_skipped_shares": [{"stage": name, "share": skipped_share(skipped, calls)}
                                         for name, skipped, calls in self.stage_calls],
                "second_stage_calls": self.second_stage_calls, "pipeline_calls": self.pipeline_calls,
                "full_pipeline_calls": self.full_pipeline_calls, "pipeline_ratio": self.pipeline_ratio,
                "note": self.line()}
