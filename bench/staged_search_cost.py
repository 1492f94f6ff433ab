"""Full two-expert best-of-N against staged CachedSearch on tiny Wan 2.2 A14B stand-ins, side by side.

    .venv/bin/python -m bench.staged_search_cost [--width 8] [--steps 20] [--split 10] [--rounds 2]

In one process, alternating the two arms each round: N official two-KSamplerAdvanced graphs (high-noise expert to
the split step, low-noise expert to the end; full best-of-N) against CachedSearch Sampler (High/Low Experts) on the
cached experts plus one Recommit. Prints the measured cost ratio next to the report's Sec. 3.3 formula
(N C_c + C_f) / (N C_f) with the measured C_c (mean draft) and C_f (mean full rollout), and each expert's computed
share of transformer calls. The experts are tiny random-weight Wan 2.1-architecture checkpoints: skip counts are
not those of the real A14B experts; the accounting is what carries over.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, tiny_models  # noqa: E402

# The example workflow's per-expert caches: the higher tau on the high-noise expert.
CACHES = {"high": dict(tau=0.15, warmup_steps=2, cooldown_steps=1), "low": dict(tau=0.10, warmup_steps=1,
                                                                                 cooldown_steps=2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--split", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--frames", type=int, default=17)
    args = parser.parse_args()

    base = comfy_runtime.scratch_directory("cachedsearch_bench_")
    tiny_models.generate_tiny_models(base / "models")
    logging.disable(logging.INFO)
    mapping = comfy_runtime.load_in_process(base).NODE_CLASS_MAPPINGS

    def run(node_id, **inputs):
        return comfy_runtime.run_node(mapping[node_id], **inputs)

    experts, cached = {}, {}
    for expert, file_name in zip(("high", "low"), tiny_models.WAN22_A14B_FILES["t2v"]):
        model = run("UNETLoader", unet_name=file_name, weight_dtype="default")[0]
        experts[expert] = run("ModelSamplingSD3", model=model, shift=5.0)[0]
        cached[expert] = run("CachedSearchApplyCache", model=experts[expert], mode="adaptive", static_interval=2,
                             **CACHES[expert])[0]
    positive, negative = (run("CachedSearchTestConditioning", text_seed=s, tokens=32, pooled=False)[0] for s in (1, 2))
    latent = run("EmptyHunyuanLatentVideo", width=args.size, height=args.size, length=args.frames, batch_size=1)[0]
    shared = dict(positive=positive, negative=negative, steps=args.steps, cfg=3.5, sampler_name="euler",
                  scheduler="simple")

    def official(seed):
        leftover = run("KSamplerAdvanced", model=experts["high"], add_noise="enable", noise_seed=seed,
                       latent_image=latent, start_at_step=0, end_at_step=args.split,
                       return_with_leftover_noise="enable", **shared)[0]
        return run("KSamplerAdvanced", model=experts["low"], add_noise="disable", noise_seed=0, latent_image=leftover,
                   start_at_step=args.split, end_at_step=10000, return_with_leftover_noise="disable", **shared)[0]

    def staged_search(seed, width):
        return run("CachedSearchSamplerExperts", model_high=cached["high"], model_low=cached["low"],
                   latent_image=latent, seed=seed, num_candidates=width, split_step=args.split, **shared)

    official(0)  # warm-up: loads both experts
    staged_search(0, 1)

    full_seconds, drafts_seconds, commit_seconds, candidates = 0.0, 0.0, 0.0, None
    for round_index in range(args.rounds):
        seed = 1000 + round_index * args.width
        start = time.perf_counter()
        for index in range(args.width):
            official(seed + index)
        full_seconds += time.perf_counter() - start

        start = time.perf_counter()
        _, candidates, _ = staged_search(seed, args.width)
        drafts_seconds += time.perf_counter() - start
        ranking = run("CachedSearchRankingFromScores", candidates=candidates,
                      scores=" ".join(str(i % 3) for i in range(args.width)))[0]
        start = time.perf_counter()
        run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
        commit_seconds += time.perf_counter() - start

    rollouts = args.rounds * args.width
    c_full, c_cached = full_seconds / rollouts, drafts_seconds / rollouts
    search_seconds = drafts_seconds + commit_seconds
    formula = (args.width * c_cached + c_full) / (args.width * c_full)
    print(f"# tiny Wan 2.2 A14B T2V stand-ins, latent {list(latent['samples'].shape)}, {args.steps} steps split "
          f"{args.split}, cfg 3.5, euler/simple, shift 5, N = {args.width}, {args.rounds} round(s) summed; caches "
          f"high {CACHES['high']}, low {CACHES['low']}")
    print("| full best-of-N s | drafts s | commit s | search s | measured cost | formula (N C_c + C_f)/(N C_f) | "
          "gamma C_c/C_f |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {full_seconds:.1f} | {drafts_seconds:.1f} | {commit_seconds:.1f} | {search_seconds:.1f} "
          f"| {100 * search_seconds / full_seconds:.1f} % | {100 * formula:.1f} % | {c_cached / c_full:.2f} |")
    print("\n| expert (last round's drafts) | computed calls | all calls | computed share |")
    print("|---|---|---|---|")
    for stage_index, expert in enumerate(("high noise", "low noise")):
        computed = sum(draft.stage_calls[stage_index].computed for draft in candidates.drafts)
        calls = computed + sum(draft.stage_calls[stage_index].skipped for draft in candidates.drafts)
        print(f"| {expert} | {computed} | {calls} | {100 * computed / calls:.0f} % |")


if __name__ == "__main__":
    main()
