"""Wan 2.1 1.3B (dim 1536, 30 layers) or Wan 2.2 TI2V 5B (dim 3072, 30 layers) at its real width and depth, with
random weights, through ComfyUI's real loader, KSampler and the CachedSearch nodes on the CPU, at a small resolution.

    .venv/bin/python -m bench.real_dimensions [--model wan21_1.3b|wan22_5b] [--size 64] [--frames 5] [--steps 8]

Checks what must hold at real size: ComfyUI detects the state dict as the model it is, the cache skips calls,
and a 2-candidate search + Recommit of candidate 2 equals the stock KSampler for that seed bit for bit. Measures the
cache's extra memory per guidance branch (its reference input and transformation vector, in latent space: the
model's width does not enter) and the per-call cost of the cache check against one real-width forward, both on
this latent and extrapolated to 832x480x81. No real weights are reachable here, so skip counts say nothing about
real models; the forward time is CPU time at a toy token count.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.cache_speed import time_cache_check  # noqa: E402
from scripts import comfy_runtime, tiny_models  # noqa: E402

# The released configs (heads follow from dim); the 5B is kept in bf16, which it ships in, to fit 24 GB of RAM.
MODELS = {
    "wan21_1.3b": {"name": "Wan 2.1 T2V 1.3B", "model_type": "t2v", "dim": 1536, "ffn_dim": 8960, "num_layers": 30,
                   "dtype": "float16", "compute": None, "latent": "EmptyHunyuanLatentVideo",
                   # 832x480x81 pixels through the Wan 2.1 VAE (8x spatial, 4x temporal)
                   "real_latent": (1, 16, 21, 60, 104), "real_size": "832x480x81"},
    "wan22_5b": {"name": "Wan 2.2 TI2V 5B", "model_type": "ti2v", "dim": 3072, "ffn_dim": 14336, "num_layers": 30,
                 "dtype": "bfloat16", "compute": "bfloat16", "latent": "Wan22ImageToVideoLatent",
                 # 1280x704x121 pixels through the Wan 2.2 VAE (16x spatial, 4x temporal)
                 "real_latent": (1, 48, 31, 44, 80), "real_size": "1280x704x121"},
}


def load_random_model(spec: dict, weight_dtype: str | None = None, compute_dtype: str | None = None):
    """The model of ``spec`` (one of MODELS) with random weights through ComfyUI's loader (the function behind Load
    Diffusion Model), in its released weight dtype or ``weight_dtype``, computing in ``compute_dtype`` (None:
    ComfyUI's choice). Returns (ModelPatcher, parameter count)."""
    import comfy.sd
    import torch

    weights = weight_dtype or spec["dtype"]
    compute = compute_dtype or spec["compute"]
    state = tiny_models.wan21_state_dict(spec["model_type"], num_layers=spec["num_layers"], dim=spec["dim"],
                                         ffn_dim=spec["ffn_dim"], dtype=getattr(torch, weights))
    parameters = sum(tensor.numel() for tensor in state.values())
    options = {"dtype": getattr(torch, compute)} if compute else {}
    return comfy.sd.load_diffusion_model_state_dict(state, model_options=options), parameters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="wan21_1.3b")
    parser.add_argument("--size", type=int, default=64, help="pixel width/height")
    parser.add_argument("--frames", type=int, default=5, help="pixel frames; 5 -> 2 latent frames")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--tau", type=float, default=0.10)
    args = parser.parse_args()
    logging.disable(logging.INFO)

    import torch

    base = comfy_runtime.scratch_directory("cachedsearch_bench_")
    tiny_models.generate_tiny_models(base / "models")  # the test conditioning nodes live beside them
    nodes = comfy_runtime.load_in_process(base)
    extension = comfy_runtime.loaded_extension(base)
    mapping = nodes.NODE_CLASS_MAPPINGS

    def run(node_id, **inputs):
        return comfy_runtime.run_node(mapping[node_id], **inputs)

    def one(node_id, **inputs):
        (result,) = run(node_id, **inputs)
        return result

    spec = MODELS[args.model]
    loaded, parameters = load_random_model(spec)
    detected = type(loaded.model.model_config).__name__
    model = one("ModelSamplingSD3", model=loaded, shift=8.0)
    positive = one("CachedSearchTestConditioning", text_seed=1, tokens=16, pooled=False)
    negative = one("CachedSearchTestConditioning", text_seed=2, tokens=16, pooled=False)
    if spec["latent"] == "Wan22ImageToVideoLatent":
        vae = one("VAELoader", vae_name=tiny_models.WAN22_VAE_FILE)
        latent = one("Wan22ImageToVideoLatent", vae=vae, width=args.size, height=args.size, length=args.frames,
                     batch_size=1)
    else:
        latent = one("EmptyHunyuanLatentVideo", width=args.size, height=args.size, length=args.frames, batch_size=1)
    sampling = dict(steps=args.steps, cfg=5.0, sampler_name="uni_pc", scheduler="simple", positive=positive,
                    negative=negative, latent_image=latent, denoise=1.0)

    start = time.perf_counter()
    stock = one("KSampler", model=model, seed=1, **sampling)["samples"]
    forward_seconds = (time.perf_counter() - start) / (2 * args.steps)  # cfg: two branches per step

    cached = one("CachedSearchApplyCache", model=model, mode="adaptive", tau=args.tau, warmup_steps=1,
                 cooldown_steps=1, static_interval=2)
    _, candidates, _ = run("CachedSearchSampler", model=cached, seed=0, num_candidates=2, **sampling)
    delivered = run("CachedSearchRecommit", candidates=candidates, mode="commit", model=model, pick=2)[0]["samples"]

    skipped = sum(draft.calls_skipped for draft in candidates.drafts)
    computed = sum(draft.calls_computed for draft in candidates.drafts)
    check_seconds = time_cache_check(extension, latent["samples"])
    branch_bytes = 2 * latent["samples"].numel() * 4  # reference input + transformation vector, float32
    real_branch_bytes = 2 * torch.Size(spec["real_latent"]).numel() * 4

    print(f"# {spec['name']} real dimensions (dim {spec['dim']}, {spec['num_layers']} layers, "
          f"{parameters / 1e9:.2f} B parameters, random {spec['dtype']} weights), latent "
          f"{list(latent['samples'].shape)}, "
          f"{args.steps} steps, cfg 5, uni_pc/simple, shift 8, CPU, torch threads {torch.get_num_threads()}")
    print("| check | result |")
    print("|---|---|")
    print(f"| detected as | {detected} |")
    print(f"| cache at tau {args.tau} (2 drafts) | {skipped} of {skipped + computed} calls skipped |")
    print(f"| search + Recommit of candidate 2 == stock KSampler, seed 1 | {torch.equal(delivered, stock)} |")
    print(f"| one real-width forward (one branch, this latent) | {forward_seconds * 1e3:.0f} ms |")
    print(f"| cache check per call (two branches) | {check_seconds * 1e3:.3f} ms = "
          f"{100 * check_seconds / (2 * forward_seconds):.4f} % of the two forwards it guards |")
    print(f"| cache memory per guidance branch, this latent | {branch_bytes / 2**10:.1f} KiB |")
    print(f"| cache memory per guidance branch, {spec['real_size']} | {real_branch_bytes / 2**20:.1f} MiB |")


if __name__ == "__main__":
    main()
