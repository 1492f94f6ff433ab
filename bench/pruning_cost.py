"""Full best-of-N, cached best-of-N and cached + pruned best-of-N, side by side in one process.

    .venv/bin/python -m bench.pruning_cost --world tiny-wan [--steps 50] [--width 8] [--keep 4] [--prune 0.4]
    .venv/bin/python -m bench.pruning_cost --world shapes [--steps 50]

Each round runs the three arms on the same seeds, one after the other, through the real ComfyUI KSampler:

- full best-of-N: N stock rollouts (on a clone whose cache is off, so every transformer call is counted),
  then the final scoring of the N videos; the best one is delivered as it is.
- cached best-of-N: N cached drafts (``run_search``), the final scoring of the N drafts, one recommit.
- cached + pruned: every draft runs cached to the prune step, is scored on a preview there, the ``keep`` best
  continue (``run_pruned_search``), the survivors are scored and the winner is recommitted.

Exploration is what produces the candidates the final ranking sees (the drafts, plus the previews of the pruned
search); end to end adds the final scoring and the recommit. Transformer calls are counted exactly by the cache's
statistics (a recommit runs as many calls as a full rollout). "CachedSearch: Training-Free Cached Exploration for
Test-Time Search in Video Diffusion", Sec. "Composition with pruned search", reports 3.11x exploration speed-up
over full best-of-8 for caching (1.96x) with pruning at 20 of 50 steps keeping 4 of 8 (1.59x) on Wan 2.1 1.3B.

Worlds: ``tiny-wan`` is the random-weight tiny Wan 2.1 with the tiny Wan VAE and a tiny random-weight ImageReward
(scores are arbitrary, so survivors are too; the costs are the mechanics'); the preview decodes ``preview_frames``
latent frames one at a time. ``shapes`` is the small model trained on the ball-and-spot world
(scripts/ball_spot_world.py),
whose verifier scores the latent itself, so previews and final scoring cost no decode.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import pathlib
import sys
import time

import torch

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from cachedsearch_core.judge import spread_frame_indices  # noqa: E402
from cachedsearch_core.pruning import PruningPlan, preview_frame_indices  # noqa: E402
from scripts import comfy_runtime  # noqa: E402

REPORTED = {"cache": 1.96, "pruning": 1.59, "exploration": 3.11}  # report, Wan 2.1 1.3B, best-of-8
ARMS = ("full", "cached", "pruned")


@dataclasses.dataclass
class World:
    """One world's sampling inputs and its verifier, as the arms need them."""

    description: str
    one: object  # run a ComfyUI node, return its single output
    extension: object
    model: object  # ModelSamplingSD3 applied, no cache
    positive: list
    negative: list
    latent: dict
    cfg: float
    sampler_name: str
    score_latents: object  # (LATENT samples [N, ...]) -> list of scores, one per candidate
    score_previews: object  # (list of x0 estimates in the model's space) -> list of scores


@dataclasses.dataclass
class ArmCost:
    explore_seconds: float = 0.0
    preview_seconds: float = 0.0
    scoring_seconds: float = 0.0
    commit_seconds: float = 0.0
    calls: int = 0  # every transformer call the candidates made (computed + skipped)
    computed: int = 0  # transformer calls computed during exploration
    commit_calls: int = 0
    survivors_held_best: int = 0  # rounds whose full-arm best seed survived pruning (pruned arm only)

    @property
    def end_to_end_seconds(self) -> float:
        return self.explore_seconds + self.scoring_seconds + self.commit_seconds

    def add(self, other: ArmCost) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def cache_model(world: World, mode: str, tau: float, window: int):
    return world.one("CachedSearchApplyCache", model=world.model, mode=mode, tau=tau, warmup_steps=window,
                     cooldown_steps=window, static_interval=2)


def recipe(world: World, model, steps: int):
    search = world.extension.nodes
    stage = search.stages.KSamplerStage(model, world.positive, world.negative, steps, world.cfg, world.sampler_name,
                                        "simple")
    return search.stages.StagedRecipe.single(stage, world.latent)


def _calls(drafts) -> tuple[int, int]:
    return (sum(d.calls_computed + d.calls_skipped for d in drafts), sum(d.calls_computed for d in drafts))


def measure_round(world: World, seeds: list[int], steps: int, plan: PruningPlan, tau: float, window: int,
                  order: tuple[str, ...] = ARMS) -> dict[str, ArmCost]:
    """One round of the three arms on ``seeds``, run in ``order`` (rotate it between rounds so that a machine's
    drifting load does not always hit the same arm)."""
    search = world.extension.nodes
    counted_full = recipe(world, cache_model(world, "off", tau, window), steps)
    cached = recipe(world, cache_model(world, "adaptive", tau, window), steps)
    calls_per_rollout = steps  # euler and uni_pc call the transformer once a step (cond and uncond batched)
    costs = {arm: ArmCost() for arm in ARMS}
    full_best, survivor_indices = [], []

    def score(cost: ArmCost, latents: torch.Tensor) -> int:
        start = time.perf_counter()
        scores = world.score_latents(latents)
        cost.scoring_seconds = time.perf_counter() - start
        return max(range(len(scores)), key=lambda index: (scores[index], -index))

    def run_full(cost: ArmCost) -> None:
        start = time.perf_counter()
        full = search.candidates.run_search(counted_full, seeds)
        cost.explore_seconds = time.perf_counter() - start
        cost.calls, cost.computed = _calls(full.drafts)
        full_best.append(score(cost, full.draft_latents))

    def run_cached(cost: ArmCost) -> None:
        start = time.perf_counter()
        candidates = search.candidates.run_search(cached, seeds)
        cost.explore_seconds = time.perf_counter() - start
        cost.calls, cost.computed = _calls(candidates.drafts)
        cost.commit_seconds = search.commit.commit(candidates, score(cost, candidates.draft_latents)).seconds
        cost.commit_calls = calls_per_rollout

    def run_pruned(cost: ArmCost) -> None:
        def timed_previews(estimates):
            start = time.perf_counter()
            scores = world.score_previews(estimates)
            cost.preview_seconds += time.perf_counter() - start
            return scores

        start = time.perf_counter()
        pruned = search.pruned_search.run_pruned_search(cached, seeds, plan, timed_previews)
        cost.explore_seconds = time.perf_counter() - start
        cost.calls, cost.computed = _calls([*pruned.candidates.drafts, *(c.draft for c in pruned.pruned)])
        scores = score(cost, pruned.candidates.draft_latents)
        cost.commit_seconds = search.commit.commit(pruned.candidates, scores).seconds
        cost.commit_calls = calls_per_rollout
        survivor_indices.extend(pruned.survivor_indices)

    runners = {"full": run_full, "cached": run_cached, "pruned": run_pruned}
    for arm in order:
        runners[arm](costs[arm])
    costs["pruned"].survivors_held_best = int(full_best[0] in survivor_indices)
    return costs


def tiny_wan_world(args) -> World:
    from scripts import tiny_image_reward, tiny_models

    base = comfy_runtime.prepare_base_directory(comfy_runtime.scratch_directory("cachedsearch_bench_"))
    tiny_models.generate_tiny_models(base / "models")
    tiny_image_reward.write_tiny_image_reward(base / "models" / "image_reward")
    mapping = comfy_runtime.load_in_process(base).NODE_CLASS_MAPPINGS

    def one(node_id, **inputs):
        (result, *_) = comfy_runtime.run_node(mapping[node_id], **inputs)
        return result

    model = one("ModelSamplingSD3", model=one("UNETLoader", unet_name=tiny_models.WAN21_T2V_FILE,
                                              weight_dtype="default"), shift=8.0)
    vae = one("VAELoader", vae_name=tiny_models.WAN21_VAE_FILE)
    verifier = one("CachedSearchLoadImageReward", ckpt_name="ImageReward.pt", dtype="fp32")
    prompt = "a red ball rolling across a table"
    latent_format = model.model.latent_format

    def score_frames(frames: torch.Tensor) -> float:
        return float(verifier.score(prompt, frames).mean())

    def score_latents(samples: torch.Tensor) -> list[float]:
        scores = []
        for candidate in samples.split(1):
            frames = one("VAEDecode", vae=vae, samples={"samples": candidate})
            scores.append(score_frames(frames[spread_frame_indices(len(frames), 8)]))
        return scores

    def score_previews(estimates: list[torch.Tensor]) -> list[float]:
        # Decode only the preview's latent frames, each on its own (a one-frame latent decodes to one image).
        scores = []
        for estimate in estimates:
            latent = latent_format.process_out(estimate)
            picked = preview_frame_indices(latent.shape[2], min(args.preview_frames, latent.shape[2]))
            frames = [vae.decode(latent[:, :, index:index + 1]) for index in picked]
            scores.append(score_frames(torch.cat([frame.reshape(-1, *frame.shape[-3:]) for frame in frames])))
        return scores

    conditioning = [one("CachedSearchTestConditioning", text_seed=s, tokens=32, pooled=False) for s in (1, 2)]
    latent = one("EmptyHunyuanLatentVideo", width=args.size, height=args.size, length=args.frames, batch_size=1)
    return World(f"tiny Wan 2.1 (random weights), latent {list(latent['samples'].shape)}, {args.sampler}/simple, "
                 "cfg 5, shift 8; tiny Wan VAE; tiny random-weight ImageReward (8 frames per draft, "
                 f"{args.preview_frames} preview frames decoded one latent frame each)",
                 one, comfy_runtime.loaded_extension(base), model, conditioning[0], conditioning[1], latent, 5.0,
                 args.sampler, score_latents, score_previews)


def shapes_world(args) -> World:
    from scripts import ball_spot_world
    from bench.train_tiny_wan import DEFAULT_OUT, TRAINING_SHIFT

    base = comfy_runtime.prepare_base_directory(comfy_runtime.scratch_directory("cachedsearch_bench_"))
    (base / "models" / "diffusion_models" / DEFAULT_OUT.name).symlink_to(DEFAULT_OUT.resolve())
    mapping = comfy_runtime.load_in_process(base).NODE_CLASS_MAPPINGS

    def one(node_id, **inputs):
        (result, *_) = comfy_runtime.run_node(mapping[node_id], **inputs)
        return result

    model = one("ModelSamplingSD3", model=one("UNETLoader", unet_name=DEFAULT_OUT.name, weight_dtype="default"),
                shift=TRAINING_SHIFT)
    prompt = ball_spot_world.PROMPTS[args.prompt % len(ball_spot_world.PROMPTS)]
    latent_format = model.model.latent_format

    def score_latents(samples: torch.Tensor) -> list[float]:
        # The verifier reads the latent in the space the model was trained in.
        return [ball_spot_world.adherence(latent_format.process_in(candidate)[0], prompt)
                for candidate in samples.split(1)]

    def score_previews(estimates: list[torch.Tensor]) -> list[float]:
        return [ball_spot_world.adherence(estimate[0], prompt) for estimate in estimates]

    latent = one("EmptyHunyuanLatentVideo", width=8 * ball_spot_world.SIZE, height=8 * ball_spot_world.SIZE,
                 length=4 * ball_spot_world.FRAMES - 3, batch_size=1)
    return World(f"small Wan trained on the ball-and-spot world, latent {list(latent['samples'].shape)}, "
                 f"euler/simple, cfg 4, shift {TRAINING_SHIFT}, "
                 f"prompt \"{ball_spot_world.prompt_text(prompt)}\"; analytic "
                 "verifier on the latent (previews score the x0 estimate, no decode)",
                 one, comfy_runtime.loaded_extension(base), model, [[ball_spot_world.conditioning(prompt), {}]],
                 [[ball_spot_world.conditioning(None), {}]], latent, 4.0, "euler", score_latents, score_previews)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", choices=["tiny-wan", "shapes"], default="tiny-wan")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--width", type=int, default=8, help="N candidates")
    parser.add_argument("--keep", type=int, default=4, help="k survivors of the prune step")
    parser.add_argument("--prune", type=float, default=0.4, help="prune step as a fraction of the steps")
    parser.add_argument("--preview-frames", type=int, default=4)
    parser.add_argument("--tau", type=float, default=0.10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--size", type=int, default=128, help="tiny-wan: pixel width and height")
    parser.add_argument("--frames", type=int, default=17, help="tiny-wan: pixel frames")
    parser.add_argument("--sampler", default="uni_pc", help="tiny-wan: sampler (shapes uses euler, as trained)")
    parser.add_argument("--prompt", type=int, default=0, help="shapes: prompt index")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.disable(logging.INFO)

    world = tiny_wan_world(args) if args.world == "tiny-wan" else shapes_world(args)
    window = max(1, round(args.steps / 10))  # K_w = K_c = 5 at 50 steps
    plan = PruningPlan(prune_step=round(args.prune * args.steps), keep=args.keep, preview_frames=args.preview_frames)
    plan.check(args.width, args.steps, window, window)
    totals = {arm: ArmCost() for arm in ARMS}
    with torch.inference_mode():  # as ComfyUI runs a node (uni_pc otherwise records autograd on inference tensors)
        # Warm-up, short: model loads and the allocator.
        measure_round(world, [10**6, 10**6 + 1], 6, PruningPlan(prune_step=3, keep=1), args.tau, 1)
        for round_index in range(args.rounds):
            seeds = [1000 + round_index * args.width + index for index in range(args.width)]
            order = ARMS[round_index % len(ARMS):] + ARMS[:round_index % len(ARMS)]
            for arm, cost in measure_round(world, seeds, args.steps, plan, args.tau, window, order).items():
                totals[arm].add(cost)
    print_table(world, args, plan, window, totals)


def print_table(world: World, args, plan: PruningPlan, window: int, totals: dict[str, ArmCost]) -> None:
    full, cached, pruned = (totals[arm] for arm in ARMS)
    n, k, p, t = args.width, plan.keep, plan.prune_step, args.steps
    print(f"# {world.description}; {t} steps, N = {n}, tau {args.tau:g}, warmup = cooldown = {window}, prune at "
          f"{p}/{t} keep {k}, {args.rounds} round(s) summed, arm order rotated each round, torch threads "
          f"{args.threads}")
    print("| arm | calls computed / made (exploration) | + recommit | exploration s | of which previews s "
          "| final scoring s | recommit s | end to end s | exploration speed-up, calls | exploration speed-up, wall "
          "| end-to-end speed-up, calls | end-to-end speed-up, wall |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for arm in ARMS:
        cost = totals[arm]
        print(f"| {arm} | {cost.computed} / {cost.calls} | {cost.commit_calls} | {cost.explore_seconds:.1f} "
              f"| {cost.preview_seconds:.2f} | {cost.scoring_seconds:.2f} | {cost.commit_seconds:.1f} "
              f"| {cost.end_to_end_seconds:.1f} | {full.computed / cost.computed:.2f}x "
              f"| {full.explore_seconds / cost.explore_seconds:.2f}x "
              f"| {full.computed / (cost.computed + cost.commit_calls):.2f}x "
              f"| {full.end_to_end_seconds / cost.end_to_end_seconds:.2f}x |")
    expected_full, expected_pruned = args.rounds * n * t, args.rounds * (n * p + k * (t - p))
    print(f"\nchecks: full calls {full.calls} = rounds N T = {expected_full}: "
          f"{'yes' if full.calls == expected_full else 'NO'}; "
          f"pruned calls made {pruned.calls} = rounds (N p + k (T - p)) = {expected_pruned}: "
          f"{'yes' if pruned.calls == expected_pruned else 'NO'}")
    print(f"pruning's own factor (cached computed / pruned computed): {cached.computed / pruned.computed:.2f}x "
          f"(the all-calls ratio N T / (N p + k (T - p)) is {n * t / (n * p + k * (t - p)):.2f}x); the full arm's "
          f"best seed survived the prune in {pruned.survivors_held_best} of {args.rounds} round(s)")
    print(f"report (Wan 2.1 1.3B, best-of-8, prune 20/50 keep 4): cache {REPORTED['cache']}x x pruning "
          f"{REPORTED['pruning']}x = {REPORTED['exploration']}x exploration speed-up")


if __name__ == "__main__":
    main()
