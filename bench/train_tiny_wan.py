"""Train a small Wan 2.1-architecture model on the ball-and-spot world (scripts/ball_spot_world.py), on the CPU.

Flow matching.

    .venv/bin/python -m bench.train_tiny_wan [--steps 8000] [--batch 16] [--threads 1]
        [--out scripts/models/tiny_wan_ball_spot.safetensors]

The model is ComfyUI's own WanModel class (dim 128, so it loads through UNETLoader like the real one) trained
with ComfyUI's flow parametrisation: x_sigma = (1 - sigma) x0 + sigma noise, timestep = 1000 sigma, target
velocity noise - x0; 10 % of samples drop the prompt so classifier-free guidance works. The saved weights are an
exponential moving average of the trained ones (decay 0.999), the usual way to get clean samples from a diffusion
model. The learning rate (3e-3 after 200 warm-up steps, cosine down to a tenth) matters: at 1e-3 the model stayed
at the prompt's average clip for thousands of steps instead of learning where the ball is; at 6e-3 it diverged.
Deterministic for a seed and thread count; one thread so it can share a small machine.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts.ball_spot_world import TRAINED_MODEL as DEFAULT_OUT, TRAINING_SHIFT  # noqa: E402

WARMUP_STEPS, FINAL_LR_FRACTION, EMA_DECAY = 200, 0.1, 0.999


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    parser.add_argument("--save-every", type=int, default=500, help="also save every this many steps")
    args = parser.parse_args()

    from scripts.comfy_runtime import import_comfy

    comfy_args = import_comfy()
    comfy_args.use_pytorch_cross_attention = True  # the CPU default (sub-quadratic) cannot backpropagate
    import copy

    import comfy.ldm.wan.model
    import comfy.ops
    import torch
    from scripts import ball_spot_world
    from scripts.tiny_models import TEXT_WIDTH, _fill_deterministically

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = comfy.ldm.wan.model.WanModel(
        model_type="t2v", dim=128, ffn_dim=512, num_heads=1, num_layers=args.layers, in_dim=16, out_dim=16,
        text_dim=TEXT_WIDTH, freq_dim=256, operations=comfy.ops.disable_weight_init,
    )
    model.load_state_dict(_fill_deterministically(model, args.seed))
    # Zero the output head so training starts from "predict nothing" (standard for DiT training).
    torch.nn.init.zeros_(model.head.head.weight)
    torch.nn.init.zeros_(model.head.head.bias)
    average = copy.deepcopy(model).requires_grad_(False)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(args.seed)
    empty = ball_spot_world.conditioning(None)
    contexts = {prompt: ball_spot_world.conditioning(prompt) for prompt in ball_spot_world.PROMPTS}
    start = time.perf_counter()
    for step in range(args.steps):
        clips, prompts = ball_spot_world.random_clips(args.batch, generator)
        context = torch.cat([contexts[p] for p in prompts])
        dropped = torch.rand(args.batch, generator=generator) < 0.1
        context[dropped] = empty
        uniform = torch.rand(args.batch, generator=generator)
        sigma = TRAINING_SHIFT * uniform / (1 + (TRAINING_SHIFT - 1) * uniform)
        noise = torch.randn(clips.shape, generator=generator)
        noisy = (1 - sigma.view(-1, 1, 1, 1, 1)) * clips + sigma.view(-1, 1, 1, 1, 1) * noise
        velocity = model(noisy, sigma * 1000, context)
        loss = torch.nn.functional.mse_loss(velocity, noise - clips)
        warmup = min(1.0, (step + 1) / WARMUP_STEPS)
        cosine = math.cos(math.pi * step / args.steps)  # lr falls from 1 to FINAL_LR_FRACTION of --lr
        for group in optimiser.param_groups:
            group["lr"] = args.lr * warmup * ((1 + FINAL_LR_FRACTION) / 2 + (1 - FINAL_LR_FRACTION) / 2 * cosine)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        decay = min(EMA_DECAY, (1 + step) / (10 + step))  # a short average while the weights move fast
        with torch.no_grad():
            for averaged, trained in zip(average.parameters(), model.parameters()):
                averaged.mul_(decay).add_(trained, alpha=1 - decay)
        if step % 250 == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  {time.perf_counter() - start:6.1f} s", flush=True)
        if (step + 1) % args.save_every == 0 or step == args.steps - 1:
            save(average, args.out)
    print(f"saved {args.out}")


def save(model, path: pathlib.Path) -> None:
    """Half-precision weights (the file is committed), written whole so a stopped run leaves a loadable one."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().half().contiguous() for name, tensor in model.state_dict().items()}
    save_file(state, str(path.with_suffix(".tmp")))
    path.with_suffix(".tmp").replace(path)


if __name__ == "__main__":
    main()
