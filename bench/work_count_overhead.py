"""What the full-compute work count costs: a KSampler rollout with every block's linear layers counted against the
same rollout uncounted, side by side on the tiny models, and the cost of one count against one layer call.

    .venv/bin/python -m bench.work_count_overhead [--steps 30] [--repeats 11]

The arms alternate rollout by rollout (the order flips every repeat), so machine noise hits them alike; the figure
is the median of the paired ratios. On a shared machine that ratio's noise (a few per cent) is larger than the
count, so the table also gives the counts' share computed from what one count costs (timed alone, interleaved with
the bare layer call): counted layers x calls x that cost, against the rollout. The tiny models' forwards are the
cheapest there are, so their share bounds a real model's from above: a count is a Python increment per layer
call, whatever the layer's width, and a real model's layers are thousands of times wider.
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

FAMILIES = {  # label: (checkpoint, latent node and its inputs, cfg, test conditioning's options)
    "Wan 2.1 T2V": (tiny_models.WAN21_T2V_FILE, ("EmptyHunyuanLatentVideo", dict(width=64, height=64, length=9)), 5.0,
                    {}),
    "HunyuanVideo T2V": (tiny_models.HUNYUAN_T2V_FILE,
                         ("EmptyHunyuanLatentVideo", dict(width=64, height=64, length=9)), 1.0, dict(pooled=True)),
    "LTX-Video": (tiny_models.LTXV_FILE, ("EmptyLTXVLatentVideo", dict(width=64, height=64, length=9)), 3.0,
                  dict(attention_mask=True)),
}


def per_count_microseconds(torch, calls: int = 20000) -> tuple[float, float]:
    """(a tiny linear layer's call, the count added to it) in microseconds, from interleaved timing."""
    from cachedsearch_core.work_count import WorkCount

    holder = torch.nn.Module()
    holder.blocks = torch.nn.ModuleList([torch.nn.Linear(8, 8)])
    x, layer, plain, counted = torch.ones(1, 8), holder.blocks[0], [], []
    count = WorkCount(holder)
    with torch.no_grad():
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(calls):
                layer(x)
            plain.append(time.perf_counter() - start)
            with count.counting():
                start = time.perf_counter()
                for _ in range(calls):
                    layer(x)
                counted.append(time.perf_counter() - start)
    base = statistics.median(plain) / calls * 1e6
    return base, statistics.median(counted) / calls * 1e6 - base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    logging.disable(logging.INFO)

    import torch

    base = comfy_runtime.scratch_directory("cachedsearch_bench_")
    tiny_models.generate_tiny_models(base / "models")
    nodes = comfy_runtime.load_in_process(base)
    mapping = nodes.NODE_CLASS_MAPPINGS
    import comfy.utils

    comfy.utils.PROGRESS_BAR_ENABLED = False
    from cachedsearch_core.work_count import WorkCount

    def one(node_id, **inputs):
        (result,) = comfy_runtime.run_node(mapping[node_id], **inputs)
        return result

    print(f"work count overhead: KSampler euler, {args.steps} steps, {args.repeats} paired repeats, torch "
          f"{torch.__version__}, {torch.get_num_threads()} thread(s)")
    count_us = per_count_microseconds(torch)[1]
    print("| model | counted layers | calls | uncounted rollout (s) | counted rollout (s) | median paired ratio | "
          "the counts' share of a rollout (layers x calls x one count) |")
    print("|---|---|---|---|---|---|---|")
    for label, (checkpoint, (latent_node, latent_inputs), cfg, conditioning) in FAMILIES.items():
        model = one("UNETLoader", unet_name=checkpoint, weight_dtype="default")
        conditioning = dict(tokens=6, pooled=False) | conditioning
        positive = one("CachedSearchTestConditioning", text_seed=1, **conditioning)
        negative = one("CachedSearchTestConditioning", text_seed=2, **conditioning)
        if label == "LTX-Video":
            positive, negative = comfy_runtime.run_node(mapping["LTXVConditioning"], positive=positive,
                                                        negative=negative, frame_rate=25.0)
        latent = one(latent_node, batch_size=1, **latent_inputs)
        count = WorkCount(model.model.diffusion_model)

        def rollout():
            start = time.perf_counter()
            one("KSampler", model=model, seed=1, steps=args.steps, cfg=cfg, sampler_name="euler",
                scheduler="simple", positive=positive, negative=negative, latent_image=latent, denoise=1.0)
            return time.perf_counter() - start

        def counted_rollout():
            with count.counting():
                seconds = rollout()
            count.take(asked=0)
            return seconds

        rollout()  # warm-up
        plain, counted = [], []
        for repeat in range(args.repeats):
            arms = (rollout, counted_rollout) if repeat % 2 == 0 else (counted_rollout, rollout)
            seconds = {arm: arm() for arm in arms}
            plain.append(seconds[rollout])
            counted.append(seconds[counted_rollout])
        ratio = statistics.median(c / p for c, p in zip(counted, plain))
        share = len(count.layers) * args.steps * count_us * 1e-6 / statistics.median(plain)
        print(f"| {label} | {len(count.layers)} | {args.steps} | {statistics.median(plain):.3f} | "
              f"{statistics.median(counted):.3f} | {ratio:.4f} | {100 * share:.3f} % |")
    layer_us, count_us = per_count_microseconds(torch)
    print(f"one count: {count_us:.2f} us on top of a tiny linear layer's {layer_us:.2f} us call; Wan 2.1 1.3B counts "
          f"300 layers a call (30 blocks of 10): {300 * count_us / 1000:.3f} ms a call")


if __name__ == "__main__":
    main()
