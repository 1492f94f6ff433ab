"""The GPU check: the report's headline figures measured on one lent GPU in one command, within about 9 minutes.

    bash bench/gpu_check.sh                               on the GPU machine (sets up from .gpu-check/, then this)
    python -m bench.gpu_check --out DIR [--toy] [--budget SECONDS] [--tau 0.10]

ComfyUI runs in this process on the device it picks (the CUDA GPU), with Wan 2.1 T2V 1.3B at its released width and
depth with random bf16 weights (bench/real_dimensions.py), the real Wan 2.1 VAE's size, and conditioning of umt5's
shape (512 tokens). In this order, each measurement under its own time limit inside one total budget:

1. rollouts at 832x480x33, then at 832x480x81 if the time left (after the reserves of 2 and 3) allows: 50 steps,
   uni_pc, cfg 5, per-rollout wall time at full compute, with CachedSearch's cache at tau 0.10 and with ComfyUI's
   EasyCache at the threshold that skips as many calls (bench/cache_speed.py), in one process, arms interleaved;
   seconds per computed call, wall time against the ideal 1 / (computed share), the cache check's own cost per call
   on the device and the host syncs it makes;
2. the N = 8 search end to end on the same model, as the shipped workflow runs it (CachedSearch Sampler, VAEDecode
   of the drafts, CachedSearch Verifier with ImageReward at its real size, random weights, 8 frames per candidate,
   Recommit), against full best-of-8 (8 x one full candidate: rollout, decode, score, each measured here); peak
   device memory of the search against one rollout;
3. VideoScore-v1.1 at its real size (8.3B, random bf16 weights) and ImageReward: seconds and memory per candidate
   (8 frames of 480x832).

DIR/gpu_check.json (all figures) and DIR/gpu_check.md (the tables) are rewritten after every figure, so a run cut
short keeps what it measured; each measurement ends as done, cut short, skipped or failed, with the reason. Random
weights change which calls the caches skip: the figures that carry over to a trained model are the seconds per
computed call and the wall time against the ideal. ``--toy`` runs the same at toy size (tiny Wan, tiny VAE and
verifiers, 2 steps, N = 2) on any device; tests/test_gpu_check.py runs it on the CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import json
import logging
import math
import os
import pathlib
import platform
import statistics
import sys
import threading
import time
import traceback
import warnings

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.cache_speed import EASYCACHE_WINDOW, cache_check_call, match_easycache, time_cache_check  # noqa: E402
from bench.real_dimensions import MODELS, load_random_model  # noqa: E402
from bench.search_cost import peak_rss_growth  # noqa: E402
from scripts import comfy_runtime, tiny_models  # noqa: E402

RESULTS_JSON = "gpu_check.json"
RESULTS_MARKDOWN = "gpu_check.md"
GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Scale:
    """Everything that differs between the real check and its toy run."""

    name: str
    model: dict  # a bench.real_dimensions model spec
    weight_dtype: str
    vae_dim: int  # Wan 2.1 VAE width: 96 released
    videos: tuple[tuple[int, int, int], ...]  # (width, height, frames): the first always, the next if time allows
    steps: int
    candidates: int
    text_tokens: int
    rollout_repeats: int
    easycache_rollouts: int  # at most this many rollouts to match EasyCache's skips
    verifier_dtype: str
    image_reward_prompt: str
    verifier_clip: tuple[int, int, int]  # frames, height, width of the clip the verifiers score
    budget: float  # seconds, from the start of the command
    limits: dict  # seconds per measurement: "rollouts" (the first video), "search", "verifiers"
    final_margin: float  # seconds kept after the last measurement


# Wan 2.1 T2V 1.3B as released (dim 1536, 30 layers), in bf16 weights and compute.
REAL = Scale(
    name="real", model=MODELS["wan21_1.3b"], weight_dtype="bfloat16", vae_dim=96,
    videos=((832, 480, 33), (832, 480, 81)), steps=50, candidates=8, text_tokens=512, rollout_repeats=2,
    easycache_rollouts=4, verifier_dtype="bfloat16",
    image_reward_prompt="word1 word2 word3 word4 word5 word6",  # bench/verifier_cost.py's stand-in vocabulary
    verifier_clip=(81, 480, 832), budget=540.0, limits={"rollouts": 150.0, "search": 180.0, "verifiers": 60.0},
    final_margin=10.0,
)
TOY = Scale(
    name="toy", model={"model_type": "t2v", "dim": 128, "ffn_dim": 256, "num_layers": 2, "dtype": "float32",
                       "compute": None, "name": "tiny Wan 2.1"},
    weight_dtype="float32", vae_dim=8, videos=((32, 32, 5), (32, 32, 9)), steps=2, candidates=2, text_tokens=8,
    rollout_repeats=1, easycache_rollouts=2, verifier_dtype="float32",
    image_reward_prompt="a red ball on grass",  # scripts/tiny_image_reward.py's vocabulary
    verifier_clip=(9, 64, 64), budget=300.0, limits={"rollouts": 60.0, "search": 60.0, "verifiers": 60.0},
    final_margin=5.0,
)
CFG, SAMPLER, SCHEDULER, SHIFT = 5.0, "uni_pc", "simple", 8.0
VERIFIER_FRAMES = 8  # frames scored per candidate (the report's K)
SEARCH_SEED = 1000


class OutOfTime(Exception):
    """The next piece of work would not end within the measurement's time limit."""


class Clock:
    """A measurement's deadline."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def require(self, seconds: float, what: str) -> None:
        if seconds > self.left():
            raise OutOfTime(f"{what} (about {seconds:.0f} s) would not end within the {max(self.left(), 0):.0f} s "
                            "left")


class TimeLimitReached(OutOfTime):
    """The measurement's time limit stopped work in progress."""


class CancelAt:
    """ComfyUI's own Cancel (the flag POST /interrupt sets, checked in every layer's forward) pressed at the clock's
    end, so a rollout still running then stops there (TimeLimitReached)."""

    def __init__(self, clock: Clock):
        import comfy.model_management

        self.model_management = comfy.model_management
        self.seconds = max(clock.left(), 0.0)
        self.timer = threading.Timer(self.seconds, self.model_management.interrupt_current_processing, (True,))

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, kind, error, trace):
        self.timer.cancel()
        self.model_management.interrupt_current_processing(False)
        if kind is not None and issubclass(kind, self.model_management.InterruptProcessingException):
            raise TimeLimitReached(f"its time limit ({self.seconds:.0f} s) stopped the work in progress") from error


class Memory:
    """Peak memory of a piece of work: the CUDA allocator's peak on a GPU, the resident set size (sampled every
    2 ms) on the CPU."""

    def __init__(self, device):
        import torch

        self.cuda = device.type == "cuda"
        self.torch = torch
        self.kind = "CUDA max_memory_allocated" if self.cuda else "process RSS"

    def peak_during(self, work):
        """(work's result, peak bytes while it ran, bytes before it)."""
        if self.cuda:
            self.torch.cuda.synchronize()
            before = self.torch.cuda.memory_allocated()
            self.torch.cuda.reset_peak_memory_stats()
            result = work()
            self.torch.cuda.synchronize()
            return result, self.torch.cuda.max_memory_allocated(), before
        box = []
        before, peak = peak_rss_growth(lambda: box.append(work()))
        return box[0], peak, before


class Results:
    """The check's figures, rewritten to JSON and markdown after every change."""

    def __init__(self, folder: pathlib.Path, check: dict):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.data = {"check": check, "measurements": {}}

    def start(self, key: str, title: str, limit: float) -> dict:
        entry = {"title": title, "status": "running", "limit_s": round(limit, 1), "figures": {}}
        self.data["measurements"][key] = entry
        self.save()
        return entry

    def save(self) -> None:
        for name, text in ((RESULTS_JSON, json.dumps(self.data, indent=1)), (RESULTS_MARKDOWN, markdown(self.data))):
            partial = self.folder / f".{name}.partial"
            partial.write_text(text + "\n")
            partial.replace(self.folder / name)


class GpuCheck:
    """ComfyUI in this process with the check's model, VAE and conditioning; one method per measurement."""

    def __init__(self, scale: Scale, device_name: str, tau: float, results: Results):
        import torch

        self.scale, self.tau, self.results = scale, tau, results
        self.base = comfy_runtime.scratch_directory("cachedsearch_gpu_check_")
        nodes = comfy_runtime.load_in_process(self.base, cpu=device_name == "cpu")
        self.mapping = nodes.NODE_CLASS_MAPPINGS
        self.extension = comfy_runtime.loaded_extension(self.base)
        import comfy.model_management
        import comfy.sd
        import comfy.utils

        comfy.utils.set_progress_bar_enabled(False)  # one line per rollout instead, in the GPU call's output tail
        self.model_management = comfy.model_management
        self.device = comfy.model_management.get_torch_device()
        self.memory = Memory(self.device)
        self.torch = torch
        start = time.perf_counter()
        loaded, self.parameters = load_random_model(scale.model, weight_dtype=scale.weight_dtype,
                                                    compute_dtype=scale.weight_dtype)
        self.model = self.one("ModelSamplingSD3", model=loaded, shift=SHIFT)
        self.vae = comfy.sd.VAE(sd=tiny_models.wan21_vae_state_dict(dim=scale.vae_dim))
        self.positive = self.one("CachedSearchTestConditioning", text_seed=1, tokens=scale.text_tokens, pooled=False)
        self.negative = self.one("CachedSearchTestConditioning", text_seed=2, tokens=scale.text_tokens, pooled=False)
        self.build_seconds = time.perf_counter() - start
        self.warm_videos: set = set()
        self.easycache_threshold: float | None = None
        self.full_rollout_seconds: dict = {}  # median full rollout per token count

    # -- ComfyUI in process ------------------------------------------------------------------------------------

    def run(self, node_id, **inputs):
        return comfy_runtime.run_node(self.mapping[node_id], **inputs)

    def one(self, node_id, **inputs):
        (result,) = self.run(node_id, **inputs)
        return result

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def timed(self, work):
        """(work's result, wall seconds), the device's queued work finished at both ends."""
        self.synchronize()
        start = time.perf_counter()
        result = work()
        self.synchronize()
        return result, time.perf_counter() - start

    def free_memory(self) -> None:
        gc.collect()
        self.model_management.unload_all_models()
        self.model_management.soft_empty_cache()

    def start_afresh(self) -> None:
        """After a failed measurement (out of memory, say): an empty device, and a warm-up before the next timing."""
        self.free_memory()
        self.warm_videos.clear()

    def latent(self, video):
        width, height, frames = video
        return self.one("EmptyHunyuanLatentVideo", width=width, height=height, length=frames, batch_size=1)

    def sampling(self, latent) -> dict:
        return dict(positive=self.positive, negative=self.negative, latent_image=latent, steps=self.scale.steps,
                    cfg=CFG, sampler_name=SAMPLER, scheduler=SCHEDULER, denoise=1.0)

    def cached_model(self):
        window = self.scale.steps // 10  # the report's 5 warmup and 5 cooldown steps of 50
        return self.one("CachedSearchApplyCache", model=self.model, mode="adaptive", tau=self.tau,
                        warmup_steps=window, cooldown_steps=window, static_interval=2)

    def easycache_model(self, threshold: float):
        return self.one("EasyCache", model=self.model, reuse_threshold=threshold, verbose=False, **EASYCACHE_WINDOW)

    def rollout(self, model, latent, seed: int = 0):
        """One KSampler rollout, metered: (samples, seconds, StageCalls computed / skipped)."""
        meter = self.extension.nodes.full_compute.CallMeter()
        metered = meter.attach(model)
        with meter.counting(model):
            samples, seconds = self.timed(lambda: self.one("KSampler", model=metered, seed=seed,
                                                           **self.sampling(latent)))
        return samples, seconds, meter.take().calls

    def decode(self, samples):
        return self.one("VAEDecode", samples=samples, vae=self.vae)

    def say(self, text: str) -> None:
        print(f"[gpu_check] {text}", flush=True)

    # -- 1. rollouts ---------------------------------------------------------------------------------------------

    def measure_rollouts(self, video, entry: dict, clock: Clock) -> None:
        figures = entry["figures"]
        latent = self.latent(video)
        tokens = video_tokens(latent["samples"].shape)
        figures.update(video=size_name(video), latent=list(latent["samples"].shape), tokens=tokens,
                       steps=self.scale.steps, tau=self.tau, arms={})
        first_video = video == self.scale.videos[0]
        arms = {"full": self.model, "cachedsearch": self.cached_model()}
        label = f"rollouts {figures['video']}"
        if first_video:
            _, seconds, _ = self.rollout(self.model, latent)
            figures["first_rollout_s"] = seconds  # loads the model onto the device
            self.say(f"{label}: first full rollout {seconds:.1f} s (model load included)")
        else:
            estimate = self.predicted_full_rollout(tokens)
            if estimate is None:
                raise OutOfTime("no full rollout was timed at the first size, so the time this needs is unknown")
            figures["predicted_repeat_s"] = estimate * (1 + 2 * self.cached_share())
            figures["note"] = "1 repeat, no warm-up rollout at this size, EasyCache at the first size's threshold"
            clock.require(figures["predicted_repeat_s"], f"one repeat of the three arms at {label}")
        self.warm_videos.add(video)
        figures["cache_check"] = self.cache_check(latent["samples"])
        self.results.save()
        if self.easycache_threshold is None:
            _, cached_seconds, calls = self.rollout(arms["cachedsearch"], latent)
            self.say(f"{label}: cached rollout {cached_seconds:.1f} s, {calls.skipped} calls skipped")

            def count_skips(patched) -> int:
                clock.require(cached_seconds, "an EasyCache matching rollout")
                return self.rollout(patched, latent)[2].skipped

            rollouts = max(1, min(self.scale.easycache_rollouts, int(0.3 * clock.left() / cached_seconds)))
            _, self.easycache_threshold, skips = match_easycache(self.one, self.model, count_skips, calls.skipped,
                                                                 rollouts)
            figures["easycache_matching"] = {"target_skips": calls.skipped, "rollouts": rollouts, "skips": skips}
            self.say(f"{label}: EasyCache reuse_threshold {self.easycache_threshold:.4f} skips {skips} "
                     f"(target {calls.skipped}, {rollouts} matching rollouts)")
        arms["easycache"] = self.easycache_model(self.easycache_threshold)
        figures["easycache_threshold"] = self.easycache_threshold
        times = {arm: [] for arm in arms}
        repeats = self.scale.rollout_repeats if first_video else 1
        for repeat in range(repeats):
            for arm, model in arms.items():
                if times[arm]:
                    clock.require(statistics.median(times[arm]), f"{arm} rollout {repeat + 1}")
                _, seconds, calls = self.rollout(model, latent)
                times[arm].append(seconds)
                record_arm(figures, arm, times[arm], calls)
                if arm == "full":
                    self.full_rollout_seconds[tokens] = figures["arms"]["full"]["median_s"]
                self.results.save()
                self.say(f"{label}: {arm} {repeat + 1}/{repeats} {seconds:.2f} s, computed {calls.computed} of "
                         f"{calls.computed + calls.skipped} calls")

    def cache_check(self, latent) -> dict:
        """The cache's own work per call on this latent and device (CFG: two branches) and the host syncs it makes;
        its share of one computed call is added once a full rollout is timed."""
        seconds = time_cache_check(self.extension, latent, repeats=200, device=self.device)
        check = {"seconds_per_call": seconds, "host_syncs_per_call": None}
        if self.device.type == "cuda":
            call = cache_check_call(self.extension, latent.shape, self.device)
            check["host_syncs_per_call"] = count_host_syncs(lambda: [call(step) for step in range(1, 11)]) / 10
        return check

    def cached_share(self) -> float:
        """The computed share of the cached arm at the first video (1 when none was measured yet)."""
        for entry in self.results.data["measurements"].values():
            cached = entry["figures"].get("arms", {}).get("cachedsearch")
            if cached:
                return 1 / cached["ideal_speedup"]
        return 1.0

    def predicted_full_rollout(self, tokens: int) -> float | None:
        """A full rollout's seconds at ``tokens``: measured there, else scaled by the forward's FLOPs from the size
        measured first; None before any full rollout was timed."""
        if tokens in self.full_rollout_seconds:
            return self.full_rollout_seconds[tokens]
        if not self.full_rollout_seconds:
            return None
        measured_tokens, seconds = next(iter(self.full_rollout_seconds.items()))
        spec, text = self.scale.model, self.scale.text_tokens
        return seconds * forward_flops(spec, tokens, text) / forward_flops(spec, measured_tokens, text)

    # -- 2. search -----------------------------------------------------------------------------------------------

    def measure_search(self, entry: dict, clock: Clock) -> None:
        figures = entry["figures"]
        video, count = self.scale.videos[0], self.scale.candidates
        latent = self.latent(video)
        verifier = self.managed_image_reward()
        prompt = self.scale.image_reward_prompt
        figures.update(video=size_name(video), candidates=count, steps=self.scale.steps, tau=self.tau,
                       verifier=f"ImageReward ({self.scale.verifier_dtype}), {VERIFIER_FRAMES} frames per candidate",
                       memory_kind=self.memory.kind)
        if video not in self.warm_videos:
            self.rollout(self.model, latent)  # loads the model onto the device
            self.warm_videos.add(video)
        (samples, full_seconds, full_calls), rollout_peak, _ = self.memory.peak_during(
            lambda: self.rollout(self.model, latent, SEARCH_SEED))
        self.decode(samples)  # loads the VAE
        (frames, decode_seconds), decode_peak, _ = self.memory.peak_during(
            lambda: self.timed(lambda: self.decode(samples)))
        judge = self.extension.cachedsearch_core.judge.FrameJudge(verifier, prompt, VERIFIER_FRAMES)
        judge.score(frames)  # loads the verifier
        _, score_seconds = self.timed(lambda: judge.score(frames))
        candidate_seconds = full_seconds + decode_seconds + score_seconds
        figures["full_candidate"] = {"rollout_s": full_seconds, "decode_s": decode_seconds, "score_s": score_seconds,
                                     "total_s": candidate_seconds, "calls": full_calls.computed,
                                     "peak_bytes": rollout_peak, "decode_peak_bytes": decode_peak}
        figures["full_best_of_n_s"] = count * candidate_seconds
        self.results.save()
        self.say(f"search: one full candidate {candidate_seconds:.2f} s (rollout {full_seconds:.2f}, decode "
                 f"{decode_seconds:.2f}, score {score_seconds:.2f})")

        clock.require(count * (full_seconds * self.cached_share() + decode_seconds + score_seconds) + full_seconds,
                      f"the search over {count} candidates")
        stages, peaks = {}, {}
        cached = self.cached_model()

        def stage(name, work):
            # each stage's own peak, so the search's peak says which stage holds the memory
            (result, stages[f"{name}_s"]), peaks[name], _ = self.memory.peak_during(lambda: self.timed(work))
            return result

        drafts, candidates, _ = stage("drafts", lambda: self.run(
            "CachedSearchSampler", model=cached, seed=SEARCH_SEED, num_candidates=count, **self.sampling(latent)))
        images = stage("decode", lambda: self.decode(drafts))
        ranking, _ = stage("scoring", lambda: self.run(
            "CachedSearchVerifier", images=images, candidates=candidates, prompt=prompt, verifier=verifier,
            frames_per_candidate=VERIFIER_FRAMES))
        _, seed, _ = stage("commit", lambda: self.run(
            "CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit"))
        search_peak = max(peaks.values())
        search_seconds = sum(stages.values())
        draft_computed = sum(draft.calls_computed for draft in candidates.drafts)
        draft_made = sum(draft.calls_computed + draft.calls_skipped for draft in candidates.drafts)
        draft_seconds = stages["drafts_s"] / count
        figures["search"] = dict(stages, total_s=search_seconds, delivered_seed=seed, peak_bytes=search_peak,
                                 stage_peak_bytes=peaks,
                                 draft_calls_computed=draft_computed, draft_calls_made=draft_made)
        figures["share_of_full_best_of_n"] = search_seconds / figures["full_best_of_n_s"]
        figures["calls_share"] = (draft_computed + full_calls.computed) / (count * full_calls.computed)
        figures["formula_share"] = (count * draft_seconds + full_seconds) / (count * full_seconds)
        figures["peak_ratio"] = search_peak / rollout_peak
        self.results.save()
        self.say(f"search: {search_seconds:.1f} s = {100 * figures['share_of_full_best_of_n']:.1f} % of full "
                 f"best-of-{count} ({figures['full_best_of_n_s']:.1f} s); peak memory {search_peak / GIB:.2f} GiB "
                 f"vs {rollout_peak / GIB:.2f} GiB for one rollout")

    def managed_image_reward(self):
        """ImageReward as CachedSearch Load ImageReward hands it to the Verifier (ComfyUI's model management owns
        its weights): the real architecture with random weights, or the tiny one in the toy run."""
        model = self.image_reward(self.model_management.unet_offload_device())
        return self.extension.nodes.verifier_models.ManagedVerifier(model, model, "ImageReward")

    def image_reward(self, device):
        import torch

        dtype = getattr(torch, self.scale.verifier_dtype)
        if self.scale.name == "real":
            from bench.verifier_cost import build

            return build(dtype).to(device)
        from cachedsearch_core.image_reward import ImageReward
        from scripts.tiny_image_reward import write_tiny_image_reward

        checkpoint = write_tiny_image_reward(self.base / "models" / "image_reward")
        return ImageReward.from_files(checkpoint, device=device, dtype=dtype)

    def video_score(self, device):
        import torch

        dtype = getattr(torch, self.scale.verifier_dtype)
        if self.scale.name == "real":
            from bench.video_score_cost import TEXT_LAYERS, VISION_LAYERS, random_video_score

            return random_video_score(VISION_LAYERS, TEXT_LAYERS, dtype, device)
        from cachedsearch_core.video_score import VideoScore
        from scripts.tiny_video_score import write_tiny_video_score

        folder = self.base / "models" / "video_score" / "VideoScore-v1.1"
        write_tiny_video_score(folder)
        model = VideoScore.from_folder(folder, dtype=dtype)
        model.network.to(device)
        return model

    # -- 3. verifiers --------------------------------------------------------------------------------------------

    def measure_verifiers(self, entry: dict, clock: Clock) -> None:
        from bench.video_score_cost import PROMPT
        from cachedsearch_core.judge import FrameJudge

        figures = entry["figures"]
        frames, height, width = self.scale.verifier_clip
        clip = self.torch.rand((frames, height, width, 3), generator=self.torch.Generator().manual_seed(1))
        figures.update(clip=f"{min(frames, VERIFIER_FRAMES)} of {frames} frames at {width}x{height}",
                       dtype=self.scale.verifier_dtype, memory_kind=self.memory.kind, verifiers={})
        self.free_memory()
        # Each verifier judges the clip as a search does (FrameJudge): its own frames of the clip, and one score.
        verifiers = (
            ("ImageReward", self.image_reward, self.scale.image_reward_prompt),
            ("VideoScore-v1.1", self.video_score, PROMPT),
        )
        for name, build, prompt in verifiers:
            figures["verifiers"][name] = row = {}
            self.measure_verifier(name, build, lambda model, prompt=prompt: FrameJudge(model, prompt,
                                                                                     VERIFIER_FRAMES).score(clip),
                                  row, clock)
            self.free_memory()

    def measure_verifier(self, name: str, build, score, row: dict, clock: Clock) -> None:
        """Builds one verifier on the device, scores the clip once to warm up, then twice more, timed and with the
        memory peak; fills ``row``."""
        model, build_seconds = self.timed(lambda: build(self.device))
        network = model.network if hasattr(model, "network") else model
        parameters = sum(parameter.numel() for parameter in network.parameters())
        weights = sum(parameter.numel() * parameter.element_size() for parameter in network.parameters())
        _, first_seconds = self.timed(lambda: score(model))
        row.update(parameters=parameters, weights_bytes=weights, build_s=build_seconds, first_score_s=first_seconds,
                   seconds=[])
        for _ in range(2):
            clock.require(first_seconds, f"another {name} scoring")
            (_, seconds), peak, before = self.memory.peak_during(lambda: self.timed(lambda: score(model)))
            row["seconds"].append(seconds)
            row.update(seconds_per_candidate=statistics.median(row["seconds"]), peak_bytes=peak,
                       scoring_growth_bytes=max(peak - before, 0))
            self.results.save()
        self.say(f"verifiers: {name} {row['seconds_per_candidate']:.3f} s per candidate, peak "
                 f"{row['peak_bytes'] / GIB:.2f} GiB ({count(parameters)} parameters)")


def record_arm(figures: dict, arm: str, times: list, calls) -> None:
    """One arm's row from its rollout times and calls (StageCalls); the full arm's fills the cache check's share."""
    made = calls.computed + calls.skipped
    median = statistics.median(times)
    row = {"seconds": times, "median_s": median, "calls_made": made, "calls_computed": calls.computed,
           "seconds_per_computed_call": median / calls.computed, "ideal_speedup": made / calls.computed}
    full = figures["arms"].get("full")
    if full is not None and arm != "full":
        row["wall_speedup"] = full["median_s"] / median
        row["wall_over_ideal"] = row["wall_speedup"] / row["ideal_speedup"]
    if arm == "full":
        check = figures["cache_check"]
        check["share_of_computed_call"] = check["seconds_per_call"] / row["seconds_per_computed_call"]
    figures["arms"][arm] = row


def video_tokens(latent_shape) -> int:
    """Wan's sequence length for a [B, C, T, H, W] latent: patches of 1 x 2 x 2."""
    return latent_shape[2] * (latent_shape[3] // 2) * (latent_shape[4] // 2)


def forward_flops(spec: dict, tokens: int, text_tokens: int) -> float:
    """Multiply-adds x 2 of one Wan forward on one branch: the blocks' linear layers (self- and cross-attention
    projections, the feed-forward) and the attention products."""
    dim, ffn = spec["dim"], spec["ffn_dim"]
    linear = 2 * tokens * (8 * dim * dim + 2 * dim * ffn)
    attention = 4 * tokens * tokens * dim + 4 * tokens * text_tokens * dim
    return spec["num_layers"] * (linear + attention)


def count_host_syncs(work) -> int:
    """Operations in ``work`` that make the host wait for the GPU (PyTorch's sync debug mode reports each)."""
    import torch

    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            work()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(warning.message) for warning in caught)


def describe(device) -> dict:
    """What ran the check: device, software versions, ComfyUI's attention and comfy-kitchen's backends."""
    import comfy.ldm.modules.attention
    import torch

    root = comfy_runtime.comfyui_root()
    version_file = root / "comfyui_version.py"
    info = {"device": device.type, "torch": torch.__version__, "python": platform.python_version(),
            "comfyui": version_file.read_text().split('"')[1] if version_file.exists() else "?",
            "attention": comfy.ldm.modules.attention.optimized_attention.__name__}
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        info.update(name=properties.name, memory_bytes=properties.total_memory, cuda=torch.version.cuda,
                    capability=f"{properties.major}.{properties.minor}")
    else:
        info.update(name=f"CPU ({os.cpu_count()} cores, torch threads {torch.get_num_threads()})")
    try:
        import comfy_kitchen

        info["comfy_kitchen"] = {name: "available" if status.get("available") and not status.get("disabled")
                                 else ("disabled" if status.get("disabled") else
                                       f"unavailable: {status.get('unavailable_reason')}")
                                 for name, status in comfy_kitchen.list_backends().items()}
    except ImportError:
        info["comfy_kitchen"] = None  # ComfyUI 0.3.75 does not use it
    return info


def plan(check: GpuCheck, scale: Scale) -> list:
    """(key, title, cap in seconds, seconds kept for the measurements after it, run), in the order they run: each
    gets its cap or what is left; the second video only what the search and the verifiers leave ("if time
    allows")."""
    first, *more = scale.videos
    limits = scale.limits
    model = f"{scale.model['name']}-sized, random {scale.weight_dtype} weights"
    later = limits["search"] + limits["verifiers"]
    steps = [(f"rollouts_{size_name(first)}", f"Rollouts, {model}, {size_name(first)}", limits["rollouts"], 0.0,
              lambda entry, clock: check.measure_rollouts(first, entry, clock))]
    for video in more:
        steps.append((f"rollouts_{size_name(video)}", f"Rollouts, {model}, {size_name(video)}", math.inf, later,
                      lambda entry, clock, video=video: check.measure_rollouts(video, entry, clock)))
    steps.append(("search", f"Search, N = {scale.candidates}, {model}, {size_name(first)}", limits["search"], 0.0,
                  check.measure_search))
    steps.append(("verifiers", f"Verifiers ({'real size' if scale.name == 'real' else 'tiny'}, random weights)",
                  limits["verifiers"], 0.0, check.measure_verifiers))
    return steps


def size_name(video) -> str:
    return "x".join(map(str, video))


def run_check(args, scale: Scale) -> dict:
    started = args.started if args.started is not None else time.time()
    budget = scale.budget if args.budget is None else args.budget
    total = Clock(budget - (time.time() - started))  # the set-up before this process counts too
    logging.disable(logging.INFO)
    import torch

    if args.device == "auto":
        device_name = "cuda" if torch.cuda.is_available() else "cpu"
    else:
        device_name = args.device
    if scale.name == "real" and device_name != "cuda":
        raise SystemExit("bench.gpu_check: the real sizes need a CUDA GPU (hours on a CPU); --toy runs the same check "
                         "at toy size on any device")
    results = Results(args.out, {"scale": scale.name, "tau": args.tau, "budget_s": budget,
                                 "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds")})
    try:
        check = GpuCheck(scale, device_name, args.tau, results)
    except Exception:
        results.data["check"]["set_up_failed"] = traceback.format_exc(limit=-8)
        results.save()
        raise
    results.data["check"].update(describe(check.device), build_s=check.build_seconds,
                                 model_parameters=check.parameters)
    results.save()
    check.say(f"{results.data['check']['name']}: model built in {check.build_seconds:.1f} s; "
              f"{total.left():.0f} s left")
    steps = [step for step in plan(check, scale) if not args.only or step[0] in args.only]
    run_measurements(steps, results, total, scale.final_margin, CancelAt, check.start_afresh, check.say)
    return results.data


def run_measurements(steps, results: Results, total: Clock, final_margin: float, guard, after_failure, say) -> None:
    """Runs ``steps`` (see plan) in order, each under its limit: ``guard(clock)`` stops work still running at the
    limit (raising TimeLimitReached). Each ends done, cut short (with what it measured), skipped or failed, with the
    reason; a failure does not stop the others (``after_failure()`` runs after it)."""
    for key, title, cap, kept, measure in steps:
        left = total.left() - final_margin
        limit = min(cap, left - kept)
        entry = results.start(key, title, max(limit, 0))
        began = time.monotonic()
        clock = Clock(limit)
        try:
            if limit <= 0:
                raise OutOfTime(f"{max(left, 0):.0f} s were left, {kept:.0f} s of them kept for the measurements "
                                "after this one" if kept else "the check's total budget is spent")
            with guard(clock):
                measure(entry, clock)
            entry["status"] = "done"
        except OutOfTime as reason:
            cut = has_figures(entry) or isinstance(reason, TimeLimitReached)
            entry["status"] = "cut short" if cut else "skipped"
            entry["reason"] = str(reason)
        except Exception as error:  # one measurement's failure must not cost the others
            entry["status"] = "failed"
            entry["reason"] = f"{type(error).__name__}: {error}"
            entry["traceback"] = traceback.format_exc(limit=-8)
        entry["seconds"] = round(time.monotonic() - began, 1)
        results.save()
        say(f"{key}: {entry['status']} in {entry['seconds']:.0f} s"
            + (f" ({entry['reason']})" if "reason" in entry else ""))
        if entry["status"] == "failed":
            after_failure()


def has_figures(entry: dict) -> bool:
    return any(value not in (None, {}, []) for value in entry["figures"].values())


# -- markdown ------------------------------------------------------------------------------------------------------


def markdown(data: dict) -> str:
    check = data["check"]
    name = check.get("name", "?")
    lines = [f"# GPU check on {name} ({check.get('scale')} scale)", ""]
    if "set_up_failed" in check:
        lines += ["The set-up failed:", "", "```", check["set_up_failed"].rstrip(), "```"]
    if "torch" in check:
        kitchen = check.get("comfy_kitchen")
        lines.append(f"{check['started']}; torch {check['torch']}"
                     + (f", CUDA {check['cuda']}" if check.get("cuda") else "")
                     + f", ComfyUI {check['comfyui']}, attention {check['attention']}"
                     + (", comfy-kitchen " + ", ".join(f"{k} {v}" for k, v in kitchen.items()) if kitchen else "")
                     + f"; budget {check['budget_s']:.0f} s; model built in {check['build_s']:.0f} s "
                     f"({count(check['model_parameters'])} parameters)")
    for key, entry in data["measurements"].items():
        lines += ["", f"## {entry['title']}: {entry['status']}"
                  + (f" in {entry['seconds']:.0f} s" if "seconds" in entry else "")
                  + f" (limit {entry['limit_s']:.0f} s), on {name}"]
        if "reason" in entry:
            lines.append(f"\n{entry['status']}: {entry['reason']}")
        figures = entry["figures"]
        if key.startswith("rollouts") and figures.get("arms"):
            lines += rollout_lines(figures)
        elif key == "search" and figures.get("full_candidate"):
            lines += search_lines(figures)
        elif key == "verifiers" and figures.get("verifiers"):
            lines += verifier_lines(figures)
    return "\n".join(lines)


def count(parameters: int) -> str:
    return f"{parameters / 1e9:.2f} B" if parameters >= 1e9 else f"{parameters / 1e6:.2f} M"


def rollout_lines(figures: dict) -> list:
    first = figures.get("first_rollout_s")
    lines = ["", f"latent {figures['latent']} ({figures['tokens']} tokens), {figures['steps']} steps, {SAMPLER}/"
             f"{SCHEDULER}, cfg {CFG:g}, shift {SHIFT:g}; median of {len(figures['arms']['full']['seconds'])}"
             + (f"; first full rollout {first:.2f} s (model load included)" if first is not None else "")
             + (f"; {figures['note']}" if "note" in figures else ""),
             "", "| arm | setting | computed / made calls | median s | s per computed call | wall speed-up | ideal "
             "speed-up | wall / ideal |", "|---|---|---|---|---|---|---|---|"]
    settings = {"full": "-", "cachedsearch": f"tau {figures['tau']:g}",
                "easycache": f"reuse_threshold {figures.get('easycache_threshold') or 0:.4f}"}
    for arm, row in figures["arms"].items():
        lines.append(f"| {arm} | {settings[arm]} | {row['calls_computed']}/{row['calls_made']} | {row['median_s']:.2f} "
                     f"| {row['seconds_per_computed_call']:.4f} | {row.get('wall_speedup', 1.0):.2f}x | "
                     f"{row['ideal_speedup']:.2f}x | "
                     + (f"{row['wall_over_ideal']:.2f} |" if "wall_over_ideal" in row else "- |"))
    check = figures.get("cache_check")
    if check:
        syncs = check["host_syncs_per_call"]
        share = check.get("share_of_computed_call")
        lines += ["", f"cache check per call (two branches, this latent): {check['seconds_per_call'] * 1e3:.3f} ms"
                  + (f" = {100 * share:.3f} % of one computed call" if share is not None else "")
                  + "; host syncs per call: " + ("not counted on the CPU" if syncs is None else f"{syncs:g}")]
    return lines


def stage_peak_text(stage_peaks: dict | None, one_decode_peak: int | None) -> str:
    """The search's peak by stage (older results have none)."""
    if not stage_peaks:
        return ""
    text = "; by stage: " + ", ".join(f"{name} {peak / GIB:.2f}" for name, peak in stage_peaks.items()) + " GiB"
    return text + (f" (one candidate's decode {one_decode_peak / GIB:.2f} GiB)" if one_decode_peak else "")


def search_lines(figures: dict) -> list:
    full = figures["full_candidate"]
    lines = ["", f"{figures['video']}, {figures['steps']} steps, tau {figures['tau']:g}, {figures['verifier']}", "",
             "| arm | sampling s | decode s | scoring s | commit s | total s |", "|---|---|---|---|---|---|",
             f"| full, one candidate | {full['rollout_s']:.2f} | {full['decode_s']:.2f} | {full['score_s']:.2f} | - | "
             f"{full['total_s']:.2f} |",
             f"| full best-of-{figures['candidates']} ({figures['candidates']} x one) | | | | - | "
             f"{figures['full_best_of_n_s']:.2f} |"]
    search = figures.get("search")
    if search:
        lines += [f"| CachedSearch, {figures['candidates']} drafts + commit | {search['drafts_s']:.2f} | "
                  f"{search['decode_s']:.2f} | {search['scoring_s']:.2f} | {search['commit_s']:.2f} | "
                  f"{search['total_s']:.2f} |", "",
                  f"search / full best-of-{figures['candidates']}: **{100 * figures['share_of_full_best_of_n']:.1f} "
                  f"%** of the wall time; transformer calls {100 * figures['calls_share']:.1f} % (drafts computed "
                  f"{search['draft_calls_computed']}/{search['draft_calls_made']} calls, plus a commit); the report's "
                  f"Sec. 3.3 formula with these C_c and C_f {100 * figures['formula_share']:.1f} % (report: 63.3 % "
                  "at N = 8)",
                  f"peak memory ({figures['memory_kind']}): search {search['peak_bytes'] / GIB:.2f} GiB, one full "
                  f"rollout {full['peak_bytes'] / GIB:.2f} GiB, ratio {figures['peak_ratio']:.2f}"
                  + stage_peak_text(search.get("stage_peak_bytes"), full.get("decode_peak_bytes"))]
    return lines


def verifier_lines(figures: dict) -> list:
    lines = ["", f"{figures['clip']} per candidate, {figures['dtype']}; memory: {figures['memory_kind']}", "",
             "| verifier | parameters | weights GiB | first call s | s per candidate | peak while scoring GiB | growth "
             "while scoring GiB |", "|---|---|---|---|---|---|---|"]
    for name, row in figures["verifiers"].items():
        if "seconds_per_candidate" not in row:
            continue
        lines.append(f"| {name} | {count(row['parameters'])} | {row['weights_bytes'] / GIB:.2f} | "
                     f"{row['first_score_s']:.3f} | {row['seconds_per_candidate']:.3f} | {row['peak_bytes'] / GIB:.2f} "
                     f"| {row['scoring_growth_bytes'] / GIB:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, required=True, help="folder for gpu_check.json and gpu_check.md")
    parser.add_argument("--toy", action="store_true", help="toy size: tiny Wan, 2 steps, N = 2 (the test's run)")
    parser.add_argument("--budget", type=float, help="total seconds from --started (default 540; toy 300)")
    parser.add_argument("--started", type=float, help="epoch seconds the command started (default: now)")
    parser.add_argument("--tau", type=float, default=0.10)
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    parser.add_argument("--only", type=lambda text: text.split(","), default=[],
                        help="comma-separated measurements to run (a rerun's: e.g. search,verifiers); keys as in "
                        "gpu_check.json")
    args = parser.parse_args()
    scale = TOY if args.toy else REAL
    keys = [f"rollouts_{size_name(video)}" for video in scale.videos] + ["search", "verifiers"]
    unknown = sorted(set(args.only) - set(keys))
    if unknown:
        parser.error(f"--only: unknown measurement(s) {', '.join(unknown)}; use some of {','.join(keys)}")
    data = run_check(args, scale)
    print(markdown(data), flush=True)
    failed = [key for key, entry in data["measurements"].items() if entry["status"] == "failed"]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
