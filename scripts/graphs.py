"""API-format ComfyUI graphs on the tiny test models (shared by the demo, tests and benchmarks)."""

from __future__ import annotations

import copy

from scripts.tiny_ltx2 import LTX2_TINY_CONFIG
from scripts.tiny_models import WAN21_T2V_FILE, WAN21_VAE_FILE, WAN22_A14B_FILES


def cached_wan_sampling(
    *, seed: int = 0, steps: int = 20, tau: float = 0.10, mode: str = "adaptive", warmup_steps: int = 5,
    cooldown_steps: int = 5, width: int = 64, height: int = 64, length: int = 9, filename_prefix: str = "cachedsearch",
) -> dict:
    """UNETLoader -> ModelSamplingSD3 -> Apply Cache -> KSampler -> VAEDecode -> SaveImage on tiny Wan 2.1."""
    return {
        "unet": {"class_type": "UNETLoader", "inputs": {"unet_name": WAN21_T2V_FILE, "weight_dtype": "default"}},
        "shift": {"class_type": "ModelSamplingSD3", "inputs": {"model": ["unet", 0], "shift": 8.0}},
        "cache": {
            "class_type": "CachedSearchApplyCache",
            "inputs": {
                "model": ["shift", 0], "mode": mode, "tau": tau, "warmup_steps": warmup_steps,
                "cooldown_steps": cooldown_steps, "static_interval": 2,
            },
        },
        "positive": {"class_type": "CachedSearchTestConditioning", "inputs": {"text_seed": 1, "tokens": 8, "pooled": False}},
        "negative": {"class_type": "CachedSearchTestConditioning", "inputs": {"text_seed": 2, "tokens": 8, "pooled": False}},
        "latent": {
            "class_type": "EmptyHunyuanLatentVideo",
            "inputs": {"width": width, "height": height, "length": length, "batch_size": 1},
        },
        "sampler": {
            "class_type": "KSampler",
            "inputs": {
                "model": ["cache", 0], "seed": seed, "steps": steps, "cfg": 5.0, "sampler_name": "euler",
                "scheduler": "simple", "positive": ["positive", 0], "negative": ["negative", 0],
                "latent_image": ["latent", 0], "denoise": 1.0,
            },
        },
        "vae": {"class_type": "VAELoader", "inputs": {"vae_name": WAN21_VAE_FILE}},
        "decode": {"class_type": "VAEDecode", "inputs": {"samples": ["sampler", 0], "vae": ["vae", 0]}},
        "save": {"class_type": "SaveImage", "inputs": {"images": ["decode", 0], "filename_prefix": filename_prefix}},
    }


def wan_search(
    *, seed: int = 0, num_candidates: int = 3, scores: str = "0.1 0.9 0.5", steps: int = 12, tau: float = 0.3,
    mode: str = "commit", denoise: float = 1.0, filename_prefix: str = "cachedsearch_search",
    verifier_prompt: str | None = None,
) -> dict:
    """Apply Cache -> CachedSearch Sampler -> drafts decoded -> ranking -> Recommit -> save.

    The ranking comes from ``scores`` (Ranking From Scores) or, with ``verifier_prompt``, from the
    ImageReward verifier on the decoded drafts.
    """
    graph = cached_wan_sampling(seed=seed, steps=steps, tau=tau, warmup_steps=2, cooldown_steps=2,
                                filename_prefix=filename_prefix)
    del graph["sampler"]
    graph["search"] = {
        "class_type": "CachedSearchSampler",
        "inputs": {
            "model": ["cache", 0], "positive": ["positive", 0], "negative": ["negative", 0],
            "latent_image": ["latent", 0], "seed": seed, "num_candidates": num_candidates, "steps": steps,
            "cfg": 5.0, "sampler_name": "euler", "scheduler": "simple", "denoise": denoise,
        },
    }
    graph["decode_drafts"] = {"class_type": "VAEDecode", "inputs": {"samples": ["search", 0], "vae": ["vae", 0]}}
    graph["preview_drafts"] = {"class_type": "PreviewImage", "inputs": {"images": ["decode_drafts", 0]}}
    if verifier_prompt is None:
        graph["ranking"] = {"class_type": "CachedSearchRankingFromScores",
                            "inputs": {"candidates": ["search", 1], "scores": scores}}
    else:
        graph["load_verifier"] = {"class_type": "CachedSearchLoadImageReward",
                                  "inputs": {"ckpt_name": "ImageReward.pt", "dtype": "fp32"}}
        graph["ranking"] = {"class_type": "CachedSearchVerifier", "inputs": {
            "images": ["decode_drafts", 0], "candidates": ["search", 1], "prompt": verifier_prompt,
            "verifier": ["load_verifier", 0], "frames_per_candidate": 8}}
    graph["recommit"] = {"class_type": "CachedSearchRecommit",
                         "inputs": {"candidates": ["search", 1], "ranking": ["ranking", 0], "mode": mode}}
    graph["decode"]["inputs"]["samples"] = ["recommit", 0]
    return graph


def stock_wan_ksampler(*, seed: int, steps: int = 12, filename_prefix: str = "stock") -> dict:
    """The same tiny Wan graph with a stock KSampler on the plain model: the reference for a commit."""
    graph = cached_wan_sampling(seed=seed, steps=steps, filename_prefix=filename_prefix)
    del graph["cache"]
    graph["sampler"]["inputs"]["model"] = ["shift", 0]
    return graph


def _tiny_ltx2(graph: dict) -> None:
    """LTX-2 at tiny sizes: 9 frames of video and sound at 64 x 64 (the tiny distilled LoRA at the template's
    strength)."""
    for node in graph.values():
        if node["class_type"] == "EmptyLTXVLatentVideo":
            node["inputs"].update(width=64, height=64, length=9)
        if node["class_type"] == "LTXVEmptyLatentAudio":
            node["inputs"]["frames_number"] = 9


def tiny_workflow_variant(api: dict, pooled: bool) -> dict:
    """The workflow on tiny weights: synthetic conditioning instead of text encoders, small sizes, N = 3."""
    graph = copy.deepcopy(api)
    for key in [k for k, node in graph.items()
                if node["class_type"] in ("CLIPLoader", "DualCLIPLoader", "LTXAVTextEncoderLoader")]:
        del graph[key]
    if any(node["class_type"] == "LTXVConditioning" for node in graph.values()):
        _tiny_ltx2(graph)
    for index, (key, node) in enumerate([(k, n) for k, n in graph.items() if n["class_type"] == "CLIPTextEncode"]):
        graph[key] = {"class_type": "CachedSearchTestConditioning",
                      "inputs": {"text_seed": index + 1, "tokens": 8, "pooled": pooled}}
    classes = {node["class_type"] for node in graph.values()}
    for node in graph.values():
        inputs = node["inputs"]
        if node["class_type"] in ("EmptyHunyuanLatentVideo", "Wan22ImageToVideoLatent", "WanImageToVideo"):
            inputs.update(width=64, height=64, length=9)
        if node["class_type"] in ("CachedSearchSampler", "CachedSearchSamplerAdvanced", "CachedSearchSamplerExperts"):
            inputs["num_candidates"] = 3
            if "steps" in inputs:
                inputs["steps"] = 8
            if "split_step" in inputs:
                inputs["split_step"] = 4
        if node["class_type"] == "BasicScheduler":
            inputs["steps"] = 8
        if node["class_type"] in ("CachedSearchCalibrate", "CachedSearchCalibrateExperts"):
            inputs.update(seeds=2, steps=8, **({"split_step": 4} if "split_step" in inputs else {}))
            if "warmup_steps" in inputs:  # the shipped 5 and 5 leave none of 8 steps to skip: the node refuses them
                inputs.update(warmup_steps=2, cooldown_steps=2)
            if "clip" in inputs:  # no tiny text encoder: the first prompt, on the search's conditioning
                del inputs["clip"]
                search = next(other for other in graph.values() if other["class_type"] == "CachedSearchSampler")
                inputs.update(positive=search["inputs"]["positive"], prompt=inputs["prompt"].splitlines()[0])
            inputs.update({name: "2" for name in ("taus", "taus_high", "taus_low") if name in inputs})
        if node["class_type"] == "CachedSearchPruningPlan":
            inputs.update(keep=2, preview_frames=2)  # of the 3 candidates and the 3 latent frames
            for cache in [n for n in graph.values() if n["class_type"] == "CachedSearchApplyCache"]:
                cache["inputs"].update(warmup_steps=2, cooldown_steps=2)  # so step 3 of 8 lies where it skips
        if node["class_type"] == "VAEDecodeTiled":
            inputs.update(tile_size=64, overlap=0, temporal_size=8, temporal_overlap=4)
        if node["class_type"] == "CachedSearchTestConditioning" and "LTXVConditioning" in classes:
            inputs["width"] = 2 * LTX2_TINY_CONFIG["caption_channels"]  # Gemma's width after LTX-2's processing
    final_decode = next(key for key, node in graph.items() if node["class_type"] == "CreateVideo")
    graph["frames"] = {"class_type": "SaveImage", "inputs": {"images": graph[final_decode]["inputs"]["images"],
                                                            "filename_prefix": "workflow_frames"}}
    if "audio" in graph[final_decode]["inputs"]:  # LTX-2's sound, its samples' bits as they are
        graph["sound"] = {"class_type": "CachedSearchTestSaveWaveform", "inputs": {
            "audio": graph[final_decode]["inputs"]["audio"], "filename_prefix": "workflow_sound"}}
    return graph


def combined_verifier_search(*, seed: int = 0, prompt: str = "a red ball on the grass", max_frames: int = 24,
                             normalisation: str = "rank average",
                             filename_prefix: str = "cachedsearch_combined") -> dict:
    """The search ranked by ImageReward and VideoScore together (Combine Scores), then Recommit."""
    graph = wan_search(seed=seed, verifier_prompt=prompt, filename_prefix=filename_prefix)
    graph["load_video_score"] = {"class_type": "CachedSearchLoadVideoScore",
                                 "inputs": {"model_folder": "VideoScore-v1.1", "dtype": "default"}}
    graph["video_ranking"] = {"class_type": "CachedSearchVideoVerifier", "inputs": {
        "images": ["decode_drafts", 0], "candidates": ["search", 1], "prompt": prompt,
        "verifier": ["load_video_score", 0], "max_frames": max_frames, "rank_by": "average of the five aspects",
        "aspect_weights": "1, 1, 1, 1, 1"}}
    graph["combined"] = {"class_type": "CachedSearchCombineScores", "inputs": {
        "candidates": ["search", 1], "ranking_1": ["ranking", 0], "weight_1": 1.0, "ranking_2": ["video_ranking", 0],
        "weight_2": 1.0, "normalisation": normalisation}}
    graph["recommit"]["inputs"]["ranking"] = ["combined", 0]
    return graph


def calibrate_wan(*, seed: int = 0, seeds: int = 3, steps: int = 6, taus: str = "0.1 0.5", capture_target: float = 0.9,
                  prompt: str = "a red ball on the grass") -> dict:
    """CachedSearch Calibrate on tiny Wan 2.1 with the tiny ImageReward, its chart previewed and its tau wired into
    Apply Cache for a one-candidate search with the same steps, sampler and scheduler."""
    graph = cached_wan_sampling(seed=seed, steps=steps, tau=0.1, warmup_steps=1, cooldown_steps=1)
    for unused in ("sampler", "decode", "save"):
        del graph[unused]
    graph["load_verifier"] = {"class_type": "CachedSearchLoadImageReward",
                              "inputs": {"ckpt_name": "ImageReward.pt", "dtype": "fp32"}}
    graph["calibrate"] = {"class_type": "CachedSearchCalibrate", "inputs": {
        "model": ["shift", 0], "positive": ["positive", 0], "negative": ["negative", 0], "latent_image": ["latent", 0],
        "vae": ["vae", 0], "verifier": ["load_verifier", 0], "prompt": prompt, "first_seed": seed, "seeds": seeds,
        "steps": steps, "cfg": 5.0, "sampler_name": "euler", "scheduler": "simple", "denoise": 1.0, "taus": taus,
        "capture_target": capture_target, "warmup_steps": 1, "cooldown_steps": 1, "frames_per_candidate": 8}}
    graph["chart"] = {"class_type": "PreviewImage", "inputs": {"images": ["calibrate", 2]}}
    graph["cache"]["inputs"]["tau"] = ["calibrate", 0]
    graph["search"] = {"class_type": "CachedSearchSampler", "inputs": {
        "model": ["cache", 0], "positive": ["positive", 0], "negative": ["negative", 0], "latent_image": ["latent", 0],
        "seed": seed, "num_candidates": 1, "steps": steps, "cfg": 5.0, "sampler_name": "euler", "scheduler": "simple",
        "denoise": 1.0}}
    graph["search_report"] = {"class_type": "PreviewAny", "inputs": {"source": ["search", 2]}}
    return graph


def calibrate_a14b(*, seed: int = 0, seeds: int = 2, steps: int = 6, split_step: int = 3, taus: str = "0.1 2",
                   capture_target: float = 0.9, prompt: str = "a red ball on the grass") -> dict:
    """CachedSearch Calibrate (two experts) on the tiny Wan 2.2 A14B T2V experts with the tiny ImageReward, its chart
    previewed and its two taus wired into each expert's Apply Cache for a one-candidate two-expert search with the
    same settings."""
    graph = {}
    for index, (expert, file_name) in enumerate(zip(("high", "low"), WAN22_A14B_FILES["t2v"])):
        graph[f"unet_{expert}"] = {"class_type": "UNETLoader", "inputs": {"unet_name": file_name,
                                                                         "weight_dtype": "default"}}
        graph[f"shift_{expert}"] = {"class_type": "ModelSamplingSD3", "inputs": {"model": [f"unet_{expert}", 0],
                                                                                 "shift": 5.0}}
        graph[f"cache_{expert}"] = {"class_type": "CachedSearchApplyCache", "inputs": {
            "model": [f"shift_{expert}", 0], "mode": "adaptive", "tau": ["calibrate", index], "warmup_steps": 1,
            "cooldown_steps": 1, "static_interval": 2}}
    shared = {"positive": ["positive", 0], "negative": ["negative", 0], "latent_image": ["latent", 0],
              "steps": steps, "split_step": split_step, "cfg": 3.5, "sampler_name": "euler", "scheduler": "simple"}
    graph.update({
        "positive": {"class_type": "CachedSearchTestConditioning", "inputs": {"text_seed": 11, "tokens": 8,
                                                                             "pooled": False}},
        "negative": {"class_type": "CachedSearchTestConditioning", "inputs": {"text_seed": 12, "tokens": 8,
                                                                             "pooled": False}},
        "latent": {"class_type": "EmptyHunyuanLatentVideo", "inputs": {"width": 32, "height": 32, "length": 5,
                                                                       "batch_size": 1}},
        "vae": {"class_type": "VAELoader", "inputs": {"vae_name": WAN21_VAE_FILE}},
        "load_verifier": {"class_type": "CachedSearchLoadImageReward",
                          "inputs": {"ckpt_name": "ImageReward.pt", "dtype": "fp32"}},
        "calibrate": {"class_type": "CachedSearchCalibrateExperts", "inputs": {
            **shared, "model_high": ["shift_high", 0], "model_low": ["shift_low", 0], "vae": ["vae", 0],
            "verifier": ["load_verifier", 0], "prompt": prompt, "first_seed": seed, "seeds": seeds,
            "taus_high": taus, "taus_low": taus, "capture_target": capture_target, "warmup_steps_high": 1,
            "cooldown_steps_high": 1, "warmup_steps_low": 1, "cooldown_steps_low": 1, "frames_per_candidate": 4}},
        "chart": {"class_type": "PreviewImage", "inputs": {"images": ["calibrate", 3]}},
        "search": {"class_type": "CachedSearchSamplerExperts", "inputs": {
            **shared, "model_high": ["cache_high", 0], "model_low": ["cache_low", 0], "seed": seed,
            "num_candidates": 1}},
        "search_report": {"class_type": "PreviewAny", "inputs": {"source": ["search", 2]}},
    })
    return graph
