"""The ranking-fidelity audit's bookkeeping: a resumable score store, per-arm reports, the tau recommendation,
and the markdown table and SVG plot it writes (report Sec. 4 protocol and Sec. 4.1 metrics).

An *arm* is one way of drafting (a cache setting or a cheap-exploration baseline); every arm is compared with the
shared full-compute references of the same prompts and seeds.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from collections.abc import Iterable

import numpy as np

from .fidelity import PROMPT_BOOTSTRAP, SEED_BOOTSTRAP, FidelityReport, ranking_fidelity
from .jsonl_store import JsonlFormat, JsonlStore

FULL_ARM = "full"
DEFAULT_CAPTURE_TARGET = 0.85


def tau_arm(tau: float) -> str:
    """The store's name of the adaptive cache's arm at ``tau``."""
    return f"tau {tau:g}"


def _read_score(record) -> tuple[tuple[str, int, int], dict]:
    """Raises ValueError unless ``record`` is a complete score record."""
    number = (int, float)
    fields = {"arm": str, "prompt": int, "seed": int, "score": number, "seconds": number, "calls": number,
              "skipped": number}
    if not isinstance(record, dict) or any(not isinstance(record.get(name), kind) or isinstance(record[name], bool)
                                           for name, kind in fields.items()):
        raise ValueError("not a score record")
    return (record["arm"], record["prompt"], record["seed"]), record


# Score files written before the header (bench/results of earlier audits) are read as they are.
SCORES_FORMAT = JsonlFormat("cachedsearch audit scores", 1, read=_read_score, write=lambda key, record: record,
                            reads_headerless=True)


class ScoreStore:
    """Scored rollouts by (arm, prompt, seed), kept in a JSON-lines file (``jsonl_store``: a torn last line or a
    foreign file is reported, not fatal) so a stopped audit resumes where it was; without a path (a calibration in
    the GUI) it keeps the records in memory only. ``problems`` lists what was found wrong with the file."""

    def __init__(self, path: pathlib.Path | None):
        self.path = pathlib.Path(path) if path is not None else None
        self._file = JsonlStore(self.path, SCORES_FORMAT) if self.path is not None else None
        self.records: dict[tuple[str, int, int], dict] = self._file.records if self._file is not None else {}
        self.problems: list[str] = self._file.problems if self._file is not None else []

    def has(self, arm: str, prompt: int, seed: int) -> bool:
        return (arm, prompt, seed) in self.records

    def add(self, arm: str, prompt: int, seed: int, score: float, seconds: float, calls: int = 0,
            skipped: int = 0) -> None:
        record = {"arm": arm, "prompt": prompt, "seed": seed, "score": float(score), "seconds": float(seconds),
                  "calls": calls, "skipped": skipped}
        if self._file is not None:
            self._file.add((arm, prompt, seed), record)
        else:
            self.records[(arm, prompt, seed)] = record

    def table(self, arm: str, prompts: Iterable[int], seeds: Iterable[int], field: str = "score") -> np.ndarray:
        prompts, seeds = list(prompts), list(seeds)
        missing = [(p, s) for p in prompts for s in seeds if not self.has(arm, p, s)]
        if missing:
            raise KeyError(f"arm {arm!r} lacks {len(missing)} rollouts, e.g. prompt {missing[0][0]} seed "
                           f"{missing[0][1]}; run the audit again to complete it")
        return np.array([[self.records[(arm, p, s)][field] for s in seeds] for p in prompts], dtype=float)


@dataclasses.dataclass(frozen=True)
class ArmResult:
    arm: str
    tau: float | None  # the cache threshold for adaptive arms, None for baselines
    speedup: float  # mean full rollout seconds / mean draft seconds
    call_speedup: float  # transformer calls of a full rollout / calls a draft computed
    skipped_share: float
    fidelity: FidelityReport
    calls: int = 0  # transformer calls the arm's rollouts made, all of them together
    computed_calls: int = 0  # of those, the ones computed (not skipped)


def evaluate_arms(store: ScoreStore, arms: dict[str, float | None], prompts, seeds, bootstrap: int = 2000,
                  seed: int = 0) -> list[ArmResult]:
    """``arms`` maps each drafting arm to its tau (None for a baseline); all share the full references. Intervals
    resample the prompts, or the seeds when there is one prompt (a calibration)."""
    prompts, seeds = list(prompts), list(seeds)
    resample = PROMPT_BOOTSTRAP if len(prompts) > 1 else SEED_BOOTSTRAP
    full = store.table(FULL_ARM, prompts, seeds)
    full_seconds = store.table(FULL_ARM, prompts, seeds, "seconds").mean()
    full_calls = store.table(FULL_ARM, prompts, seeds, "calls").sum()
    results = []
    for arm, tau in arms.items():
        calls = store.table(arm, prompts, seeds, "calls").sum()
        computed = calls - store.table(arm, prompts, seeds, "skipped").sum()
        results.append(ArmResult(
            arm=arm, tau=tau,
            speedup=full_seconds / store.table(arm, prompts, seeds, "seconds").mean(),
            call_speedup=full_calls / computed if computed else float("inf"),
            skipped_share=store.table(arm, prompts, seeds, "skipped").sum() / calls if calls else 0.0,
            fidelity=ranking_fidelity(full, store.table(arm, prompts, seeds), bootstrap=bootstrap, seed=seed,
                                      resample=resample),
            calls=int(calls), computed_calls=int(computed),
        ))
    return results


def recommend_tau(results: list[ArmResult], target: float = DEFAULT_CAPTURE_TARGET) -> float | None:
    """Among the measured taus whose capture (ratio of means) stays at or above ``target``, the one that skips the
    most calls (of equal skips the smallest tau); None when none meets the target or none of those skips a call: a
    recommendation must save something (a larger tau that skips no more only risks the ranking)."""
    saving = [r for r in results if r.tau is not None and r.fidelity.capture_of_means.value >= target
              and r.skipped_share > 0]
    return max(saving, key=lambda r: (r.skipped_share, -r.tau)).tau if saving else None


def markdown_report(results: list[ArmResult], target: float = DEFAULT_CAPTURE_TARGET) -> str:
    lines = [
        "| arm | wall speed-up | skipped calls (calls vs full) | median rho | p10 rho | top-1 | regret "
        "| capture (ratio of means) | capture (mean of ratios) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        f = r.fidelity
        lines.append(
            f"| {r.arm} | {r.speedup:.2f}x | {100 * r.skipped_share:.0f} % ({r.call_speedup:.2f}x) "
            f"| {f.rho_median:.3f} | {f.rho_p10:.3f} "
            f"| {f.top1} | {f.regret} | {f.capture_of_means} | {f.capture_mean_of_ratios} |"
        )
    tau = recommend_tau(results, target)
    lines.append("")
    lines.append(f"Recommended tau* (the tau that skips most calls with capture >= {100 * target:.0f} %): "
                 + (f"{tau:g}" if tau is not None else "none of the measured values"))
    resampled = results[0].fidelity.resampled if results else PROMPT_BOOTSTRAP
    lines.append(f"Intervals: 95 % {resampled.removesuffix('s')} bootstrap.")
    return "\n".join(lines)


def svg_plot(results: list[ArmResult], width: int = 560, height: int = 360) -> str:
    """Capture (ratio of means) against speed-up, one labelled point per arm, as a standalone SVG."""
    return capture_plot([(r.arm, r.speedup, r.fidelity.capture_of_means.value, "#2a7" if r.tau is not None else "#c52")
                         for r in results], "speed-up per draft", width, height)


def capture_plot(points: list[tuple[str, float, float, str]], x_label: str, width: int = 560,
                 height: int = 360) -> str:
    """Capture against a speed-up, one point per (label, speed-up, capture, colour), as a standalone SVG."""
    margin = 50
    speedups = [speedup for _, speedup, _, _ in points if math.isfinite(speedup)] or [1.0]
    x_max = max(2.0, math.ceil(max(speedups) * 2) / 2)

    def x(value):
        return margin + (value - 1.0) / (x_max - 1.0) * (width - 2 * margin)

    def y(value):
        return height - margin - max(0.0, min(value, 1.1)) / 1.1 * (height - 2 * margin)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             'font-size="11">', '<rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{margin}" y1="{height - margin}" x2="{width - margin}" y2="{height - margin}" stroke="black"/>',
             f'<line x1="{margin}" y1="{margin}" x2="{margin}" y2="{height - margin}" stroke="black"/>',
             f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">{x_label}</text>',
             f'<text x="14" y="{height / 2}" transform="rotate(-90 14 {height / 2})" text-anchor="middle">'
             'capture of best-of-N gain</text>']
    for tick in np.arange(1.0, x_max + 1e-9, 0.5):
        parts.append(f'<text x="{x(tick):.1f}" y="{height - margin + 14}" text-anchor="middle">{tick:.1f}x</text>')
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<text x="{margin - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.0%}</text>')
    for label, speedup, capture, colour in points:
        if math.isfinite(capture) and math.isfinite(speedup):
            parts.append(f'<circle cx="{x(speedup):.1f}" cy="{y(capture):.1f}" r="4" fill="{colour}"/>')
            parts.append(f'<text x="{x(speedup) + 6:.1f}" y="{y(capture) - 6:.1f}">{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
