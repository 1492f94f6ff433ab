"""The rollouts ``bench.search_policies`` judges search policies on: per prompt and seed of the audit world, one
full-compute rollout and one cached draft, with every step's preview score and the steps the cache computed.

A pruned search's candidate is a cached draft cut at its prune steps, so one unsplit cached draft per seed, with its
x0 preview scored at every step, lets every schedule be replayed offline on the same rollouts (``replay`` in
``bench.search_policies``); the replay is checked against the extension's runner (``run_pruned_search``) there.

Per (prompt, seed):

- ``full``: the full-compute rollout (ground truth: what a recommit of that seed delivers) and its x0 preview at
  every step (the preview a search would see if the cache skipped nothing);
- ``cached``: the cached draft (tau), its final draft score, its x0 preview at every step (the sampler's estimate of
  its last call before the step, as ``run_pruned_search`` scores it), the steps it computed, and the two-step
  lookahead preview at each of ``LOOKAHEAD_STEPS``: from the draft's state there, one Euler step to the middle of
  the remaining schedule and one to t = 0 on the full-compute model (2 computed calls each).
"""

from __future__ import annotations

import pathlib

import torch

from bench.audit import ShapesBackend
from cachedsearch_core.jsonl_store import JsonlFormat, JsonlStore
from scripts import ball_spot_world

LOOKAHEAD_STEPS = (2, 3, 4, 6)
LOOKAHEAD_CALLS = 2


def _read_rollout(record) -> tuple[tuple[str, int, int], dict]:
    """Raises ValueError unless ``record`` is a complete rollout record."""
    if not isinstance(record, dict) or record.get("kind") not in ("full", "cached") or any(
            not isinstance(record.get(name), kind) for name, kind in (("prompt", int), ("seed", int),
                                                                      ("final", float), ("previews", list))):
        raise ValueError("not a rollout record")
    return (record["kind"], record["prompt"], record["seed"]), record


# The first run's file was written before the header (read as it is).
ROLLOUTS_FORMAT = JsonlFormat("cachedsearch search-policy rollouts", 1, read=_read_rollout,
                              write=lambda key, record: record, reads_headerless=True)


class RolloutStore:
    """A resumable store (``JsonlStore``): one record per (kind, prompt, seed)."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self._file = JsonlStore(path, ROLLOUTS_FORMAT)

    def has(self, kind: str, prompt: int, seed: int) -> bool:
        return (kind, prompt, seed) in self._file.records

    def get(self, kind: str, prompt: int, seed: int) -> dict:
        return self._file.records[(kind, prompt, seed)]

    def add(self, record: dict) -> None:
        self._file.add((record["kind"], record["prompt"], record["seed"]), record)


class Recorder:
    """A model clone whose post-CFG hook keeps each sampler call's input state and x0 estimate (model space), and
    whose cache reports its statistics; the sampling result is the stock one."""

    def __init__(self, model, statistics_option: str):
        self.states, self.estimates, self.statistics = [], [], []
        self.model = model.clone()
        self.model.model_options["transformer_options"][statistics_option] = self.statistics.append

        def keep(args):
            self.states.append(args["input"].detach().clone())
            self.estimates.append(args["denoised"].detach().clone())
            return args["denoised"]

        self.model.set_model_sampler_post_cfg_function(keep)


def lookahead_score(backend: ShapesBackend, prompt, state: torch.Tensor, step: int, steps: int) -> float:
    """The two-step lookahead preview from ``state`` (the sampler's state at ``step``, model space): Euler from
    sigma(step) to sigma at the middle of the remaining schedule, then to 0, full compute, cfg as the search."""
    import comfy.sample
    import comfy.samplers

    model = backend.model
    sigmas = comfy.samplers.calculate_sigmas(model.get_model_object("model_sampling"), "simple", steps)
    middle = (step + steps) // 2
    lookahead = torch.stack([sigmas[step], sigmas[middle], sigmas[-1]]).float()
    sigma = float(sigmas[step])
    latent_format = model.model.latent_format
    # The sampler scales a resumed latent by (1 - sigma) (flow models' noise scaling): hand it the inverse.
    latent = latent_format.process_out(state / (1.0 - sigma))
    sampler = comfy.samplers.sampler_object("euler")
    out = comfy.sample.sample_custom(model, torch.zeros_like(latent), backend.cfg, sampler, lookahead,
                                     [[ball_spot_world.conditioning(prompt), {}]], backend.negative, latent,
                                     disable_pbar=True, seed=0)
    return ball_spot_world.adherence(latent_format.process_in(out)[0], prompt)


def rollout(backend: ShapesBackend, kind: str, prompt_index: int, seed: int, steps: int, tau: float) -> dict:
    """One scored rollout of ``kind`` ("full" or "cached") with its per-step previews."""
    spec = {"cache": {"mode": "adaptive", "tau": tau} if kind == "cached" else None, "steps": steps}
    base = backend._model_for(f"tau {tau:g}" if kind == "cached" else "full", spec)
    recorder = Recorder(base, backend.extension.nodes.cache_patch.STATISTICS_CALLBACK_OPTION)
    prompt = backend.prompts[prompt_index]
    out = backend.one("KSampler", model=recorder.model, seed=seed, steps=steps, cfg=backend.cfg,
                      sampler_name="euler", scheduler="simple",
                      positive=[[ball_spot_world.conditioning(prompt), {}]], negative=backend.negative,
                      latent_image=backend.latents[1.0], denoise=1.0)
    if len(recorder.estimates) != steps:
        raise RuntimeError(f"expected {steps} sampler calls, saw {len(recorder.estimates)}")
    latent_format = backend.model.model.latent_format
    record = {"kind": kind, "prompt": prompt_index, "seed": seed,
              "final": ball_spot_world.adherence(latent_format.process_in(out["samples"])[0], prompt),
              "previews": [ball_spot_world.adherence(x0[0], prompt) for x0 in recorder.estimates]}
    if kind == "cached":
        computed = set()
        for statistics in recorder.statistics:
            computed |= statistics.steps_computed
        record["computed_steps"] = sorted(computed)
        record["lookahead"] = {str(step): lookahead_score(backend, prompt, recorder.states[step], step, steps)
                               for step in LOOKAHEAD_STEPS}
    return record


def collect(backend: ShapesBackend, store: RolloutStore, prompts: range, seeds: range, steps: int, tau: float,
            log=print) -> None:
    """Every missing (kind, prompt, seed) of ``prompts`` x ``seeds``, seeds outermost so a stopped run leaves whole
    seeds for every prompt."""
    for seed in seeds:
        for prompt in prompts:
            for kind in ("full", "cached"):
                if not store.has(kind, prompt, seed):
                    store.add(rollout(backend, kind, prompt, seed, steps, tau))
        log(f"[search_policies] seed {seed} collected for {len(prompts)} prompts")
