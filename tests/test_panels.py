"""What the result panels show, computed without ComfyUI: rows in seed order, rank and margin, the verifier's scale,
which frames and how small (the cost they show: test_cost.py)."""

import pytest
import torch
from report_text import says

from cachedsearch_core import Draft, Ranking, StageCalls
from cachedsearch_core.panels import (
    candidate_rows,
    describe_verifier,
    ranks_and_margins,
    spread_evenly,
    thumbnail_size,
    thumbnails,
)
from cachedsearch_core.pruning import PrunedCandidate, PruningOutcome, RoundRecord


def draft(seed, computed, skipped, stages=()):
    return Draft(seed=seed, seconds=0.5, calls_computed=computed, calls_skipped=skipped, stage_calls=stages)


def test_spread_evenly_keeps_first_and_last_and_at_most_the_limit():
    assert spread_evenly(range(81)) == [0, 11, 23, 34, 46, 57, 69, 80]
    assert spread_evenly(range(5)) == [0, 1, 2, 3, 4]
    assert spread_evenly([3, 7, 9], limit=1) == [7]


@pytest.mark.parametrize("height, width, size", [(480, 832, (148, 256)), (720, 1280, (144, 256)),
                                                 (64, 64, (64, 64)), (1024, 256, (256, 64))])
def test_thumbnail_size_shrinks_the_longest_side_to_256_and_never_enlarges(height, width, size):
    assert thumbnail_size(height, width) == size


def test_thumbnails_average_areas_and_keep_small_frames_unchanged():
    frames = torch.rand(2, 512, 512, 3)
    shrunk = thumbnails(frames)
    assert shrunk.shape == (2, 256, 256, 3)
    assert torch.allclose(shrunk[0, 0, 0], frames[0, :2, :2].mean(dim=(0, 1)))
    small = torch.rand(1, 32, 48, 3)
    assert torch.equal(thumbnails(small), small)


def test_ranks_and_margins_measure_against_the_winner_and_the_runner_up():
    assert ranks_and_margins([0.2, 0.9, 0.5]) == [(3, pytest.approx(-0.7)), (1, pytest.approx(0.4)),
                                                  (2, pytest.approx(-0.4))]
    # a tie: the earlier candidate wins (as Ranking.winner), by a margin of 0
    assert ranks_and_margins([1.0, 3.0, 3.0]) == [(3, -2.0), (1, 0.0), (2, 0.0)]
    assert ranks_and_margins([4.0]) == [(1, None)]


def pruned_outcome():
    """8 seeds from 100, pruned at step 3 of 8: candidates 2, 5, 6 and 8 survive."""
    seeds = tuple(range(100, 108))
    previews = (0.1, 0.8, 0.3, 0.2, 0.9, 0.7, 0.0, 0.6)
    survivor_indices = (1, 4, 5, 7)
    pruned = tuple(PrunedCandidate(draft(100 + index, 2, 1), previews[index])
                   for index in range(8) if index not in survivor_indices)
    return PruningOutcome(3, 8, seeds, previews, survivor_indices, pruned)


def test_pruned_search_rows_number_candidates_in_seed_order_with_every_preview_score():
    outcome = pruned_outcome()
    survivors = [draft(100 + index, 5, 3) for index in outcome.survivor_indices]
    rows = candidate_rows(survivors, pruning=outcome, ranking=Ranking((0.4, 0.1, 0.9, 0.3)))
    assert [row["candidate"] for row in rows] == list(range(1, 9))
    assert [row["seed"] for row in rows] == list(range(100, 108))
    assert [row["preview_score"] for row in rows] == list(outcome.preview_scores)
    assert [row["candidate"] for row in rows if row.get("pruned")] == [1, 3, 4, 7]
    assert all(row["prune_step"] == 3 and "score" not in row for row in rows if row.get("pruned"))
    ranked = {row["candidate"]: row for row in rows if not row.get("pruned")}
    assert [ranked[number]["score"] for number in (2, 5, 6, 8)] == [0.4, 0.1, 0.9, 0.3]
    assert [number for number, row in ranked.items() if row["winner"]] == [6]
    assert ranked[6]["rank"] == 1 and ranked[6]["margin"] == pytest.approx(0.5)
    assert ranked[5]["rank"] == 4 and ranked[5]["margin"] == pytest.approx(-0.8)


def test_the_ranking_table_places_the_finished_by_rank_then_the_last_rounds_dropped_by_preview_score():
    """Each row's line in the Verifier's table, which the panel follows as it is (#52): the finished candidates by
    rank, then the dropped ones, the last round's first, each round's by preview score (they compare only there)."""
    seeds = tuple(range(100, 106))
    # round 1 at step 3 scores all 6 and keeps 1, 2, 4 and 6; round 2 at step 5 scores those and keeps 2 and 6
    first = (0.5, 0.8, 0.1, 0.6, 0.3, 0.9)
    second = RoundRecord(5, (0, 1, 3, 5), (0.2, 0.7, 0.4, 0.6), (1, 5))
    pruned = tuple(PrunedCandidate(draft(100 + index, 2, 1), score)
                   for index, score in ((2, 0.1), (4, 0.3), (0, 0.2), (3, 0.4)))
    outcome = PruningOutcome(3, 8, seeds, first, (1, 5), pruned, later_rounds=(second,))
    rows = candidate_rows([draft(101, 5, 3), draft(105, 5, 3)], pruning=outcome, ranking=Ranking((0.1, 0.9)))
    by_place = [row["candidate"] for row in sorted(rows, key=lambda row: row["place"])]
    # 6 wins, then 2; round 2 dropped 4 (0.4) and 1 (0.2); round 1 dropped 5 (0.3) and 3 (0.1)
    assert by_place == [6, 2, 4, 1, 5, 3]
    assert "place" not in candidate_rows([draft(7, 4, 1)])[0]  # no ranking, no table


def test_a_row_without_calls_has_no_skipped_share():
    assert candidate_rows([draft(7, 0, 0)])[0]["skipped_share"] is None


def test_unpruned_rows_carry_each_experts_skipped_calls():
    stages = (StageCalls(6, 4), StageCalls(9, 1))
    rows = candidate_rows([draft(7, 15, 5, stages), draft(8, 15, 5, stages)], stage_names=("high noise", "low noise"))
    assert [row["candidate"] for row in rows] == [1, 2]
    assert rows[0]["stages"] == [{"stage": "high noise", "skipped": 4, "calls": 10, "skipped_share": 0.4},
                                 {"stage": "low noise", "skipped": 1, "calls": 10, "skipped_share": 0.1}]
    assert rows[0]["skipped_share"] == 0.25
    assert "preview_score" not in rows[0] and "pruned" not in rows[0]


# Each verifier's line is told apart by its facts: what is averaged, how many aspects, the scale's ends.
@pytest.mark.parametrize("name, facts", [("ImageReward", ("standardised",)), ("ClipScore", ("cosine",)),
                                         ("VideoScore", ("mean", "five", 1, 4)),
                                         ("VideoScore (dynamic degree)", ("one", 1, 4)),
                                         ("VideoScore (weighted)", ("weighted mean", "five", 1, 4)),
                                         ("combined (rank average)", ("rank",)), ("combined (z-score)", ("z-score",)),
                                         ("given scores", ("typed in",)), ("MyJudge", ("own score",))])
def test_every_verifier_gets_a_line_on_what_its_score_means(name, facts):
    described = describe_verifier(name)
    assert described["name"] == name and described["higher_is_better"] is True
    assert says(described["scale"], *facts), described["scale"]
