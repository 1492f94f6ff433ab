"""Full vs cached sampling on tiny Wan 2.1 through ComfyUI's real KSampler, side by side.

    .venv/bin/python -m bench.cache_speed [--steps 50] [--repeats 5] [--tau 0.10]

Measures in one process, interleaving the arms so machine noise hits them
alike: wall time of a full rollout, of CachedSearch's cached rollout, and of
ComfyUI's native EasyCache at a threshold that skips as many transformer calls;
the computed-call fraction; wall speed-up against the ideal 1 / fraction; and
the cost of the per-call cache check relative to one transformer forward.
Random weights make trajectories unrealistic (drift does not shrink as in a
trained model), so skip counts here say nothing about real models: only the
mechanics and overheads carry over.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import statistics
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, tiny_models  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tau", type=float, default=0.10)
    parser.add_argument("--sampler", default="uni_pc")
    parser.add_argument("--size", type=int, default=256, help="pixel width/height; 256 -> latent 32x32")
    parser.add_argument("--frames", type=int, default=33, help="pixel frames; 33 -> 9 latent frames")
    args = parser.parse_args()
    logging.disable(logging.INFO)

    import torch

    base = comfy_runtime.scratch_directory("cachedsearch_bench_")
    tiny_models.generate_tiny_models(base / "models")
    nodes = comfy_runtime.load_in_process(base)
    extension = comfy_runtime.loaded_extension(base)
    mapping = nodes.NODE_CLASS_MAPPINGS

    def one(node_id, **inputs):
        (result,) = comfy_runtime.run_node(mapping[node_id], **inputs)
        return result

    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = one("UNETLoader", unet_name=tiny_models.WAN21_T2V_FILE, weight_dtype="default")
    model = one("ModelSamplingSD3", model=model, shift=8.0)
    positive = one("CachedSearchTestConditioning", text_seed=1, tokens=32, pooled=False)
    negative = one("CachedSearchTestConditioning", text_seed=2, tokens=32, pooled=False)
    latent = one("EmptyHunyuanLatentVideo", width=args.size, height=args.size, length=args.frames, batch_size=1)

    def sample(sampling_model):
        start = time.perf_counter()
        one("KSampler", model=sampling_model, seed=0, steps=args.steps, cfg=5.0, sampler_name=args.sampler,
            scheduler="simple", positive=positive, negative=negative, latent_image=latent, denoise=1.0)
        return time.perf_counter() - start

    def with_statistics(sampling_model):
        sink = []
        observed = sampling_model.clone()
        observed.model_options["transformer_options"][extension.nodes.cache_patch.STATISTICS_CALLBACK_OPTION] = sink.append
        return observed, sink

    cached, cached_runs = with_statistics(
        one("CachedSearchApplyCache", model=model, mode="adaptive", tau=args.tau, warmup_steps=5, cooldown_steps=5,
            static_interval=2)
    )
    sample(cached)  # warm-up run also yields the skip count to match
    target_skips = cached_runs[-1].calls_skipped
    easycache, threshold, easycache_skips = match_easycache(
        one, model, lambda patched: count_easycache_skips(patched, sample), target_skips)

    arms = {"full": model, "cachedsearch": cached, "easycache": easycache}
    times = {name: [] for name in arms}
    for sampling_model in [*arms.values()] * 2:  # allocator and thread-pool warm-up
        sample(sampling_model)
    for _ in range(args.repeats):
        for name, sampling_model in arms.items():
            times[name].append(sample(sampling_model))
    median = {name: statistics.median(values) for name, values in times.items()}

    statistics_run = cached_runs[-1]
    fraction = statistics_run.computed_fraction
    forward_seconds = median["full"] / args.steps
    check_seconds = time_cache_check(extension, latent["samples"])

    print(f"# tiny Wan 2.1 (dim 128, 2 layers), latent {list(latent['samples'].shape)}, {args.steps} steps, "
          f"cfg 5, {args.sampler}/simple, shift 8, {args.repeats} interleaved repeats, torch threads "
          f"{torch.get_num_threads()}")
    print("| arm | setting | computed calls | median s | wall speed-up | ideal speed-up | wall / ideal |")
    print("|---|---|---|---|---|---|---|")
    print(f"| full | - | {args.steps}/{args.steps} | {median['full']:.2f} | 1.00x | 1.00x | - |")
    for name, setting, computed in (
        ("cachedsearch", f"tau {args.tau}", statistics_run.calls_computed),
        ("easycache", f"reuse_threshold {threshold:.3f}", args.steps - easycache_skips),
    ):
        ideal = args.steps / computed
        wall = median["full"] / median[name]
        print(f"| {name} | {setting} | {computed}/{args.steps} | {median[name]:.2f} | {wall:.2f}x | {ideal:.2f}x "
              f"| {wall / ideal:.2f} |")
    print(f"\ncomputed fraction {fraction:.2f}; cache check {check_seconds * 1e3:.2f} ms per call = "
          f"{100 * check_seconds / forward_seconds:.2f} % of one forward ({forward_seconds * 1e3:.1f} ms)")


# EasyCache's steps outside which it never skips, as the cache's warmup and cooldown of 5 steps in 50.
EASYCACHE_WINDOW = {"start_percent": 0.1, "end_percent": 0.9}


def match_easycache(one, model, count_skips, target_skips, rollouts: int = 12):
    """EasyCache at the reuse_threshold whose skip count is closest to ``target_skips``: (patched model,
    threshold, skips), by bisection over at most ``rollouts`` rollouts (``count_skips(patched)`` runs one and returns
    the calls it skipped)."""
    low, high = 0.0, 3.0
    best = None
    for _ in range(rollouts):
        threshold = (low + high) / 2
        patched = one("EasyCache", model=model, reuse_threshold=threshold, verbose=False, **EASYCACHE_WINDOW)
        skipped = count_skips(patched)
        if best is None or abs(skipped - target_skips) < abs(best[2] - target_skips):
            best = (patched, threshold, skipped)
        if skipped == target_skips:
            break
        if skipped < target_skips:
            low = threshold
        else:
            high = threshold
    return best


def count_easycache_skips(patched, sample) -> int:
    """EasyCache logs its skip count; read it from that log line."""
    from bench.audit import EasyCacheSkipLog

    logging.disable(logging.NOTSET)
    try:
        with EasyCacheSkipLog() as skip_log:
            sample(patched)
    finally:
        logging.disable(logging.INFO)
    return skip_log.skipped


def cache_check_call(extension, latent_shape, device="cpu"):
    """The cache's own work on a skipping call (CFG: two branches, latent-sized, on ``device``), as ComfyUI's
    wrapper makes it (the sigma a one-element tensor on the device): returns ``call(step)`` for steps 1 to 1000,
    after the anchoring call of step 0."""
    import torch

    core = extension.cachedsearch_core
    schedule = [1.0 - i / 1000 for i in range(1001)]
    cache = core.TransformationVectorCache(core.StepCacheConfig(tau=1e9, warmup_steps=0, cooldown_steps=0), schedule)
    x = torch.randn((2, *latent_shape[1:]), device=device)
    sigmas = torch.tensor(schedule, device=device)
    keys = [("uncond", 0), ("cond", 1)]

    def call(step: int):
        return cache(lambda: x * 0.5, x, sigmas[step : step + 1], keys)

    call(0)
    return call


def time_cache_check(extension, latent, repeats: int = 200, device="cpu") -> float:
    """Seconds per call of the cache's own work on a skipping call (CFG: two branches), on ``device``."""
    import torch

    call = cache_check_call(extension, latent.shape, device)
    synchronize = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    synchronize()
    start = time.perf_counter()
    for step in range(1, repeats + 1):
        call(step)
    synchronize()
    return (time.perf_counter() - start) / repeats


if __name__ == "__main__":
    main()
