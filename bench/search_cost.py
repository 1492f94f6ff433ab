"""Full best-of-N against CachedSearch (N cached drafts + one commit) on tiny Wan 2.1, side by side.

    .venv/bin/python -m bench.search_cost [--widths 2 4 8] [--steps 50] [--tau 0.10]

For each width N, in one process and alternating the two arms: N stock
KSampler rollouts (full best-of-N) against CachedSearch Sampler on the cached
model plus one Recommit. Prints the measured cost ratio next to the report's Sec. 3.3
formula (N C_c + C_f) / (N C_f) evaluated with the measured C_c and C_f, and the
report's 63.3 % at N = 8. Then the peak resident-memory growth while sampling (second run in a fresh process) of one
full rollout against one cached draft. Random weights: skip counts are not
those of a trained model; the accounting is what carries over.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import subprocess
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, tiny_models  # noqa: E402

REPORTED_COST_AT_8 = 0.633  # report Sec. 4, N = 8 commit


def load(base: pathlib.Path, args):
    logging.disable(logging.INFO)
    nodes = comfy_runtime.load_in_process(base)
    mapping = nodes.NODE_CLASS_MAPPINGS

    def run(node_id, **inputs):
        return comfy_runtime.run_node(mapping[node_id], **inputs)

    model = run("UNETLoader", unet_name=tiny_models.WAN21_T2V_FILE, weight_dtype="default")[0]
    model = run("ModelSamplingSD3", model=model, shift=8.0)[0]
    cached = run("CachedSearchApplyCache", model=model, mode="adaptive", tau=args.tau, warmup_steps=5,
                 cooldown_steps=5, static_interval=2)[0]
    conditioning = [run("CachedSearchTestConditioning", text_seed=s, tokens=32, pooled=False)[0] for s in (1, 2)]
    latent = run("EmptyHunyuanLatentVideo", width=args.size, height=args.size, length=args.frames, batch_size=1)[0]
    settings = dict(positive=conditioning[0], negative=conditioning[1], latent_image=latent, steps=args.steps,
                    cfg=5.0, sampler_name=args.sampler, scheduler="simple", denoise=1.0)
    return run, model, cached, settings


def peak_rss_growth(work) -> tuple[int, int]:
    """(resident bytes before ``work``, peak resident bytes during it), sampled every 2 ms."""
    import threading

    import psutil

    process = psutil.Process()
    before = process.memory_info().rss
    peak = [before]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            done.wait(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        work()
    finally:
        done.set()
        watcher.join()
    return before, peak[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--tau", type=float, default=0.10)
    parser.add_argument("--sampler", default="uni_pc")
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--frames", type=int, default=33)
    parser.add_argument("--memory-probe", choices=["full", "cached"], help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.memory_probe:
        run, model, cached, settings = load(pathlib.Path(args.base), args)
        sample = (lambda: run("KSampler", model=model, seed=0, **settings)) if args.memory_probe == "full" else \
            (lambda: run("CachedSearchSampler", model=cached, seed=0, num_candidates=1, **settings))
        sample()  # loads the model and warms the allocator, so the second run shows sampling's own working set
        print(*peak_rss_growth(sample))
        return

    base = comfy_runtime.scratch_directory("cachedsearch_bench_")
    tiny_models.generate_tiny_models(base / "models")
    run, model, cached, settings = load(base, args)
    run("KSampler", model=model, seed=0, **settings)  # warm-up
    run("CachedSearchSampler", model=cached, seed=0, num_candidates=1, **settings)

    print(f"# tiny Wan 2.1, latent {list(settings['latent_image']['samples'].shape)}, {args.steps} steps, cfg 5, "
          f"{args.sampler}/simple, shift 8, tau {args.tau}")
    print("| N | full best-of-N s | drafts s | commit s | search s | measured cost | formula (N C_c + C_f)/(N C_f) "
          "| gamma | skipped calls |")
    print("|---|---|---|---|---|---|---|---|---|")
    for width in args.widths:
        start = time.perf_counter()
        for index in range(width):
            run("KSampler", model=model, seed=1000 + index, **settings)
        full_seconds = time.perf_counter() - start

        start = time.perf_counter()
        _, candidates, _ = run("CachedSearchSampler", model=cached, seed=1000, num_candidates=width, **settings)
        drafts_seconds = time.perf_counter() - start
        ranking = run("CachedSearchRankingFromScores", candidates=candidates,
                      scores=" ".join(str(i % 3) for i in range(width)))[0]
        start = time.perf_counter()
        run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
        commit_seconds = time.perf_counter() - start

        search_seconds = drafts_seconds + commit_seconds
        c_full, c_cached = full_seconds / width, drafts_seconds / width
        formula = (width * c_cached + c_full) / (width * c_full)
        skipped = sum(d.calls_skipped for d in candidates.drafts)
        calls = sum(d.calls_skipped + d.calls_computed for d in candidates.drafts)
        print(f"| {width} | {full_seconds:.1f} | {drafts_seconds:.1f} | {commit_seconds:.1f} | {search_seconds:.1f} "
              f"| {100 * search_seconds / full_seconds:.1f} % | {100 * formula:.1f} % | {c_cached / c_full:.2f} "
              f"| {100 * skipped / calls:.0f} % |")
    print(f"\nreport (Wan 2.1 1.3B, real weights, tau 0.10): N = 8 commit costs {100 * REPORTED_COST_AT_8:.1f} % "
          "of full best-of-8")

    peaks = {}
    for arm in ("full", "cached"):
        output = subprocess.run(
            [sys.executable, "-m", "bench.search_cost", "--memory-probe", arm, "--base", str(base),
             "--steps", str(args.steps), "--tau", str(args.tau), "--size", str(args.size),
             "--frames", str(args.frames), "--sampler", args.sampler],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True,
        ).stdout.split()
        before, after = (int(value) for value in output[-2:])
        peaks[arm] = (before, after)
    print("\n| rollout (second run in a fresh process) | RSS before MiB | peak RSS during MiB | growth MiB |")
    print("|---|---|---|---|")
    for arm, (before, after) in peaks.items():
        print(f"| {arm} | {before / 2**20:.0f} | {after / 2**20:.0f} | {(after - before) / 2**20:.1f} |")
    latent_mib = settings["latent_image"]["samples"].numel() * 4 / 2**20
    print(f"latent {latent_mib:.2f} MiB; the cache holds x_ref and delta per branch: "
          f"{4 * latent_mib:.2f} MiB with cond + uncond")


if __name__ == "__main__":
    main()
