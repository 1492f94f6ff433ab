"""The cache on a latent of several parts (LTX-2's [video, audio]) on hand-computable transformers (no ComfyUI):
each part of each branch keeps its own reference input, transformation vector and accumulator; the call runs or
is skipped as a whole and counts once."""

import pytest
import torch
from report_text import says

from cachedsearch_core import StepCacheConfig, TransformationVectorCache

SIGMAS = [1.0, 0.75, 0.5, 0.25, 0.0]
BRANCHES = [("cond", "c"), ("uncond", "u")]
EVERY_STEP_MAY_SKIP = StepCacheConfig(tau=0.5, warmup_steps=0, cooldown_steps=0)


def av_latent(video_scale: float, audio_scale: float):
    """cond and uncond batched: video [2, 3, 2, 2, 2], audio [2, 2, 5, 4]; uncond's halves are twice cond's."""
    video = torch.arange(1.0, 49.0).reshape(2, 3, 2, 2, 2) * video_scale
    audio = torch.arange(1.0, 81.0).reshape(2, 2, 5, 4) * audio_scale
    return [video, audio]


def transformer(x):
    """F([video, audio]) = [2 video, 3 audio + 1]: a different transformation vector per part."""
    return lambda: [2 * x[0], 3 * x[1] + 1]


def test_each_part_of_each_branch_keeps_its_own_state_and_a_skip_counts_once():
    cache = TransformationVectorCache(EVERY_STEP_MAY_SKIP, SIGMAS)
    first = av_latent(1.0, 1.0)
    cache(transformer(first), first, SIGMAS[0], BRANCHES)
    later = av_latent(1.01, 1.02)
    video, audio = cache(lambda: pytest.fail("a skipped call must not compute"), later, SIGMAS[1], BRANCHES)
    # x + delta per part: delta_video = video_ref, delta_audio = 2 audio_ref + 1
    assert torch.allclose(video, later[0] + first[0])
    assert torch.allclose(audio, later[1] + 2 * first[1] + 1)
    assert set(cache.branches) == {(label, (identity, f"part {part}")) for label, identity in BRANCHES
                                   for part in (0, 1)}
    audio_cond = cache.branches[("cond", ("c", "part 1"))]
    assert torch.equal(audio_cond.x_ref, first[1][:1])
    assert audio_cond.accumulated == pytest.approx(0.02, rel=1e-5)
    assert cache.branches[("cond", ("c", "part 0"))].accumulated == pytest.approx(0.01, rel=1e-5)
    statistics = cache.statistics
    assert (statistics.calls_computed, statistics.calls_skipped) == (1, 1)
    assert statistics.skipped_by_branch == {"cond": 1, "uncond": 1}


def test_one_part_that_must_compute_computes_the_call():
    cache = TransformationVectorCache(EVERY_STEP_MAY_SKIP, SIGMAS)
    first = av_latent(1.0, 1.0)
    cache(transformer(first), first, SIGMAS[0], BRANCHES)
    # the video barely moves, the audio drifts by 0.6 > tau: the whole call computes, every part re-anchors
    later = av_latent(1.001, 1.6)
    output = cache(transformer(later), later, SIGMAS[1], BRANCHES)
    assert torch.equal(output[0], 2 * later[0]) and torch.equal(output[1], 3 * later[1] + 1)
    assert cache.statistics.calls_computed == 2 and cache.statistics.calls_skipped == 0
    assert all(state.accumulated == 0.0 for state in cache.branches.values())
    # both branches could have skipped on the video alone; on the audio neither could: no skip forgone
    assert cache.statistics.branch_skips_forgone == 0


def test_a_branch_whose_parts_may_all_skip_forgoes_its_skip_when_another_must_compute():
    cache = TransformationVectorCache(EVERY_STEP_MAY_SKIP, SIGMAS)
    first = av_latent(1.0, 1.0)
    cache(transformer(first), first, SIGMAS[0], BRANCHES)
    later = av_latent(1.01, 1.01)
    later[1][1:] *= 2  # uncond's audio doubles: it must compute; cond's video and audio may skip
    cache(transformer(later), later, SIGMAS[1], BRANCHES)
    assert (cache.statistics.calls_disagreeing, cache.statistics.branch_skips_forgone) == (1, 1)


def test_mode_off_passes_the_parts_through_untouched():
    cache = TransformationVectorCache(StepCacheConfig(mode="off"), SIGMAS)
    for step in range(4):
        x = av_latent(1.0 + step, 1.0)
        computed = transformer(x)()
        assert cache(lambda: computed, x, SIGMAS[step], BRANCHES) is computed
    assert cache.statistics.calls_computed == 4 and cache.branches == {}


def test_parts_of_other_shapes_turn_the_cache_off_for_the_run_with_their_shapes():
    cache = TransformationVectorCache(EVERY_STEP_MAY_SKIP, SIGMAS)
    x = av_latent(1.0, 1.0)
    cache(lambda: [2 * x[0], x[1][:, :, :4]], x, SIGMAS[0], BRANCHES)
    # the reason names the output's shapes, then the latent input's
    reason = cache.statistics.inactive_reason
    assert says(reason, "((2, 3, 2, 2, 2), (2, 2, 4, 4))", "((2, 3, 2, 2, 2), (2, 2, 5, 4))"), reason
