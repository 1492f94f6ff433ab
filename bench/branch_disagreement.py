"""How often the cond and uncond branches disagree, and what computing only the branch that must compute would save.

    .venv/bin/python -m bench.branch_disagreement [--taus 0.1 0.2] [--prompts 3] [--seeds 3] [--threads 1]

ComfyUI batches the cond and uncond branches into one transformer call. The cache keeps state per branch (report
Sec. 3.1) but computes the whole call unless every branch may skip. A call "disagrees" when some of its
branches may skip and others must compute. Each row runs the same rollouts twice:
- whole calls: the cache as shipped;
- per branch: a simulation of per-branch skipping. A disagreeing call still computes the whole batch (nothing
  here slices the model's arguments) but keeps only the rows of the branches that must compute and returns
  the others' cached approximation, so the decisions, the drafts and the counted work are those of computing
  only the branches that must compute.

Work is counted in branch evaluations (a call computing cond and uncond counts 2), which is roughly what a
compute-bound transformer's cost follows. Rows, each through ComfyUI's real KSampler with the cache:
- the small Wan model trained on the ball-and-spot world (bench/train_tiny_wan.py; euler, cfg 4, shift 3, 30
  steps as in bench/audit.py);
- tiny random-weight Wan 2.1 (uni_pc, cfg 5, shift 8, 50 steps as in bench/cache_speed.py);
- the same with a scheduled prompt (one positive prompt for the first half of the schedule, another for the
  second, ConditioningSetTimestepRange + ConditioningCombine): a branch that appears mid-run has no cache yet.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import pathlib
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from scripts import ball_spot_world  # noqa: E402
from bench.train_tiny_wan import DEFAULT_OUT as TRAINED_MODEL, TRAINING_SHIFT  # noqa: E402
from scripts import comfy_runtime, tiny_models  # noqa: E402


@dataclasses.dataclass
class Totals:
    rollouts: int = 0
    calls: int = 0
    disagreeing: int = 0
    branch_calls: int = 0
    branch_computed: int = 0

    def add(self, statistics) -> None:
        self.rollouts += 1
        self.calls += statistics.calls
        self.disagreeing += statistics.calls_disagreeing
        computed = sum(statistics.computed_by_branch.values())
        self.branch_computed += computed
        self.branch_calls += computed + sum(statistics.skipped_by_branch.values())


def per_branch_cache_class(base_class):
    """The cache with per-branch skipping, simulated as described in the module docstring."""

    class PerBranchSkipping(base_class):
        def __call__(self, compute, x, sigma, branch_keys):
            plan = self._plan(x, sigma, branch_keys)
            if plan.cached_output is not None:
                return plan.cached_output
            output = compute()
            if not plan.skips_forgone or output.shape != x.shape:
                self._after_compute(plan, x, output)
                return output
            pieces, computed, skipped = [], [], []
            for label, chunk, out_chunk, state, accumulator in zip(
                    plan.labels, plan.chunks, output.chunk(len(plan.states)), plan.states, plan.skipping_accumulators):
                if accumulator is None:
                    state.anchor(chunk, out_chunk)
                    pieces.append(out_chunk)
                    computed.append(label)
                else:
                    state.accumulated = accumulator
                    pieces.append(chunk + state.delta)
                    skipped.append(label)
            with self._lock:
                self.statistics.record(plan.step, computed, computed=True)
                self.statistics.calls_disagreeing += 1
                for label in skipped:
                    self.statistics.skipped_by_branch[label] = self.statistics.skipped_by_branch.get(label, 0) + 1
            return torch.cat(pieces)

    return PerBranchSkipping


class Runner:
    def __init__(self, base: pathlib.Path):
        self.nodes = comfy_runtime.load_in_process(base)
        self.extension = comfy_runtime.loaded_extension(base)
        import comfy.utils

        comfy.utils.set_progress_bar_enabled(False)

    def one(self, node_id, **inputs):
        (result,) = comfy_runtime.run_node(self.nodes.NODE_CLASS_MAPPINGS[node_id], **inputs)
        return result

    @contextlib.contextmanager
    def per_branch_skipping(self):
        cache_patch = self.extension.nodes.cache_patch
        shipped = cache_patch.TransformationVectorCache
        cache_patch.TransformationVectorCache = per_branch_cache_class(shipped)
        try:
            yield
        finally:
            cache_patch.TransformationVectorCache = shipped

    def rollout(self, model, conditions, seed: int, sampling: dict, totals: Totals) -> None:
        observed, runs = model.clone(), []
        option = self.extension.nodes.cache_patch.STATISTICS_CALLBACK_OPTION
        observed.model_options["transformer_options"][option] = runs.append
        positive, negative, latent = conditions
        self.one("KSampler", model=observed, seed=seed, positive=positive, negative=negative, latent_image=latent,
                 denoise=1.0, **sampling)
        for statistics in runs:
            totals.add(statistics)


def trained_world(runner: Runner, base: pathlib.Path, model_path: pathlib.Path, prompt_count: int):
    (base / "models" / "diffusion_models" / model_path.name).symlink_to(model_path.resolve())
    model = runner.one("UNETLoader", unet_name=model_path.name, weight_dtype="default")
    model = runner.one("ModelSamplingSD3", model=model, shift=TRAINING_SHIFT)
    latent = runner.one("EmptyHunyuanLatentVideo", width=8 * ball_spot_world.SIZE, height=8 * ball_spot_world.SIZE,
                        length=4 * ball_spot_world.FRAMES - 3, batch_size=1)
    negative = [[ball_spot_world.conditioning(None), {}]]
    prompts = [ball_spot_world.PROMPTS[(7 * index) % len(ball_spot_world.PROMPTS)] for index in range(prompt_count)]
    conditions = [([[ball_spot_world.conditioning(prompt), {}]], negative, latent) for prompt in prompts]
    sampling = dict(steps=30, cfg=4.0, sampler_name="euler", scheduler="simple")
    return "trained small Wan (ball-and-spot), 30 steps euler cfg 4", model, conditions, sampling


def random_wan(runner: Runner, base: pathlib.Path, prompt_count: int, size: int, frames: int, scheduled: bool):
    from safetensors.torch import save_file

    path = base / "models" / "diffusion_models" / tiny_models.WAN21_T2V_FILE
    if not path.exists():
        save_file(tiny_models.wan21_state_dict(), str(path))
    model = runner.one("UNETLoader", unet_name=tiny_models.WAN21_T2V_FILE, weight_dtype="default")
    model = runner.one("ModelSamplingSD3", model=model, shift=8.0)
    latent = runner.one("EmptyHunyuanLatentVideo", width=size, height=size, length=frames, batch_size=1)
    negative = runner.one("CachedSearchTestConditioning", text_seed=1000, tokens=16, pooled=False)

    def positive(index):
        prompt = runner.one("CachedSearchTestConditioning", text_seed=1 + index, tokens=16, pooled=False)
        if not scheduled:
            return prompt
        later = runner.one("CachedSearchTestConditioning", text_seed=500 + index, tokens=16, pooled=False)
        first_half = runner.one("ConditioningSetTimestepRange", conditioning=prompt, start=0.0, end=0.5)
        second_half = runner.one("ConditioningSetTimestepRange", conditioning=later, start=0.5, end=1.0)
        return runner.one("ConditioningCombine", conditioning_1=first_half, conditioning_2=second_half)

    conditions = [(positive(index), negative, latent) for index in range(prompt_count)]
    sampling = dict(steps=50, cfg=5.0, sampler_name="uni_pc", scheduler="simple")
    description = f"tiny random Wan 2.1, latent {list(latent['samples'].shape)}, 50 steps uni_pc cfg 5"
    return description + (", prompt switched at half the schedule" if scheduled else ""), model, conditions, sampling


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--taus", type=float, nargs="+", default=[0.10, 0.20])
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--model", type=pathlib.Path, default=TRAINED_MODEL, help="the trained ball-and-spot model")
    parser.add_argument("--size", type=int, default=128, help="tiny Wan: pixel width/height")
    parser.add_argument("--frames", type=int, default=9, help="tiny Wan: pixel frames")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    torch.set_num_threads(args.threads)
    base = comfy_runtime.scratch_directory("cachedsearch_branches_")
    comfy_runtime.prepare_base_directory(base)
    runner = Runner(base)
    worlds = [random_wan(runner, base, args.prompts, args.size, args.frames, scheduled)
              for scheduled in (False, True)]
    if args.model.exists():
        worlds.insert(0, trained_world(runner, base, args.model, args.prompts))
    else:
        print(f"(no trained model at {args.model}: train it with `python -m bench.train_tiny_wan`)")

    print(f"# {args.prompts} prompts x {args.seeds} seeds per row, warmup = cooldown = steps / 10, torch threads "
          f"{torch.get_num_threads()}; work in branch evaluations (a call computing cond and uncond = 2)")
    print("| model | tau | calls / rollout | disagreeing calls / rollout (whole calls) | computed / all branch "
          "evaluations, whole calls | same, per branch | saved by per-branch skipping (of computed) |")
    print("|---|---|---|---|---|---|---|")
    for description, model, conditions, sampling in worlds:
        window = max(1, round(sampling["steps"] / 10))
        for tau in args.taus:
            cached = runner.one("CachedSearchApplyCache", model=model, mode="adaptive", tau=tau, warmup_steps=window,
                                cooldown_steps=window, static_interval=2)
            whole, per_branch = Totals(), Totals()
            for totals, mode in ((whole, contextlib.nullcontext), (per_branch, runner.per_branch_skipping)):
                with mode():
                    for condition in conditions:
                        for seed in range(args.seeds):
                            runner.rollout(cached, condition, seed, sampling, totals)
            rollouts = whole.rollouts
            saved = (whole.branch_computed - per_branch.branch_computed) / rollouts
            print(f"| {description} | {tau:g} | {whole.calls / rollouts:.0f} | "
                  f"{whole.disagreeing / rollouts:.2f} ({100 * whole.disagreeing / whole.calls:.1f} %) | "
                  f"{whole.branch_computed / rollouts:.2f} / {whole.branch_calls / rollouts:.0f} | "
                  f"{per_branch.branch_computed / rollouts:.2f} / {per_branch.branch_calls / rollouts:.0f} | "
                  f"{saved:.2f} ({100 * saved / (whole.branch_computed / rollouts):.1f} %) |", flush=True)


if __name__ == "__main__":
    main()
