"""FrameJudge, the one place frames are judged (verifier nodes, Calibrate, pruning previews): which frames each
kind of verifier reads and how its output becomes one score. Framework-free: no ComfyUI."""

import pytest
import torch

from cachedsearch_core.judge import FrameJudge, spread_frame_indices
from cachedsearch_core.panels import PANEL_FRAMES, spread_evenly
from cachedsearch_core.pruning import preview_frame_indices
from cachedsearch_core.video_score import ASPECTS, VideoScore
from report_text import refusal


class PerFrame:
    """An image verifier: one score per frame, the frame's mean; records the frames it was given."""

    name = "per frame"

    def __init__(self):
        self.seen = []

    def score(self, prompt, frames):
        self.seen.append(frames)
        return frames.mean(dim=(1, 2, 3))


class ClipVerifier(VideoScore):
    """A clip verifier without a network: aspect k of a clip is k + the mean of its frames."""

    name = "VideoScore-v1.1"

    def __init__(self):
        self.seen = []

    def score_clip(self, prompt, frames):
        self.seen.append(frames)
        return torch.arange(len(ASPECTS), dtype=torch.float32) + frames.mean()


class Holder:
    """How the loader nodes hand a verifier on: the model under ``verifier``."""

    def __init__(self, verifier):
        self.verifier, self.name = verifier, verifier.name

    def score_clip(self, prompt, frames):
        return self.verifier.score_clip(prompt, frames)


def video(frame_count=9):
    """Frame i is filled with i, so a score tells which frames were read."""
    return torch.arange(frame_count, dtype=torch.float32).view(-1, 1, 1, 1).expand(frame_count, 2, 2, 3).clone()


def test_an_image_verifier_averages_k_uniform_frames_with_both_ends():
    verifier = PerFrame()
    score, columns = FrameJudge(verifier, "a red ball", 3).score(video(9))
    assert [frame[0, 0, 0].item() for frame in verifier.seen[0]] == [0, 4, 8]
    assert score == pytest.approx(4.0) and columns == {}
    assert FrameJudge(verifier, "a red ball", 3).label == "per frame"


def test_k_frames_of_a_clip_are_spread_evenly_with_both_ends_and_the_middle_for_one():
    assert spread_frame_indices(81, 8) == [0, 11, 23, 34, 46, 57, 69, 80]
    assert spread_frame_indices(9, 8) == [0, 1, 2, 3, 5, 6, 7, 8]
    assert spread_frame_indices(5, 8) == [0, 1, 2, 3, 4]
    assert spread_frame_indices(9, 1) == [4]
    assert spread_frame_indices(6, 3) == [0, 3, 5]  # 2.5 rounds up


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, PANEL_FRAMES, 9])
def test_the_verifiers_the_previews_and_the_panels_pick_the_same_frames(count):
    """One rule: an image verifier's scored frames, a pruning preview's frames and a panel row's frames agree."""
    for frame_count in range(1, 100):
        rule = spread_frame_indices(frame_count, count)
        assert FrameJudge(PerFrame(), "a red ball", count).frame_indices(frame_count) == rule
        assert spread_evenly(range(frame_count), count) == rule
        if count <= frame_count:  # a preview never asks for more frames than the video has (PruningPlan.check)
            assert preview_frame_indices(frame_count, count) == rule


def test_a_one_frame_preview_and_a_half_way_position_take_the_judges_frame():
    # Changed on purpose (#39): a one-frame preview was the first frame and positions at a half rounded to even.
    assert preview_frame_indices(9, 1) == [4]
    assert preview_frame_indices(6, 3) == [0, 3, 5]


def test_a_clip_verifier_reads_strided_frames_and_ranks_by_its_aspects():
    verifier = ClipVerifier()
    judge = FrameJudge(Holder(verifier), "a red ball", 3)
    assert judge.watches_clips and judge.frame_indices(9) == [0, 3, 6]  # the model card's stride, last frames out
    score, columns = judge.score(video(9))
    assert list(columns) == list(ASPECTS) and columns[ASPECTS[0]] == pytest.approx(3.0)
    assert score == pytest.approx(3.0 + 2.0)  # the mean of aspects 3, 4, 5, 6, 7
    assert judge.label == "VideoScore"
    aspect = ASPECTS[3]
    one_aspect = FrameJudge(Holder(verifier), "a red ball", 3, rank_by=aspect)
    assert one_aspect.score(video(9))[0] == pytest.approx(6.0) and one_aspect.label == f"VideoScore ({aspect})"
    weighted = FrameJudge(Holder(verifier), "a red ball", 3, rank_by="weighted", aspect_weights="1, 0, 0, 0, 1")
    assert weighted.score(video(9))[0] == pytest.approx((3.0 + 7.0) / 2)


def test_bad_rankings_and_frame_counts_are_refused_before_any_frame_is_scored():
    with pytest.raises(ValueError, match=refusal("aspect_weights", "'1, 2'")):
        FrameJudge(Holder(ClipVerifier()), "a red ball", 8, rank_by="weighted", aspect_weights="1, 2")
    with pytest.raises(ValueError, match="rank_by: got 'overall'"):
        FrameJudge(PerFrame(), "a red ball", 8, rank_by="overall")
    with pytest.raises(ValueError, match="frames: got 0"):
        FrameJudge(PerFrame(), "a red ball", 0)
