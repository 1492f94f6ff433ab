"""The cache rule of the report's Sec. 3.1 on hand-computable transformers (no ComfyUI)."""

import math

import pytest
import torch

from cachedsearch_core import CacheMode, StepCacheConfig, TransformationVectorCache
from cachedsearch_core.cache_statistics import INACTIVE_PREFIX
from report_text import numbers, says

STEPS = 10
SIGMAS = [1.0 - i / STEPS for i in range(STEPS + 1)]
ONE_BRANCH = [("cond", "a")]


def double(x):
    return lambda: 2 * x


def run_ramp(config, growth=0.1, steps=STEPS):
    """Feed x_t = (1 + growth * t) * ones through F(x) = 2x; return (outputs, cache, accumulators)."""
    sigmas = [1.0 - i / steps for i in range(steps + 1)]
    cache = TransformationVectorCache(config, sigmas)
    outputs, accumulators = [], []
    for step in range(steps):
        x = torch.full((1, 2, 3), 1.0 + growth * step)
        outputs.append(cache(double(x), x, sigmas[step], ONE_BRANCH))
        state = cache.branches.get(ONE_BRANCH[0])  # off mode keeps no state
        accumulators.append(None if state is None else state.accumulated)
    return outputs, cache, accumulators


@pytest.mark.parametrize(
    "tau, expected_skips",
    [
        # drift from the last computed input: step 2 0.091 skip, step 3 0.273 compute, 4 0.077, 5 0.231 skip, 6 0.462 compute, 7 skip
        (0.25, [2, 4, 5, 7]),
        (0.5, [2, 3, 5, 6, 7]),
        (0.05, []),
        (0.0, []),
    ],
)
def test_adaptive_skip_schedule(tau, expected_skips):
    config = StepCacheConfig(tau=tau, warmup_steps=2, cooldown_steps=2)
    _, cache, _ = run_ramp(config)
    assert cache.statistics.as_dict()["skipped_steps"] == expected_skips
    assert cache.statistics.calls_skipped == len(expected_skips)
    assert cache.statistics.calls_computed == STEPS - len(expected_skips)


def test_accumulator_grows_superlinearly_over_a_run_of_skips():
    config = StepCacheConfig(tau=0.5, warmup_steps=2, cooldown_steps=2)
    _, _, accumulators = run_ramp(config)
    # steps 5, 6, 7 skip after the compute at step 4 (x_ref = 1.4): drifts 0.1/1.4, 0.2/1.4, 0.3/1.4 accumulate
    assert accumulators[4] == 0.0
    assert accumulators[5] == pytest.approx(0.1 / 1.4, rel=1e-6)
    assert accumulators[6] == pytest.approx(0.3 / 1.4, rel=1e-6)
    assert accumulators[7] == pytest.approx(0.6 / 1.4, rel=1e-6)
    increments = [accumulators[5], accumulators[6] - accumulators[5], accumulators[7] - accumulators[6]]
    assert increments[0] < increments[1] < increments[2]


def test_skipped_call_returns_input_plus_last_transformation_vector():
    config = StepCacheConfig(tau=0.25, warmup_steps=2, cooldown_steps=2)
    outputs, _, _ = run_ramp(config)
    # step 2 reuses delta = F(x_ref) - x_ref = x_ref of step 1 (1.1); step 4 that of step 3 (1.3)
    assert torch.equal(outputs[2], torch.full((1, 2, 3), 1.2) + torch.full((1, 2, 3), 1.1))
    assert torch.allclose(outputs[4], torch.full((1, 2, 3), 1.4 + 1.3))
    # a computed step returns F(x) itself
    assert torch.equal(outputs[3], 2 * torch.full((1, 2, 3), 1.3))


def test_warmup_and_cooldown_are_always_computed():
    config = StepCacheConfig(tau=100.0, warmup_steps=3, cooldown_steps=4)
    _, cache, _ = run_ramp(config)
    assert cache.statistics.as_dict()["skipped_steps"] == [3, 4, 5]


def test_static_mode_computes_every_kth_step_between_warmup_and_cooldown():
    config = StepCacheConfig(mode="static", warmup_steps=2, cooldown_steps=2, static_interval=3)
    outputs, cache, _ = run_ramp(config, growth=5.0)  # drift is irrelevant in static mode
    assert cache.statistics.as_dict()["skipped_steps"] == [3, 4, 6, 7]
    assert torch.allclose(outputs[4], torch.full((1, 2, 3), 1 + 5.0 * 4 + 1 + 5.0 * 2))


def test_static_interval_one_and_off_mode_compute_everything():
    for config in (StepCacheConfig(mode="static", static_interval=1, warmup_steps=0, cooldown_steps=0),
                   StepCacheConfig(mode=CacheMode.OFF, tau=100.0, warmup_steps=0, cooldown_steps=0)):
        outputs, cache, _ = run_ramp(config)
        assert cache.statistics.calls_skipped == 0
        assert all(torch.equal(out, 2 * torch.full((1, 2, 3), 1.0 + 0.1 * t)) for t, out in enumerate(outputs))


def test_branches_keep_their_own_transformation_vectors():
    config = StepCacheConfig(tau=1.0, warmup_steps=1, cooldown_steps=0)
    cache = TransformationVectorCache(config, SIGMAS)
    keys = [("uncond", "u"), ("cond", "c")]

    def per_branch_transformer(x):
        uncond, cond = x.chunk(2)
        return lambda: torch.cat([3 * uncond, -cond])

    anchor = torch.cat([torch.full((1, 4), 1.0), torch.full((1, 4), 2.0)])
    cache(per_branch_transformer(anchor), anchor, SIGMAS[0], keys)
    later = torch.cat([torch.full((1, 4), 1.05), torch.full((1, 4), 2.1)])
    output = cache(per_branch_transformer(later), later, SIGMAS[1], keys)
    assert cache.statistics.calls_skipped == 1
    # uncond delta = 3*1 - 1 = 2; cond delta = -2 - 2 = -4
    assert torch.allclose(output, torch.cat([torch.full((1, 4), 1.05 + 2.0), torch.full((1, 4), 2.1 - 4.0)]))
    assert cache.statistics.skipped_by_branch == {"uncond": 1, "cond": 1}


def test_branches_in_one_call_are_computed_when_any_must_be():
    config = StepCacheConfig(tau=0.1, warmup_steps=1, cooldown_steps=0)
    cache = TransformationVectorCache(config, SIGMAS)
    keys = [("uncond", "u"), ("cond", "c")]
    anchor = torch.ones(2, 4)
    cache(double(anchor), anchor, SIGMAS[0], keys)
    # uncond barely drifts (0.01), cond drifts 0.5: the call is computed and both branches re-anchored
    later = torch.cat([torch.full((1, 4), 1.01), torch.full((1, 4), 1.5)])
    output = cache(double(later), later, SIGMAS[1], keys)
    assert torch.equal(output, 2 * later)
    assert cache.statistics.calls_skipped == 0
    assert all(state.accumulated == 0.0 for state in cache.branches.values())
    assert torch.equal(cache.branches[keys[0]].x_ref, later[:1])


def test_branch_without_a_transformation_vector_is_computed():
    config = StepCacheConfig(tau=10.0, warmup_steps=1, cooldown_steps=0)
    cache = TransformationVectorCache(config, SIGMAS)
    x = torch.ones(1, 4)
    cache(double(x), x, SIGMAS[0], [("uncond", "u")])
    # cond appears for the first time after warmup (e.g. a conditioning with a timestep range)
    both = torch.ones(2, 4)
    output = cache(double(both), both, SIGMAS[1], [("uncond", "u"), ("cond", "c")])
    assert torch.equal(output, 2 * both)
    assert cache.statistics.calls_skipped == 0


def test_step_index_counts_intermediate_model_calls_in_their_step():
    cache = TransformationVectorCache(StepCacheConfig(), [1.0, 0.8, 0.5, 0.2, 0.0])
    assert [cache.step_index(s) for s in (1.0, 0.9, 0.8, 0.65, 0.5, 0.2, 0.1, 0.0)] == [0, 0, 1, 1, 2, 3, 3, 3]


def test_cached_anchor_is_a_copy_of_the_input():
    cache = TransformationVectorCache(StepCacheConfig(warmup_steps=0, cooldown_steps=0, tau=1.0), SIGMAS)
    x = torch.ones(1, 4)
    cache(double(x), x, SIGMAS[0], ONE_BRANCH)
    x.mul_(100)  # a sampler reusing its buffer must not move the anchor
    assert torch.equal(cache.branches[ONE_BRANCH[0]].x_ref, torch.ones(1, 4))


def test_reset_forgets_branches_and_statistics():
    _, cache, _ = run_ramp(StepCacheConfig(tau=0.25, warmup_steps=2, cooldown_steps=2))
    assert cache.branches and cache.statistics.calls
    cache.reset()
    assert cache.branches == {} and cache.statistics.calls == 0
    outputs_after_reset = []
    for step in range(STEPS):
        x = torch.full((1, 2, 3), 1.0 + 0.1 * step)
        outputs_after_reset.append(cache(double(x), x, SIGMAS[step], ONE_BRANCH))
    fresh_outputs, _, _ = run_ramp(StepCacheConfig(tau=0.25, warmup_steps=2, cooldown_steps=2))
    assert all(torch.equal(a, b) for a, b in zip(outputs_after_reset, fresh_outputs))


def test_cached_rollout_differs_from_uncached_and_stays_finite():
    cached, _, _ = run_ramp(StepCacheConfig(tau=0.5, warmup_steps=2, cooldown_steps=2))
    full, _, _ = run_ramp(StepCacheConfig(mode="off"))
    assert any(not torch.equal(a, b) for a, b in zip(cached, full))
    assert all(torch.isfinite(out).all() for out in cached)


def test_output_shape_mismatch_turns_the_cache_off_for_the_run_with_its_reason():
    cache = TransformationVectorCache(StepCacheConfig(tau=1.0, warmup_steps=0, cooldown_steps=0), SIGMAS)
    x = torch.ones(1, 4)
    calls = []

    def compute():
        calls.append(1)
        return torch.ones(1, 5)

    outputs = [cache(compute, x, SIGMAS[step], ONE_BRANCH) for step in range(STEPS)]
    assert all(torch.equal(out, torch.ones(1, 5)) for out in outputs)
    assert len(calls) == STEPS  # nothing skipped after the mismatch
    assert cache.statistics.calls_computed == STEPS
    # the output's shape, then the latent's
    assert says(cache.statistics.inactive_reason, "(1, 5)", "(1, 4)"), cache.statistics.inactive_reason
    assert cache.statistics.summary().endswith(INACTIVE_PREFIX + cache.statistics.inactive_reason)


def test_first_reason_to_deactivate_is_the_one_kept():
    cache = TransformationVectorCache(StepCacheConfig(), SIGMAS)
    assert cache.active
    assert cache.deactivate("first")
    assert not cache.deactivate("second")
    assert cache.statistics.inactive_reason == "first" and not cache.active
    cache.reset()
    assert cache.active


def test_branches_keyed_by_device_identity_keep_separate_state():
    """Two callers (devices / threads) feeding the same branch label and uuid with different inputs."""
    config = StepCacheConfig(tau=0.25, warmup_steps=2, cooldown_steps=2)
    shared = TransformationVectorCache(config, SIGMAS)
    alone = [TransformationVectorCache(config, SIGMAS) for _ in range(2)]
    for step in range(STEPS):
        for device, growth in enumerate((0.1, -0.05)):
            x = torch.full((1, 2, 3), 1.0 + growth * step)
            key = [("cond", ("uuid", device))]
            assert torch.equal(shared(double(x), x, SIGMAS[step], key), alone[device](double(x), x, SIGMAS[step], key))
    assert shared.statistics.calls == sum(cache.statistics.calls for cache in alone) == 2 * STEPS
    assert shared.statistics.calls_skipped == sum(cache.statistics.calls_skipped for cache in alone) > 0


def test_statistics_stay_exact_under_concurrent_callers():
    import threading

    config = StepCacheConfig(tau=0.25, warmup_steps=2, cooldown_steps=2)
    cache = TransformationVectorCache(config, SIGMAS)
    threads_count, rounds = 8, 200
    barrier = threading.Barrier(threads_count)

    def caller(identity):
        barrier.wait()
        for round_index in range(rounds):
            step = round_index % STEPS
            x = torch.full((1, 2), 1.0 + 0.1 * step)
            cache(double(x), x, SIGMAS[step], [("cond", (identity, round_index // STEPS))])

    threads = [threading.Thread(target=caller, args=(identity,)) for identity in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.statistics.calls == threads_count * rounds
    assert sum(cache.statistics.computed_by_branch.values()) == cache.statistics.calls_computed
    assert len(cache.branches) == threads_count * rounds // STEPS


def test_statistics_summary_reports_steps_branches_and_speedup():
    _, cache, _ = run_ramp(StepCacheConfig(tau=0.25, warmup_steps=2, cooldown_steps=2))
    # 6 of 10 steps computed (cond 6), 6 of 10 calls, 1.67x
    assert numbers(cache.statistics.summary()) == [6, 10, 6, 6, 10, 1.67]
    assert cache.statistics.ideal_speedup == pytest.approx(10 / 6)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("tau", -0.1, "tau: got -0.1"),
        ("tau", math.nan, "tau: got nan"),
        ("warmup_steps", -1, "warmup_steps: got -1"),
        ("cooldown_steps", 2.5, "cooldown_steps: got 2.5"),
        ("static_interval", 0, "static_interval: got 0"),
        ("mode", "fast", "mode: got 'fast'; use one of adaptive, static, off"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(field, value, message):
    with pytest.raises(ValueError) as error:
        StepCacheConfig(**{field: value})
    assert message in str(error.value)


def test_run_needs_a_schedule():
    with pytest.raises(ValueError, match="sample_sigmas"):
        TransformationVectorCache(StepCacheConfig(), [1.0])


@pytest.mark.slow  # torch.compile traces for seconds
def test_under_torch_compile_the_decisions_run_eagerly_and_the_transformer_is_compiled():
    """As with ComfyUI's TorchCompileModel: the compiled model calls the cache, which calls the transformer."""
    torch._dynamo.reset()
    graphs = []

    def counting_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    config = StepCacheConfig(tau=0.25, warmup_steps=2, cooldown_steps=2)
    cache = TransformationVectorCache(config, SIGMAS)

    @torch.compile(backend=counting_backend)
    def model(x, sigma):
        return cache(lambda: 2 * x, x, sigma, ONE_BRANCH)

    outputs = [model(torch.full((1, 2, 3), 1.0 + 0.1 * step), SIGMAS[step]) for step in range(STEPS)]
    eager_outputs, eager_cache, _ = run_ramp(config)
    assert all(torch.equal(a, b) for a, b in zip(outputs, eager_outputs))
    assert cache.statistics.as_dict() == eager_cache.statistics.as_dict()
    # the transformer (2 * x) ran compiled; no graph holds the cache's bookkeeping, and the per-step values of
    # sigma and the accumulators did not cause a recompilation per step
    assert any("mul" in str(graph.graph) for graph in graphs)
    assert not any("norm" in str(graph.graph) or "cat" in str(graph.graph) for graph in graphs)
    assert len(graphs) < STEPS


def test_disagreeing_branches_are_counted_with_the_skips_they_forgo():
    config = StepCacheConfig(tau=0.1, warmup_steps=1, cooldown_steps=0)
    cache = TransformationVectorCache(config, SIGMAS)
    keys = [("uncond", "u"), ("cond", "c")]
    anchor = torch.ones(2, 4)
    cache(double(anchor), anchor, SIGMAS[0], keys)
    assert (cache.statistics.calls_disagreeing, cache.statistics.branch_skips_forgone) == (0, 0)
    # uncond drifts 0.01 (may skip), cond 0.5 (must compute): one call disagrees, one branch skip forgone
    later = torch.cat([torch.full((1, 4), 1.01), torch.full((1, 4), 1.5)])
    cache(double(later), later, SIGMAS[1], keys)
    # both drift about 1 from their new anchors: both must compute, which is no disagreement
    far = torch.cat([torch.full((1, 4), 2.0), torch.full((1, 4), 3.0)])
    cache(double(far), far, SIGMAS[2], keys)
    assert cache.statistics.calls_disagreeing == 1
    assert cache.statistics.branch_skips_forgone == 1
    assert cache.statistics.as_dict()["calls_disagreeing"] == 1


def test_branches_fed_the_same_latent_decide_alike():
    """Under CFG both branches see the same latent, so their drifts and skips coincide whatever F does."""
    config = StepCacheConfig(tau=0.25, warmup_steps=2, cooldown_steps=2)
    cache = TransformationVectorCache(config, SIGMAS)
    keys = [("cond", "c"), ("uncond", "u")]

    def guided_transformer(x):
        cond, uncond = x.chunk(2)
        return lambda: torch.cat([2 * cond, -5 * uncond + 1])

    for step in range(STEPS):
        latent = torch.full((1, 2, 3), 1.0 + 0.1 * step)
        x = torch.cat([latent, latent])
        cache(guided_transformer(x), x, SIGMAS[step], keys)
    assert cache.statistics.calls_skipped == 4  # the single-branch ramp's schedule (steps 2, 4, 5, 7)
    assert cache.statistics.calls_disagreeing == 0
    assert cache.branches[keys[0]].accumulated == cache.branches[keys[1]].accumulated


def test_a_branch_joining_mid_run_makes_the_call_disagree_when_the_other_may_skip():
    config = StepCacheConfig(tau=10.0, warmup_steps=1, cooldown_steps=0)
    cache = TransformationVectorCache(config, SIGMAS)
    x = torch.ones(1, 4)
    cache(double(x), x, SIGMAS[0], [("uncond", "u")])
    both = torch.ones(2, 4)
    cache(double(both), both, SIGMAS[1], [("uncond", "u"), ("cond", "c")])
    assert (cache.statistics.calls_disagreeing, cache.statistics.branch_skips_forgone) == (1, 1)
    # the uncond branch was computed, not skipped: its accumulator was reset by the re-anchoring
    assert cache.branches[("uncond", "u")].accumulated == 0.0


def test_a_run_within_a_longer_trajectory_keeps_the_trajectorys_warmup_and_cooldown():
    """A search paused at a prune step runs a stage as two runs; each counts warmup and cooldown in the whole."""
    config = StepCacheConfig(tau=0.5, warmup_steps=2, cooldown_steps=2)
    x = torch.ones(1, 2, 3)  # no drift: every call outside warmup and cooldown with a transformation vector skips

    def skipped_steps(sigmas, **position):
        cache = TransformationVectorCache(config, sigmas, **position)
        for sigma in sigmas[:-1]:
            cache(double(x), x, sigma, ONE_BRANCH)
        return cache.statistics.as_dict()["skipped_steps"]

    head, tail = SIGMAS[:6], SIGMAS[5:]
    assert skipped_steps(head) == [2]  # alone, its steps 3 and 4 would be a cooldown
    assert skipped_steps(head, steps_before=0, trajectory_steps=STEPS) == [2, 3, 4]
    assert skipped_steps(tail) == [2]  # alone, its steps 0 and 1 would be a warmup
    # steps 5-9 of 10: step 5 computes (no transformation vector yet), 6 and 7 skip, 8 and 9 are the cooldown
    assert skipped_steps(tail, steps_before=5, trajectory_steps=STEPS) == [1, 2]
