"""What the result panels show, as plain data: one row per candidate in seed order (pruned ones included), each
score's rank and margin, what the verifier's score means, and which decoded frames a row gets ("CachedSearch:
Training-Free Cached Exploration for Test-Time Search in Video Diffusion", Sec. 3.2). The search's cost they show is
``cost.SearchCost``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .cost_formulas import skipped_share
from .judge import spread_frame_indices
from .pruning import PruningOutcome
from .records import Draft, Ranking

PANEL_FRAMES = 8  # frames a row shows at most, as many as the Verifier scores
PANEL_LONGEST_SIDE = 256  # pixels


def candidate_number(seed: int, first_seed: int) -> int:
    """Candidate k is the k-th seed of the search (seed, seed + 1, ...), whatever was pruned."""
    return seed - first_seed + 1


def spread_evenly(items: Sequence, limit: int = PANEL_FRAMES) -> list:
    """At most ``limit`` of ``items``, the judge's frames of a clip (``judge.spread_frame_indices``)."""
    return [items[index] for index in spread_frame_indices(len(items), limit)]


def thumbnail_size(height: int, width: int, longest: int = PANEL_LONGEST_SIDE) -> tuple[int, int]:
    """The frame's size scaled down (never up) so that its longest side is at most ``longest``."""
    scale = min(1.0, longest / max(height, width))
    return max(1, round(height * scale)), max(1, round(width * scale))


def thumbnails(frames: torch.Tensor, longest: int = PANEL_LONGEST_SIDE) -> torch.Tensor:
    """Images [F, H, W, 3] in [0, 1] shrunk to ``thumbnail_size`` (area-averaged), on the CPU as float32."""
    frames = frames.detach().to("cpu", torch.float32)
    size = thumbnail_size(frames.shape[1], frames.shape[2], longest)
    if size == tuple(frames.shape[1:3]):
        return frames
    shrunk = torch.nn.functional.interpolate(frames.movedim(-1, 1), size=size, mode="area")
    return shrunk.movedim(1, -1).clamp(0.0, 1.0)


def ranks_and_margins(scores: Sequence[float]) -> list[tuple[int, float | None]]:
    """Per score (candidate order): its rank (1 = the winner; ties go to the earlier candidate, as the winner's do)
    and its margin: the winner's lead over the runner-up (None when it is alone), for the others how far they are
    below the winner (negative, 0 on a tie)."""
    order = sorted(range(len(scores)), key=lambda index: (-scores[index], index))
    winner = order[0]
    ranks = {index: position + 1 for position, index in enumerate(order)}
    lead = scores[winner] - scores[order[1]] if len(order) > 1 else None
    return [(ranks[index], lead if index == winner else scores[index] - scores[winner])
            for index in range(len(scores))]


_VERIFIER_SCALES = (
    ("ImageReward", "ImageReward-v1.0 reward, mean over the scored frames; standardised on human preference "
                    "data: 0 is an average image, +1 one standard deviation better"),
    ("ClipScore", "CLIP score, 100 x cosine of frame and prompt, mean over the scored frames; higher matches the "
                  "prompt better"),
    ("VideoScore (weighted)", "weighted mean of VideoScore-v1.1's five aspects, each from 1 (bad) to 4 (good)"),
    ("VideoScore (", "one VideoScore-v1.1 aspect, from 1 (bad) to 4 (good)"),
    ("VideoScore", "VideoScore-v1.1, mean of five aspects, each from 1 (bad) to 4 (good)"),
    ("combined (rank average)", "weighted mean of each verifier's rank among these candidates, scaled to -0.5 "
                                "(last) .. +0.5 (first): only the order counts"),
    ("combined (z-score)", "weighted mean of each verifier's z-score among these candidates: 0 is this search's "
                           "average, +1 one standard deviation better"),
    ("given scores", "scores typed in or made by another node; the highest wins"),
)


def describe_verifier(name: str, drafts_carry_sound: bool = False) -> dict:
    """The verifier's name, that a higher score is better, and one short line on what its score means; for drafts
    that carry sound (LTX-2), that it judged their pictures only."""
    scale = next((line for prefix, line in _VERIFIER_SCALES if name.startswith(prefix)),
                 "the verifier's own score; the highest wins")
    return {"name": name, "higher_is_better": True, "scale": scale} | ({"sound_not_judged": True}
                                                                         if drafts_carry_sound else {})


def _draft_fields(draft: Draft, stage_names: Sequence[str]) -> dict:
    fields = {"seed": draft.seed, "seconds": round(draft.seconds, 3), "skipped": draft.calls_skipped,
              "calls": draft.calls, "skipped_share": skipped_share(draft.calls_skipped, draft.calls)}
    if len(stage_names) > 1:
        # A pruned draft has the stages it reached: the one it stopped in counts the calls up to the prune step.
        fields["stages"] = [{"stage": name, "skipped": stage.skipped, "calls": stage.calls,
                             "skipped_share": skipped_share(stage.skipped, stage.calls)}
                            for name, stage in zip(stage_names, draft.stage_calls)]
    return fields


def candidate_rows(drafts: Sequence[Draft], stage_names: Sequence[str] = (), pruning: PruningOutcome | None = None,
                   ranking: Ranking | None = None) -> list[dict]:
    """One JSON-ready row per candidate in seed order: the finished ``drafts`` and, for a pruned search, the
    candidates dropped at a prune round ("pruned": true, "prune_step": the round's step), every one with the
    preview score that decided it (its last round's); after several rounds each row also lists its score at every
    round it reached ("round_scores"). With a ranking of the
    finished drafts (same order) those rows also carry score, winner, rank and margin, and every row its ``place``
    in the ranking table (``place_rows``)."""
    first_seed = pruning.seeds[0] if pruning is not None else drafts[0].seed
    ranked = ranks_and_margins(ranking.scores) if ranking is not None else None
    rows = []
    for index, draft in enumerate(drafts):
        row = {"candidate": candidate_number(draft.seed, first_seed), **_draft_fields(draft, stage_names)}
        if ranking is not None:
            rank, margin = ranked[index]
            row.update(score=ranking.scores[index], winner=index == ranking.winner, rank=rank, margin=margin)
            if ranking.columns:
                row["columns"] = {name: values[index] for name, values in ranking.columns}
        rows.append(row)
    if pruning is not None:
        for dropped in pruning.pruned:
            number = candidate_number(dropped.draft.seed, first_seed)
            row = {"candidate": number, **_draft_fields(dropped.draft, stage_names), "pruned": True,
                   "prune_step": pruning.dropped_at(number - 1)}
            if ranking is not None:
                row["winner"] = False
            rows.append(row)
        several = len(pruning.rounds) > 1
        for row in rows:
            index = row["candidate"] - 1
            # The score that decided the candidate's fate: the round that dropped it, or the last one it survived.
            row["preview_score"] = pruning.deciding_score(index)
            if several:
                row["round_scores"] = [{"step": step, "score": score} for step, score in pruning.round_scores(index)]
    rows.sort(key=lambda row: row["candidate"])
    if ranking is not None:
        place_rows(rows)
    return rows


def place_rows(rows: Sequence[dict]) -> None:
    """Sets each ranking row's ``place``, its line in the panel's table (1 = the first): the scored candidates by
    rank, then the pruned ones, the last round's dropped first and by preview score within a round (preview scores
    compare only within a round); ties in candidate order."""
    for place, row in enumerate(sorted(rows, key=_table_order), start=1):
        row["place"] = place


def _table_order(row: dict) -> tuple:
    if not row.get("pruned"):
        return 0, row["rank"]
    preview = row["preview_score"]
    return 1, -row["prune_step"], -preview if preview is not None else math.inf
