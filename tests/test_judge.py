"""FrameJudge, the one place frames are judged (verifier nodes, Calibrate, pruning previews): which frames each
kind of verifier reads and how its output becomes one score. Framework-free: no ComfyUI."""

import pytest
import torch

from cachedsearch_core.judge import FrameJudge
from cachedsearch_core.video_score import ASPECTS, VideoScore


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
    with pytest.raises(ValueError, match="aspect_weights: got '1, 2'"):
        FrameJudge(Holder(ClipVerifier()), "a red ball", 8, rank_by="weighted", aspect_weights="1, 2")
    with pytest.raises(ValueError, match="rank_by: got 'overall'"):
        FrameJudge(PerFrame(), "a red ball", 8, rank_by="overall")
    with pytest.raises(ValueError, match="frames: got 0"):
        FrameJudge(PerFrame(), "a red ball", 0)
