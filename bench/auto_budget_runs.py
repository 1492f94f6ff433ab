"""The held-out half of bench/auto_budget.py: each search on a held-out prompt of the audit world, and the full
rollouts it is measured against, run in process as a server runs them.

- ``SamplerSearches``: Budget "auto" as an artist runs it: CachedSearch Apply Cache, Budget (choose "auto"), Pruning
  Plan (schedule "auto") and Sampler executed with an API prompt's graph as their hidden input, so that the Budget
  finds Calibrate's entry in the calibration memory (same model file, steps, sampler, scheduler, verifier loader,
  preview frames and cache window) and runs the chosen search under its ledger (``AutoLedger``); what it reports
  is the panel's payload (``cachedsearch_budget[0].auto``).
- ``HeldOut``: a policy the node does not choose (the chooser counting calls only; the fewest calls at a capture
  target) through the extension's runner and the Pruning Plan's search, and the full rollouts (the references and
  every search's commit).
- ``Runs``: every result kept by key in a JSON-lines file, so that a stopped bench resumes.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import numpy as np
import torch

from bench.calibration_prompts import WorldCalibrate, hidden_inputs
from cachedsearch_core.pruning import PruningSchedule, default_preview_frames
from cachedsearch_core.video_score import AVERAGE


def extension_module(name: str):
    """The loaded extension's module ``nodes.<name>`` (the one Calibrate runs)."""
    return next(module for key, module in sys.modules.items() if key.endswith(f".nodes.{name}"))


class HeldOut:
    """The world's held-out prompts run through the extension's runner and the Pruning Plan's search, with the
    calibration's model, VAE, verifier and frames (``WorldCalibrate.inputs``)."""

    def __init__(self, world: WorldCalibrate, texts: list[str], steps: int, tau: float):
        self.nodes = {name: extension_module(name) for name in
                      ("runner", "stages", "pruning_nodes", "pruned_search", "previews", "calibration_rollouts")}
        inputs = world.inputs
        self.inputs, self.texts, self.steps, self.tau = inputs, texts, steps, tau
        # A preview's frames are the Pruning Plan's default, as Calibrate's (all frames of a shorter latent).
        self.preview_frames = default_preview_frames(self.nodes["pruning_nodes"].latent_frames(inputs["latent_image"]))
        self.cached = self.nodes["calibration_rollouts"].cached_model(inputs["model"], inputs["warmup_steps"],
                                                                      inputs["cooldown_steps"], tau)
        self.positive = [world.one("CLIPTextEncode", clip=inputs["clip"], text=text) for text in texts]
        self.judges = [self.nodes["calibration_rollouts"].Judge(inputs["vae"], inputs["verifier"], text,
                                                                inputs["frames_per_candidate"], inputs["latent_image"],
                                                                AVERAGE, "") for text in texts]

    def recipe(self, index: int, model):
        stages = self.nodes["stages"]
        stage = stages.KSamplerStage(model, self.positive[index], self.inputs["negative"], self.steps,
                                     self.inputs["cfg"], self.inputs["sampler_name"], self.inputs["scheduler"])
        return stages.StagedRecipe.single(stage, self.inputs["latent_image"])

    def scored(self, index: int, latents: torch.Tensor) -> tuple[list[float], float]:
        """Each latent's verifier score (decoded and judged as Calibrate judges a rollout) and the seconds."""
        start = time.perf_counter()
        scores = [self.judges[index].score({"samples": latents[i:i + 1]}, self.texts[index])[0]
                  for i in range(len(latents))]
        return scores, time.perf_counter() - start

    def full(self, index: int, seed: int) -> dict:
        runner = self.nodes["runner"]
        recipe = self.recipe(index, self.inputs["model"])
        (state,) = runner.run_stages(recipe, [runner.CandidateState.start(seed, recipe.latent)],
                                     runner.SearchProgress(self.steps))
        (score,), judged = self.scored(index, state.latent["samples"])
        return {"score": score, "calls": state.draft.calls_computed, "sampling": state.draft.seconds,
                "judging": judged}

    def preview_scores(self, index: int, recipe, round_steps):
        """Scores a round's x0 estimates as the Pruning Plan's search does (``PreviewPruning.search``: each decoded
        alone, K frames, the verifier), without saving the panel's frames."""
        previews, frames = self.nodes["previews"], self.preview_frames
        scorer = previews.PreviewScorer(self.inputs["vae"], (self.nodes["pruning_nodes"].FrameJudge(
            self.inputs["verifier"], self.texts[index], frames),), frames)
        steps = iter(round_steps)

        def score(estimates):
            model = previews.preview_model(recipe, next(steps))
            return [scorer.score(model, [estimate])[0][0][0] for estimate in estimates]
        return score

    def search(self, index: int, width: int, schedule: str) -> dict:
        """The chosen search's exploration: calls, the seconds of sampling, previews and scoring the survivors, and
        the seed it recommits."""
        runner, recipe = self.nodes["runner"], self.recipe(index, self.cached)
        seeds = list(range(width))
        if schedule:
            plan = PruningSchedule(schedule).plan(width, self.steps, self.preview_frames)
            candidates = self.nodes["pruned_search"].run_pruned_search(
                recipe, seeds, plan, self.preview_scores(index, recipe, plan.round_steps)).candidates
            drafts, latents = candidates.drafts, candidates.draft_latents
            dropped, previews = [p.draft for p in candidates.pruning.pruned], candidates.pruning.preview_seconds
        else:
            states = runner.run_stages(recipe, [runner.CandidateState.start(seed, recipe.latent) for seed in seeds],
                                       runner.SearchProgress(width * self.steps))
            drafts, dropped, previews = [s.draft for s in states], [], 0.0
            latents = torch.cat([s.latent["samples"] for s in states])
        finals, judged = self.scored(index, latents)
        return {"winner": drafts[int(np.argmax(finals))].seed,
                "calls": sum(d.calls_computed for d in (*drafts, *dropped)),
                "sampling": sum(d.seconds for d in (*drafts, *dropped)), "previews": previews, "judging": judged}


class Runs:
    """Held-out runs kept in a JSON-lines file by key, so a stopped bench resumes where it was."""

    def __init__(self, path: pathlib.Path):
        self.path, self.records = path, {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    record = json.loads(line)
                    self.records[record["key"]] = record["value"]

    def get(self, key: str, compute) -> dict:
        if key not in self.records:
            self.records[key] = compute()
            with self.path.open("a") as handle:
                handle.write(json.dumps({"key": key, "value": self.records[key]}) + "\n")
        return self.records[key]


class SamplerSearches:
    """Budget "auto" searches on the held-out prompts as a server runs them: the Apply Cache, Budget, Pruning Plan
    and Sampler nodes of ``graph`` (an API prompt: the calibration's model loader, the world's VAE and verifier
    loaders), each executed with the graph and its id as its hidden inputs."""

    def __init__(self, world: WorldCalibrate, held: HeldOut, tau: float, max_candidates: int):
        self.world, self.held, self.max_candidates = world, held, max_candidates
        inputs = world.inputs
        self.cache = dict(mode="adaptive", tau=tau, warmup_steps=inputs["warmup_steps"],
                          cooldown_steps=inputs["cooldown_steps"], static_interval=2)
        self.sampling = {name: inputs[name] for name in ("steps", "cfg", "sampler_name", "scheduler", "denoise")}
        self.graph = {
            **world.loader_graph(),
            "cache": {"class_type": "CachedSearchApplyCache", "inputs": {"model": ["shift", 0], **self.cache}},
            "budget": {"class_type": "CachedSearchBudget", "inputs": {}},
            "pruning": {"class_type": "CachedSearchPruningPlan", "inputs": {
                "vae": ["frames", 0], "verifier": ["verifier", 0], "keep": 4, "prune_fraction": 0.4, "prune_step": 0,
                "preview_frames": held.preview_frames, "schedule": "auto"}},
            "sampler": {"class_type": "CachedSearchSampler", "inputs": {
                "model": ["cache", 0], "pruning": ["pruning", 0], "budget": ["budget", 0], "seed": 0,
                "num_candidates": 8, **self.sampling}},
        }
        (self.model,) = self.executed("cache", model=inputs["model"], **self.cache).result

    def executed(self, node_id: str, **inputs):
        """The graph's node ``node_id`` executed on ``inputs`` with the graph as its hidden inputs."""
        node_class = self.world.mapping[self.graph[node_id]["class_type"]]
        with torch.inference_mode():
            return node_class.PREPARE_CLASS_CLONE(hidden_inputs(self.graph, node_id)).execute(**inputs)

    def search(self, index: int, budget_rollouts: int) -> dict:
        """The Sampler's search on held-out prompt ``index`` with a budget of ``budget_rollouts`` full renders on
        auto: the panel's ``auto`` payload, the calls its drafts (finished and dropped) computed, the seconds of
        sampling, previews and scoring the survivors, and the seed it recommits (the verifier's best survivor)."""
        inputs, text = self.world.inputs, self.held.texts[index]
        budget_inputs = dict(budget_rollouts=budget_rollouts, budget_unit="transformer calls",
                             max_candidates=self.max_candidates, choose="auto")
        self.graph["budget"]["inputs"] = budget_inputs
        self.graph["pruning"]["inputs"]["prompt"] = text
        (budget,) = self.executed("budget", **budget_inputs).result
        pruning_inputs = {name: value for name, value in self.graph["pruning"]["inputs"].items()
                          if not isinstance(value, list)}
        (pruning,) = self.executed("pruning", vae=inputs["vae"], verifier=inputs["verifier"], **pruning_inputs).result
        output = self.executed("sampler", model=self.model, positive=self.held.positive[index],
                               negative=inputs["negative"], latent_image=inputs["latent_image"], seed=0,
                               num_candidates=8, **self.sampling, pruning=pruning, budget=budget, save_drafts=False)
        candidates = output.result[1]
        dropped = [p.draft for p in candidates.pruning.pruned] if candidates.pruning is not None else []
        finals, judged = self.held.scored(index, candidates.draft_latents)
        auto = output.ui["cachedsearch_budget"][0]["auto"]
        return {"auto": auto, "winner": candidates.drafts[int(np.argmax(finals))].seed,
                "drafted": len(candidates.drafts) + len(dropped),
                "calls": sum(d.calls_computed for d in (*candidates.drafts, *dropped)),
                "sampling": sum(d.seconds for d in (*candidates.drafts, *dropped)),
                "previews": candidates.pruning.preview_seconds if candidates.pruning is not None else 0.0,
                "judging": judged}
