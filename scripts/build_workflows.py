"""Write the example workflows (GUI format in workflows/, API twins in workflows/api/).

    COMFYUI_PATH=.runtimes/comfyui-0.33.0 PYTHONPATH=$PWD/tests/runtime_stubs \
        .venv-comfyui-0.33.0/bin/python -m scripts.build_workflows

Each workflow is defined once below as an API graph with a layout; the GUI file
is derived from it with the live ``/object_info`` of a real ComfyUI server
running this extension, so widget order always matches the installed nodes.
Build with the newest runtime of the test matrix (ComfyUI 0.33.0): older
runtimes read the same files, ignoring the widget values and API inputs their
nodes do not declare (tests/test_workflows.py checks this on each runtime).
"""

from __future__ import annotations

import json
import pathlib
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, ltx_workflow, node_packs  # noqa: E402
from scripts.subgraph_workflow import wrap_in_subgraph  # noqa: E402
from scripts.workflow_format import GROUP_PADDING, api_to_gui, column_layout, gui_to_api  # noqa: E402

WORKFLOWS_DIR = REPO_ROOT / "workflows"
PROMPT = ("A red fox trots through fresh snow in a birch forest at sunrise, soft golden light, breath visible "
          "in the cold air, cinematic tracking shot")
NEGATIVE = "blurry, low quality, distorted, static, watermark, text, oversaturated, deformed limbs"

EXPLAIN = """### CachedSearch: explore cheap, commit full
The sampler generates **N candidate seeds** on a model wrapped with a step cache (about 2x cheaper each), the
verifier ranks those drafts, and **Recommit re-generates only the winner without the cache**, so the delivered
video is exactly what full best-of-N would have given for that seed, at roughly 60 % of its cost for N = 8.

**Models** (put them where ComfyUI's own tutorials say):
{models}
- `models/image_reward/ImageReward.pt` and `models/image_reward/bert-base-uncased/` (tokenizer files):
  `python custom_nodes/cachedsearch/scripts/download_image_reward.py ComfyUI/models`

**Settings that trade:** `num_candidates` N: more seeds find better videos, cost grows ~linearly (break-even
from N = 2). `tau`: higher skips more (faster drafts) but may reorder close candidates; {tau_advice}.
`mode` commit (default) delivers the full-quality winner; keep returns the cached draft, cheaper but with
slightly damped motion.

**Queueing again** searches new seeds: a search covers `seed` to `seed + N - 1`, and the seed's control is
`randomize`, so every queue (or batch count) explores a fresh range. Set it to `fixed` to reproduce a search;
`increment` would repeat N - 1 seeds of the previous one.
"""


def _verify_commit_save(decode: str, fps: float, prefix: str) -> dict:
    """Decode drafts -> Verifier (ImageReward, K 8) -> Recommit -> decode -> CreateVideo -> SaveVideo."""
    tiled = {"tile_size": 256, "overlap": 64, "temporal_size": 64, "temporal_overlap": 8} if decode == "VAEDecodeTiled" \
        else {}
    return {
        "decode_drafts": (decode, {"samples": ["search", 0], "vae": ["vae", 0], **tiled}, 3),
        "load_verifier": ("CachedSearchLoadImageReward", {"ckpt_name": "ImageReward.pt", "dtype": "fp32"}, 3),
        "verify": ("CachedSearchVerifier", {"images": ["decode_drafts", 0], "candidates": ["search", 1],
                                            "prompt": ["prompt", 0], "verifier": ["load_verifier", 0],
                                            "frames_per_candidate": 8}, 3),
        # The pick's widgets are listed so the layout leaves room for them: 0 delivers the verifier's choice.
        "recommit": ("CachedSearchRecommit", {"candidates": ["search", 1], "ranking": ["verify", 0],
                                              "mode": "commit", "pick": 0, "pick_among": 0, "wait_for_pick": False,
                                              "pick_timeout": 0}, 4),
        "decode": (decode, {"samples": ["recommit", 0], "vae": ["vae", 0], **tiled}, 4),
        "video": ("CreateVideo", {"images": ["decode", 0], "fps": fps}, 5),
        "save": ("SaveVideo", {"video": ["video", 0], "filename_prefix": prefix, "format": "auto", "codec": "auto"}, 5),
    }


def wan21_t2v() -> dict:
    nodes = {
        "unet": ("UNETLoader", {"unet_name": "wan2.1_t2v_1.3B_fp16.safetensors", "weight_dtype": "default"}, 0),
        "shift": ("ModelSamplingSD3", {"model": ["unet", 0], "shift": 8.0}, 0),
        "cache": ("CachedSearchApplyCache", {"model": ["shift", 0], "mode": "adaptive", "tau": 0.10,
                                             "warmup_steps": 5, "cooldown_steps": 5, "static_interval": 2}, 0),
        "clip": ("CLIPLoader", {"clip_name": "umt5_xxl_fp8_e4m3fn_scaled.safetensors", "type": "wan",
                                "device": "default"}, 0),
        "vae": ("VAELoader", {"vae_name": "wan_2.1_vae.safetensors"}, 0),
        "prompt": ("PrimitiveStringMultiline", {"value": PROMPT}, 1),
        "positive": ("CLIPTextEncode", {"text": ["prompt", 0], "clip": ["clip", 0]}, 1),
        "negative": ("CLIPTextEncode", {"text": NEGATIVE, "clip": ["clip", 0]}, 1),
        "latent": ("EmptyHunyuanLatentVideo", {"width": 832, "height": 480, "length": 81, "batch_size": 1}, 1),
        "search": ("CachedSearchSampler", {
            "model": ["cache", 0], "positive": ["positive", 0], "negative": ["negative", 0],
            "latent_image": ["latent", 0], "seed": 42, "num_candidates": 8, "steps": 50, "cfg": 5.0,
            "sampler_name": "uni_pc", "scheduler": "simple", "denoise": 1.0}, 2),
        **_verify_commit_save("VAEDecode", 16.0, "cachedsearch/wan21_t2v"),
    }
    models = ("- `models/diffusion_models/wan2.1_t2v_1.3B_fp16.safetensors`\n"
              "- `models/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors`\n"
              "- `models/vae/wan_2.1_vae.safetensors`")
    return _workflow(nodes, models, "0.10 is the default; the report calibrated 0.20 for Wan 2.1 1.3B")


def hunyuan_t2v() -> dict:
    nodes = {
        "unet": ("UNETLoader", {"unet_name": "hunyuan_video_t2v_720p_bf16.safetensors", "weight_dtype": "default"},
                 0),
        "cache": ("CachedSearchApplyCache", {"model": ["unet", 0], "mode": "adaptive", "tau": 0.05,
                                             "warmup_steps": 5, "cooldown_steps": 5, "static_interval": 2}, 0),
        "clip": ("DualCLIPLoader", {"clip_name1": "clip_l.safetensors",
                                    "clip_name2": "llava_llama3_fp8_scaled.safetensors", "type": "hunyuan_video",
                                    "device": "default"}, 0),
        "vae": ("VAELoader", {"vae_name": "hunyuan_video_vae_bf16.safetensors"}, 0),
        "prompt": ("PrimitiveStringMultiline", {"value": PROMPT}, 1),
        "positive": ("CLIPTextEncode", {"text": ["prompt", 0], "clip": ["clip", 0]}, 1),
        "guidance": ("FluxGuidance", {"conditioning": ["positive", 0], "guidance": 6.0}, 1),
        "latent": ("EmptyHunyuanLatentVideo", {"width": 720, "height": 480, "length": 61, "batch_size": 1}, 1),
        "guider": ("BasicGuider", {"model": ["cache", 0], "conditioning": ["guidance", 0]}, 2),
        "sampler": ("KSamplerSelect", {"sampler_name": "euler"}, 2),
        "sigmas": ("BasicScheduler", {"model": ["cache", 0], "scheduler": "simple", "steps": 50, "denoise": 1.0}, 2),
        "search": ("CachedSearchSamplerAdvanced", {"guider": ["guider", 0], "sampler": ["sampler", 0],
                                                   "sigmas": ["sigmas", 0], "latent_image": ["latent", 0],
                                                   "seed": 42, "num_candidates": 8}, 2),
        **_verify_commit_save("VAEDecodeTiled", 24.0, "cachedsearch/hunyuan_t2v"),
    }
    models = ("- `models/diffusion_models/hunyuan_video_t2v_720p_bf16.safetensors`\n"
              "- `models/text_encoders/clip_l.safetensors` and `models/text_encoders/llava_llama3_fp8_scaled.safetensors`\n"
              "- `models/vae/hunyuan_video_vae_bf16.safetensors`\n"
              "HunyuanVideo is guidance-distilled: guidance 6 goes through FluxGuidance, with no negative prompt (cfg 1).")
    return _workflow(nodes, models, "0.05 is the report's calibrated value for HunyuanVideo")


def wan22_ti2v() -> dict:
    nodes = {
        "unet": ("UNETLoader", {"unet_name": "wan2.2_ti2v_5B_fp16.safetensors", "weight_dtype": "default"}, 0),
        "shift": ("ModelSamplingSD3", {"model": ["unet", 0], "shift": 8.0}, 0),
        "cache": ("CachedSearchApplyCache", {"model": ["shift", 0], "mode": "adaptive", "tau": 0.10,
                                             "warmup_steps": 5, "cooldown_steps": 5, "static_interval": 2}, 0),
        "clip": ("CLIPLoader", {"clip_name": "umt5_xxl_fp8_e4m3fn_scaled.safetensors", "type": "wan",
                                "device": "default"}, 0),
        "vae": ("VAELoader", {"vae_name": "wan2.2_vae.safetensors"}, 0),
        "prompt": ("PrimitiveStringMultiline", {"value": PROMPT}, 1),
        "positive": ("CLIPTextEncode", {"text": ["prompt", 0], "clip": ["clip", 0]}, 1),
        "negative": ("CLIPTextEncode", {"text": NEGATIVE, "clip": ["clip", 0]}, 1),
        "latent": ("Wan22ImageToVideoLatent", {"vae": ["vae", 0], "width": 1280, "height": 704, "length": 121,
                                               "batch_size": 1}, 1),
        "search": ("CachedSearchSampler", {
            "model": ["cache", 0], "positive": ["positive", 0], "negative": ["negative", 0],
            "latent_image": ["latent", 0], "seed": 42, "num_candidates": 8, "steps": 50, "cfg": 5.0,
            "sampler_name": "uni_pc", "scheduler": "simple", "denoise": 1.0}, 2),
        **_verify_commit_save("VAEDecode", 24.0, "cachedsearch/wan22_ti2v"),
    }
    models = ("- `models/diffusion_models/wan2.2_ti2v_5B_fp16.safetensors`\n"
              "- `models/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors`\n"
              "- `models/vae/wan2.2_vae.safetensors`\n"
              "For image-to-video, connect a LoadImage to the start_image input of Wan22ImageToVideoLatent.")
    return _workflow(nodes, models, "0.10 is the report's calibrated value for Wan 2.2 5B")


# Wan 2.2 A14B: ComfyUI's official templates video_wan2_2_14B_t2v / _i2v (comfyui-workflow-templates).
A14B_NEGATIVE = ("色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，低质量，JPEG压缩残留，丑陋的，"
                 "残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，毁容的，形态畸形的肢体，手指融合，静止不动的画面，杂乱的背景，三条腿，"
                 "背景人很多，倒着走")
A14B_I2V_IMAGE = "video_wan2_2_14B_i2v_input_image.jpg"
A14B_LORA_NOTE = """
**Two experts.** The high-noise expert runs steps 0-10 of 20 and the low-noise expert the rest, exactly as the
official two-KSamplerAdvanced graph; each has its own Apply Cache, with warmup and cooldown counted within its
own steps. Computing the high expert's last step and the low expert's first keeps the switch clean, and the
high-noise expert takes the higher tau. The report (CachedSearch: Training-Free Cached Exploration for
Test-Time Search in Video Diffusion) did not measure Wan 2.2 A14B: these tau values are not calibrated on it.

**4-step LoRAs (fast path).** The two LoRA loaders are bypassed. To use the lightx2v 4-step LoRAs, un-bypass
both (Ctrl+B) and set the sampler to steps 4, split_step 2, cfg 1.0, and both caches' warmup and cooldown to
0 or mode off: with 2 steps per expert the cache has nothing to skip, but the search still pays off because
each draft is cheap.
"""


def _a14b_models(task: str, expert_files=None) -> dict:
    """Per expert: UNETLoader -> LoraLoaderModelOnly (bypassed) -> ModelSamplingSD3 shift 5 -> Apply Cache; with
    ``expert_files`` (two .gguf names) ComfyUI-GGUF's Unet Loader (GGUF) loads the experts instead."""
    from scripts.tiny_models import WAN22_A14B_FILES, WAN22_A14B_LORA_FILES

    caches = {"high": dict(tau=0.15, warmup_steps=2, cooldown_steps=1),
              "low": dict(tau=0.10, warmup_steps=1, cooldown_steps=2)}
    nodes = {}
    for index, expert in enumerate(("high", "low")):
        if expert_files is None:
            nodes[f"unet_{expert}"] = ("UNETLoader", {"unet_name": WAN22_A14B_FILES[task][index],
                                                      "weight_dtype": "default"}, 0)
        else:
            nodes[f"unet_{expert}"] = ("UnetLoaderGGUF", {"unet_name": expert_files[index]}, 0)
        nodes[f"lora_{expert}"] = ("LoraLoaderModelOnly", {"model": [f"unet_{expert}", 0],
                                                           "lora_name": WAN22_A14B_LORA_FILES[task][index],
                                                           "strength_model": 1.0}, 0)
        nodes[f"shift_{expert}"] = ("ModelSamplingSD3", {"model": [f"lora_{expert}", 0], "shift": 5.0}, 0)
        nodes[f"cache_{expert}"] = ("CachedSearchApplyCache", {"model": [f"shift_{expert}", 0], "mode": "adaptive",
                                                               **caches[expert], "static_interval": 2}, 0)
    nodes["clip"] = ("CLIPLoader", {"clip_name": "umt5_xxl_fp8_e4m3fn_scaled.safetensors", "type": "wan",
                                    "device": "default"}, 0)
    nodes["vae"] = ("VAELoader", {"vae_name": "wan_2.1_vae.safetensors"}, 0)
    return nodes


def _a14b_search(conditioning: str, latent: str) -> tuple:
    return ("CachedSearchSamplerExperts", {
        "model_high": ["cache_high", 0], "model_low": ["cache_low", 0], "positive": [conditioning, 0],
        "negative": [conditioning, 1] if conditioning == "image_to_video" else ["negative", 0],
        "latent_image": [latent, 0] if latent == "latent" else [latent, 2], "seed": 42, "num_candidates": 8,
        "steps": 20, "split_step": 10, "cfg": 3.5, "sampler_name": "euler", "scheduler": "simple"}, 2)


def _a14b_model_list(task: str, expert_files=None) -> str:
    from scripts.tiny_models import WAN22_A14B_FILES, WAN22_A14B_LORA_FILES

    return "\n".join([*(f"- `models/diffusion_models/{name}`" for name in expert_files or WAN22_A14B_FILES[task]),
                      *(f"- `models/loras/{name}` (optional, 4-step path)" for name in WAN22_A14B_LORA_FILES[task]),
                      "- `models/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors`",
                      "- `models/vae/wan_2.1_vae.safetensors`"])


def wan22_a14b_t2v(expert_files=None) -> dict:
    nodes = {
        **_a14b_models("t2v", expert_files),
        "prompt": ("PrimitiveStringMultiline", {"value": PROMPT}, 1),
        "positive": ("CLIPTextEncode", {"text": ["prompt", 0], "clip": ["clip", 0]}, 1),
        "negative": ("CLIPTextEncode", {"text": A14B_NEGATIVE, "clip": ["clip", 0]}, 1),
        "latent": ("EmptyHunyuanLatentVideo", {"width": 640, "height": 640, "length": 81, "batch_size": 1}, 1),
        "search": _a14b_search("positive", "latent"),
        **_verify_commit_save("VAEDecode", 16.0, "cachedsearch/wan22_a14b_t2v"),
    }
    return _workflow(nodes, _a14b_model_list("t2v", expert_files) + "\n" + A14B_LORA_NOTE,
                     "high-noise expert 0.15, low-noise expert 0.10 here (not calibrated on A14B)",
                     bypassed=("lora_high", "lora_low"))


def wan22_a14b_i2v() -> dict:
    nodes = {
        **_a14b_models("i2v"),
        "prompt": ("PrimitiveStringMultiline", {"value": PROMPT}, 1),
        "positive": ("CLIPTextEncode", {"text": ["prompt", 0], "clip": ["clip", 0]}, 1),
        "negative": ("CLIPTextEncode", {"text": A14B_NEGATIVE, "clip": ["clip", 0]}, 1),
        "start_image": ("LoadImage", {"image": A14B_I2V_IMAGE}, 1),
        "image_to_video": ("WanImageToVideo", {"positive": ["positive", 0], "negative": ["negative", 0],
                                               "vae": ["vae", 0], "start_image": ["start_image", 0], "width": 640,
                                               "height": 640, "length": 81, "batch_size": 1}, 1),
        "search": _a14b_search("image_to_video", "image_to_video"),
        **_verify_commit_save("VAEDecode", 16.0, "cachedsearch/wan22_a14b_i2v"),
    }
    models = (_a14b_model_list("i2v") + f"\nPut the start image in `ComfyUI/input/` and pick it in Load Image (the "
              f"official template's is `{A14B_I2V_IMAGE}`).\n" + A14B_LORA_NOTE)
    return _workflow(nodes, models, "high-noise expert 0.15, low-noise expert 0.10 here (not calibrated on A14B)",
                     bypassed=("lora_high", "lora_low"))


GGUF_NOTE = """
**GGUF experts.** The two **Unet Loader (GGUF)** nodes come from city96's **ComfyUI-GGUF** node pack (install it
with ComfyUI-Manager, search "ComfyUI-GGUF"; it brings the `gguf` Python package). Put the `.gguf` files in
`ComfyUI/models/diffusion_models/` (or `models/unet/`) and pick them in the loaders; any quantization works:
Q8_0 is closest to the full-precision files, smaller ones (Q5_K_M, Q4_K_M, ...) need less memory. The graph is the fp8 workflow's with
the loaders swapped: the cache, the search and the LoRAs (applied on the fly by ComfyUI-GGUF) work the same,
and Recommit delivers exactly what the official two-KSamplerAdvanced graph gives on these same GGUF files.
"""


GGUF_PACK_PROPERTIES = {"cnr_id": "comfyui-gguf", "aux_id": "city96/ComfyUI-GGUF"}


def wan22_a14b_t2v_gguf() -> dict:
    """The A14B text-to-video search on GGUF quantizations of the two experts (ComfyUI-GGUF's loader)."""
    from scripts.tiny_models import WAN22_A14B_GGUF_FILES

    workflow = wan22_a14b_t2v(WAN22_A14B_GGUF_FILES["t2v"])
    workflow["api"]["save"]["inputs"]["filename_prefix"] = "cachedsearch/wan22_a14b_t2v_gguf"
    workflow["note"] += GGUF_NOTE
    workflow["titles"] = {"unet_high": "Unet Loader (GGUF): high-noise expert",
                          "unet_low": "Unet Loader (GGUF): low-noise expert"}
    # The node pack's registry id and repository, which ComfyUI's missing-nodes dialog and ComfyUI-Manager read to
    # offer installing it.
    workflow["node_properties"] = {key: GGUF_PACK_PROPERTIES for key in ("unet_high", "unet_low")}
    return workflow


FOUR_STEP_NOTE = """### CachedSearch on the 4-step path: explore wide, commit free
Wan 2.2 A14B with the lightx2v 4-step LoRAs, exactly as ComfyUI's official template runs it (4 steps, the
high-noise expert steps 0-2, the low-noise expert steps 2-4, cfg 1, shift 5). The sampler drafts **N = 16
seeds**, the verifier ranks them, Recommit delivers the winner.

**No cache, on purpose.** A step cache saves work only on steps between its warmup and cooldown, and with 2
steps per expert there are none: skipping one of 4 steps would change the video, not draft it. So every draft is
already the full-quality video of its seed, and **the commit is free**: Recommit sees that the winning draft
skipped nothing and delivers it as it is, without sampling again ("commit free" in its report), bit for bit
what the official graph gives for that seed.

**Wide N.** Each draft is 4 transformer passes of one branch (cfg 1 runs no negative prompt): best-of-16 costs
64, about 1.6 videos of the official 20-step graph at cfg 3.5 (40 passes each). Raise `num_candidates` for a
better pick; the cost grows linearly.

**Optional: prune at the expert switch.** Connect the node "Prune at the expert switch" to the sampler's
`pruning` input: every draft stops after the high-noise expert (step 2 of 4), 4 frames decoded from the
sampler's estimate of the finished video there are scored by the same ImageReward, and only the best 4 of 16
run the low-noise expert (40 passes instead of 64). A close call at step 2 can drop the seed that would have won;
docs/files-and-fast-paths.md has what it kept on our small test world.

**Models** (put them where ComfyUI's own tutorials say):
{models}
- `models/image_reward/ImageReward.pt` and `models/image_reward/bert-base-uncased/` (tokenizer files):
  `python custom_nodes/cachedsearch/scripts/download_image_reward.py ComfyUI/models`

**Queueing again** searches new seeds (the seed's control is `randomize`); set it to `fixed` to repeat a search.
"""


def wan22_a14b_t2v_4step() -> dict:
    """The official 4-step LoRA path as a search: no cache, wide N, commit free, pruning at the switch optional."""
    from scripts.tiny_models import WAN22_A14B_FILES, WAN22_A14B_LORA_FILES

    nodes = {}
    for index, expert in enumerate(("high", "low")):
        nodes[f"unet_{expert}"] = ("UNETLoader", {"unet_name": WAN22_A14B_FILES["t2v"][index],
                                                  "weight_dtype": "default"}, 0)
        nodes[f"lora_{expert}"] = ("LoraLoaderModelOnly", {"model": [f"unet_{expert}", 0],
                                                           "lora_name": WAN22_A14B_LORA_FILES["t2v"][index],
                                                           "strength_model": 1.0}, 0)
        nodes[f"shift_{expert}"] = ("ModelSamplingSD3", {"model": [f"lora_{expert}", 0], "shift": 5.0}, 0)
    nodes |= {
        "clip": ("CLIPLoader", {"clip_name": "umt5_xxl_fp8_e4m3fn_scaled.safetensors", "type": "wan",
                                "device": "default"}, 0),
        "vae": ("VAELoader", {"vae_name": "wan_2.1_vae.safetensors"}, 0),
        "prompt": ("PrimitiveStringMultiline", {"value": PROMPT}, 1),
        "positive": ("CLIPTextEncode", {"text": ["prompt", 0], "clip": ["clip", 0]}, 1),
        "negative": ("CLIPTextEncode", {"text": A14B_NEGATIVE, "clip": ["clip", 0]}, 1),
        "latent": ("EmptyHunyuanLatentVideo", {"width": 640, "height": 640, "length": 81, "batch_size": 1}, 1),
        "search": ("CachedSearchSamplerExperts", {
            "model_high": ["shift_high", 0], "model_low": ["shift_low", 0], "positive": ["positive", 0],
            "negative": ["negative", 0], "latent_image": ["latent", 0], "seed": 42, "num_candidates": 16,
            "steps": 4, "split_step": 2, "cfg": 1.0, "sampler_name": "euler", "scheduler": "simple"}, 2),
        **_verify_commit_save("VAEDecode", 16.0, "cachedsearch/wan22_a14b_t2v_4step"),
        # Left unconnected: the note says how to switch pruning on.
        "pruning": ("CachedSearchPruningPlan", {"vae": ["vae", 0], "verifier": ["load_verifier", 0],
                                                "prompt": ["prompt", 0], "keep": 4, "prune_fraction": 0.5,
                                                "prune_step": 2, "preview_frames": 4}, 2),
    }
    models = "\n".join([*(f"- `models/diffusion_models/{name}`" for name in WAN22_A14B_FILES["t2v"]),
                        *(f"- `models/loras/{name}`" for name in WAN22_A14B_LORA_FILES["t2v"]),
                        "- `models/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors`",
                        "- `models/vae/wan_2.1_vae.safetensors`"])
    api = {key: {"class_type": kind, "inputs": inputs} for key, (kind, inputs, _) in nodes.items()}
    return {"api": api, "columns": {key: column for key, (_, _, column) in nodes.items()},
            "note": FOUR_STEP_NOTE.format(models=models), "bypassed": (),
            "titles": {"search": "N = 16 drafts (4 steps, no cache)",
                       "recommit": "Recommit winner (free commit)",
                       "pruning": "Prune at the expert switch (optional)"}}


def hunyuan15_t2v() -> dict:
    """ComfyUI's video_hunyuan_video_1.5_720p_t2v template as a search: 720p drafts, recommit, then its
    distilled 1080p super-resolution stage on the winner only (file names and settings from the template)."""
    search_and_commit = _verify_commit_save("VAEDecodeTiled", 24.0, "cachedsearch/hunyuan15_t2v_1080p")
    nodes = {
        "unet": ("UNETLoader", {"unet_name": "hunyuanvideo1.5_720p_t2v_fp16.safetensors", "weight_dtype": "default"},
                 0),
        "shift": ("ModelSamplingSD3", {"model": ["unet", 0], "shift": 7.0}, 0),
        "cache": ("CachedSearchApplyCache", {"model": ["shift", 0], "mode": "adaptive", "tau": 0.10,
                                             "warmup_steps": 3, "cooldown_steps": 3, "static_interval": 2}, 0),
        "clip": ("DualCLIPLoader", {"clip_name1": "qwen_2.5_vl_7b_fp8_scaled.safetensors",
                                    "clip_name2": "byt5_small_glyphxl_fp16.safetensors", "type": "hunyuan_video_15",
                                    "device": "default"}, 0),
        "vae": ("VAELoader", {"vae_name": "hunyuanvideo15_vae_fp16.safetensors"}, 0),
        "prompt": ("PrimitiveStringMultiline", {"value": PROMPT}, 1),
        "positive": ("CLIPTextEncode", {"text": ["prompt", 0], "clip": ["clip", 0]}, 1),
        "negative": ("CLIPTextEncode", {"text": "", "clip": ["clip", 0]}, 1),
        "latent": ("EmptyHunyuanVideo15Latent", {"width": 1280, "height": 720, "length": 121, "batch_size": 1}, 1),
        "guider": ("CFGGuider", {"model": ["cache", 0], "positive": ["positive", 0], "negative": ["negative", 0],
                                 "cfg": 6.0}, 2),
        "sampler": ("KSamplerSelect", {"sampler_name": "euler"}, 2),
        "sigmas": ("BasicScheduler", {"model": ["unet", 0], "scheduler": "simple", "steps": 20, "denoise": 1.0}, 2),
        "search": ("CachedSearchSamplerAdvanced", {"guider": ["guider", 0], "sampler": ["sampler", 0],
                                                   "sigmas": ["sigmas", 0], "latent_image": ["latent", 0],
                                                   "seed": 42, "num_candidates": 8}, 2),
        **{key: search_and_commit[key] for key in ("decode_drafts", "load_verifier", "verify", "recommit")},
        # The template's super-resolution stage, fed with the committed winner instead of a single sample.
        "sr_upsampler": ("LatentUpscaleModelLoader",
                         {"model_name": "hunyuanvideo15_latent_upsampler_1080p.safetensors"}, 5),
        "sr_upscale": ("HunyuanVideo15LatentUpscaleWithModel", {
            "model": ["sr_upsampler", 0], "samples": ["recommit", 0], "upscale_method": "bilinear", "width": 1920,
            "height": 1080, "crop": "disabled"}, 5),
        "sr_conditioning": ("HunyuanVideo15SuperResolution", {
            "positive": ["positive", 0], "negative": ["negative", 0], "latent": ["sr_upscale", 0],
            "noise_augmentation": 0.7}, 5),
        "sr_unet": ("UNETLoader", {"unet_name": "hunyuanvideo1.5_1080p_sr_distilled_fp16.safetensors",
                                   "weight_dtype": "default"}, 5),
        "sr_shift": ("ModelSamplingSD3", {"model": ["sr_unet", 0], "shift": 2.0}, 5),
        "sr_sigmas": ("BasicScheduler", {"model": ["sr_unet", 0], "scheduler": "simple", "steps": 8, "denoise": 1.0},
                      5),
        "sr_split": ("SplitSigmas", {"sigmas": ["sr_sigmas", 0], "step": 4}, 5),
        "sr_noise": ("RandomNoise", {"noise_seed": 889}, 5),
        "sr_guider_high": ("CFGGuider", {"model": ["sr_shift", 0], "positive": ["sr_conditioning", 0],
                                         "negative": ["sr_conditioning", 1], "cfg": 1.0}, 5),
        "sr_high": ("SamplerCustomAdvanced", {"noise": ["sr_noise", 0], "guider": ["sr_guider_high", 0],
                                              "sampler": ["sampler", 0], "sigmas": ["sr_split", 0],
                                              "latent_image": ["sr_conditioning", 2]}, 5),
        "sr_no_noise": ("DisableNoise", {}, 5),
        "sr_guider_low": ("CFGGuider", {"model": ["sr_unet", 0], "positive": ["positive", 0],
                                        "negative": ["negative", 0], "cfg": 1.0}, 5),
        "sr_low": ("SamplerCustomAdvanced", {"noise": ["sr_no_noise", 0], "guider": ["sr_guider_low", 0],
                                             "sampler": ["sampler", 0], "sigmas": ["sr_split", 1],
                                             "latent_image": ["sr_high", 0]}, 5),
        **{key: search_and_commit[key] for key in ("decode", "video", "save")},
    }
    nodes["decode"] = ("VAEDecodeTiled", {**nodes["decode"][1], "samples": ["sr_low", 0]}, 6)
    nodes["video"] = (*nodes["video"][:2], 6)
    nodes["save"] = (*nodes["save"][:2], 6)
    models = ("- `models/diffusion_models/hunyuanvideo1.5_720p_t2v_fp16.safetensors` and "
              "`models/diffusion_models/hunyuanvideo1.5_1080p_sr_distilled_fp16.safetensors`\n"
              "- `models/text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors` and "
              "`models/text_encoders/byt5_small_glyphxl_fp16.safetensors`\n"
              "- `models/vae/hunyuanvideo15_vae_fp16.safetensors`\n"
              "- `models/latent_upscale_models/hunyuanvideo15_latent_upsampler_1080p.safetensors`\n"
              "The search runs at 720p (20 steps, cfg 6, shift 7, as ComfyUI's template); only the committed winner "
              "is super-resolved to 1080p (8 distilled steps, split at 4).")
    workflow = _workflow(nodes, models, "0.10 is a starting point (not calibrated for HunyuanVideo 1.5)")
    workflow["groups"] = GROUPS[:5] + (("6. Super-resolve the winner (1080p)", 5, "#5a4f9e"), ("7. Save", 6, "#444"))
    return workflow


DISTRIBUTED_NOTE = """
### Spread the drafts over several GPUs or machines (ComfyUI-Distributed)
Install **ComfyUI-Distributed** (robertvoy, Comfy Registry) on the master and on every worker, with the same
models and CachedSearch. In its sidebar panel add your workers (local GPUs, LAN or cloud) and tick **enabled**;
then Queue as usual. The **Distributed Sampler** feeds a **Distributed Collector** (leave the collector's outputs
unconnected): that link is how ComfyUI-Distributed finds the search and sends it to your workers.

Participant k of W (master first, then the reachable workers in the panel's order) drafts a fixed slice of
seed .. seed + N - 1; the master gathers every draft as an exact latent, ranks all N and recommits the winner,
so the result equals this workflow on one GPU. A worker that is offline at Queue is left out; one that stops
answering for `worker_timeout` seconds has its remaining seeds drafted by the master. The sampler's report
says who drafted which seed. Without enabled workers the sampler searches alone.
"""


def wan21_t2v_distributed() -> dict:
    """The Wan 2.1 workflow with the search spread over ComfyUI-Distributed's workers."""
    workflow = wan21_t2v()
    api = workflow["api"]
    api["search"] = {"class_type": "CachedSearchDistributedSampler",
                     "inputs": {**api["search"]["inputs"], "worker_timeout": 60.0}}
    api["collector"] = {"class_type": "DistributedCollector", "inputs": {"images": ["search", 3],
                                                                         "load_balance": False}}
    workflow["columns"]["collector"] = workflow["columns"]["search"]
    workflow["note"] += DISTRIBUTED_NOTE
    return workflow


PRUNING_NOTE = """
**Pruning (CachedSearch Pruning Plan, on the sampler's `pruning` input):** every draft stops at
`prune_fraction` of the steps (0.4: step 20 of 50); `preview_frames` frames decoded from the sampler's own
estimate of the finished video there are scored by the same ImageReward, and only the best `keep` drafts run
to the end. The dropped drafts are never finished, so the exploration costs less again on top of the cache;
the winner is still recommitted at full compute, exactly as without pruning. A close call at the prune step
can drop the seed that would have won: keep more (`keep`) or prune later to be safer. Delete the plan (or its
link) to search without pruning.
"""


def wan21_t2v_pruned() -> dict:
    """The Wan 2.1 workflow with a Pruning Plan on the search: 8 drafts to step 20 of 50, the best 4 continue."""
    workflow = wan21_t2v()
    api = workflow["api"]
    api["pruning"] = {"class_type": "CachedSearchPruningPlan", "inputs": {
        "vae": ["vae", 0], "verifier": ["load_verifier", 0], "prompt": ["prompt", 0], "keep": 4,
        "prune_fraction": 0.4, "prune_step": 0, "preview_frames": 4}}
    api["search"]["inputs"]["pruning"] = ["pruning", 0]
    workflow["columns"]["pruning"] = workflow["columns"]["search"]
    workflow["note"] += PRUNING_NOTE
    return workflow


CALIBRATE_NOTE = """
### Calibrate tau on your model first (CachedSearch Calibrate)
The first queue runs **CachedSearch Calibrate**: 4 seeds at full compute and cached at each tau of its list
(24 rollouts with the defaults, about 14 full-rollout times, plus scoring), all scored by the same ImageReward. It
recommends the largest tau whose drafts keep 90 % of best-of-4's gain (0: keep the cache off), shows the table on
the node and the chart in the preview, and feeds that tau into Apply Cache. Later queues reuse the calibration
(ComfyUI keeps the node's result while its inputs stay the same) and only search.

**Recalibrate** when the trajectory the cache sees changes: another model or LoRA, other `steps`, sampler or
scheduler (keep the calibrator's equal to the sampler's), another resolution class (480p vs 720p) or a very
different kind of prompt. The result is remembered for the model file, steps, sampler and scheduler: Apply
Cache says "calibrated for this setup" when that setup comes back. At 4 seeds the intervals are wide; raise
`seeds` to 8 for a steadier choice.
"""


def wan21_calibrate() -> dict:
    """The Wan 2.1 workflow with its tau measured by CachedSearch Calibrate on the same model, prompt and verifier."""
    workflow = wan21_t2v()
    api = workflow["api"]
    search = api["search"]["inputs"]
    api["calibrate"] = {"class_type": "CachedSearchCalibrate", "inputs": {
        "model": ["shift", 0], "positive": ["positive", 0], "negative": ["negative", 0], "latent_image": ["latent", 0],
        "vae": ["vae", 0], "verifier": ["load_verifier", 0], "prompt": ["prompt", 0], "first_seed": 0, "seeds": 4,
        **{name: search[name] for name in ("steps", "cfg", "sampler_name", "scheduler", "denoise")},
        "taus": "0.05 0.10 0.15 0.20 0.30", "capture_target": 0.9, "warmup_steps": 5, "cooldown_steps": 5,
        "frames_per_candidate": 8}}
    api["chart"] = {"class_type": "PreviewImage", "inputs": {"images": ["calibrate", 2]}}
    api["cache"]["inputs"]["tau"] = ["calibrate", 0]
    workflow["columns"].update(calibrate=2, chart=3)
    workflow["note"] += CALIBRATE_NOTE
    return workflow


# Kinds of prompt a Wan 2.1 artist makes: people, animals, landscapes, city, water and weather, close-ups, fast
# motion, camera moves, night and low light, crowds, stylised looks, objects and food.
FAMILY_PROMPTS = (
    "A woman in a yellow raincoat walks down a rainy city street at night, neon reflections on the wet pavement",
    "An old fisherman mends a net on a wooden pier at dawn, close-up of his weathered hands",
    "Two children run across a sunflower field toward the camera, laughing, summer afternoon",
    "A ballet dancer spins on a dark stage under a single spotlight, slow motion",
    "A chef flips vegetables in a flaming wok in a busy restaurant kitchen",
    "A red fox trots through fresh snow in a birch forest at sunrise, breath visible in the cold air",
    "A golden retriever catches a frisbee in mid-air on a beach, waves behind",
    "A hummingbird hovers at a purple flower, wings a blur, macro shot",
    "A herd of wild horses gallops across a dusty plain, aerial tracking shot",
    "A jellyfish drifts through dark blue water, glowing softly",
    "Drone shot flying over a misty mountain valley with a winding river at sunrise",
    "Ocean waves crash against black volcanic rocks, spray in the wind, overcast sky",
    "A thunderstorm rolls over a wheat field, lightning in the distance, time-lapse",
    "Autumn leaves fall in a quiet park, a wooden bench in the foreground, gentle breeze",
    "A busy Tokyo crossing at dusk seen from above, crowds and traffic streaming",
    "A vintage tram climbs a steep cobblestone street in Lisbon, slow dolly shot",
    "A skateboarder grinds a rail in an empty concrete plaza, low-angle tracking shot",
    "A race car speeds around a corner on a wet track, spray flying, motion blur",
    "Slow push-in on a steaming cup of coffee on a wooden table by a rainy window",
    "A chocolate cake being sliced, close-up, soft studio light",
    "Candles flicker in a dark cathedral, camera slowly pans across stained glass",
    "A campfire under a starry sky, sparks rising, a tent in the background",
    "A watercolor-style animation of a paper boat sailing on a stream",
    "A claymation robot waves hello in a colorful toy workshop",
    "A crowd cheers at an outdoor concert at night, confetti falling, stage lights sweeping",
)
FAMILY_TAUS = "0.10 0.20 0.30"  # around the report's 0.20 for Wan 2.1 1.3B


CALIBRATE_FAMILY_NOTE = """
### Calibrate tau for the model family first (CachedSearch Calibrate, 25 prompts)
The first queue runs **CachedSearch Calibrate** on **25 prompts of different kinds** (typed one per line in its
`prompt` widget and encoded by the connected text encoder, one shared negative) at **8 seeds**: every prompt and
seed at full compute and cached at each tau of its list (25 x 8 x (1 + 3) = 800 rollouts, about 500 full-rollout
times at a 2x cache speed-up; the first progress line says it). The table pools the prompts as the report's audit
does, with intervals from resampling the prompts; the recommended tau feeds Apply Cache. It takes many hours on one
GPU: **every finished rollout is saved**, so if you press Cancel, ComfyUI crashes or the machine restarts, queue it
again and it reuses what was done (the progress text counts the reused rollouts).

**When one prompt is enough** (template `04 Calibrate tau, one prompt`): a quick check of one prompt you
are about to search a lot, at 8 seeds. **When to run this family protocol**: to choose a tau to keep for a model family
(another checkpoint of the same architecture, LoRAs, prompts of every kind), since the report found that fidelity
tracks the architecture. Replace the prompts with ones typical of your work; keep steps, sampler, scheduler and
resolution class equal to the sampler's. Add values to the advanced `easycache_thresholds` / `lazycache_thresholds`
inputs to compare ComfyUI's EasyCache and LazyCache on the same full rollouts.
"""


def wan21_calibrate_family() -> dict:
    """The Wan 2.1 workflow with its tau measured by CachedSearch Calibrate on 25 prompts (the family protocol)."""
    workflow = wan21_calibrate()
    calibrate = workflow["api"]["calibrate"]["inputs"]
    del calibrate["positive"]
    calibrate.update(clip=["clip", 0], prompt="\n".join(FAMILY_PROMPTS), seeds=8, taus=FAMILY_TAUS)
    workflow["note"] = workflow["note"].replace(CALIBRATE_NOTE, CALIBRATE_FAMILY_NOTE)
    return workflow


CALIBRATE_A14B_NOTE = """
### Calibrate each expert's tau first (CachedSearch Calibrate (two experts))
The first queue runs **CachedSearch Calibrate (two experts)** on the same two experts, prompt, verifier and
sampler settings: 4 seeds at full compute, the same seeds with only the high-noise expert cached at each of its
taus (the low-noise expert at full compute), then only the low-noise expert at each of its taus, and finally
both experts at their picks together (48 rollouts with the defaults, about 26 full-rollout times, plus scoring).
Each expert gets the largest tau whose drafts keep 90 % of best-of-4's gain (0: keep that expert's cache off),
and the two taus feed the two Apply Cache nodes. The report says whether the two picks together still keep the
target (each expert's loss adds up). Later queues reuse the calibration and only search.

**Recalibrate** when the trajectory either cache sees changes: other expert files or LoRAs, other `steps` or
`split_step`, sampler or scheduler (keep the calibrator's equal to the sampler's), each expert's warmup and
cooldown, another resolution class (480p vs 720p) or a very different kind of prompt. The result is remembered
for both expert files, steps, split, sampler and scheduler: each expert's Apply Cache says "calibrated for this
setup's high-noise (low-noise) expert" when that setup comes back. Do not calibrate the 4-step LoRA path: with 2
steps per expert there is nothing to skip (set both caches to mode off there).
"""


def wan22_a14b_calibrate() -> dict:
    """The Wan 2.2 A14B T2V workflow with each expert's tau measured by CachedSearch Calibrate (two experts)."""
    workflow = wan22_a14b_t2v()
    api = workflow["api"]
    search = api["search"]["inputs"]
    windows = {f"{name}_steps_{expert}": api[f"cache_{expert}"]["inputs"][f"{name}_steps"]
               for expert in ("high", "low") for name in ("warmup", "cooldown")}
    api["calibrate"] = {"class_type": "CachedSearchCalibrateExperts", "inputs": {
        "model_high": ["shift_high", 0], "model_low": ["shift_low", 0], "positive": ["positive", 0],
        "negative": ["negative", 0], "latent_image": ["latent", 0], "vae": ["vae", 0],
        "verifier": ["load_verifier", 0], "prompt": ["prompt", 0], "first_seed": 0, "seeds": 4,
        **{name: search[name] for name in ("steps", "split_step", "cfg", "sampler_name", "scheduler")},
        "taus_high": "0.05 0.10 0.15 0.20 0.30", "taus_low": "0.05 0.10 0.15 0.20 0.30", "capture_target": 0.9,
        **windows, "frames_per_candidate": 8}}
    api["chart"] = {"class_type": "PreviewImage", "inputs": {"images": ["calibrate", 3]}}
    api["cache_high"]["inputs"]["tau"] = ["calibrate", 0]
    api["cache_low"]["inputs"]["tau"] = ["calibrate", 1]
    workflow["columns"].update(calibrate=2, chart=3)
    workflow["note"] = workflow["note"].replace(
        "high-noise expert 0.15, low-noise expert 0.10 here (not calibrated on A14B)",
        "here each expert's tau comes from the calibration below") + CALIBRATE_A14B_NOTE
    return workflow


AUTO_NOTE = """
### Same GPU time as 8 full renders, searched wide (Budget and Pruning Plan on auto)
**Run `04 Calibrate tau, one prompt` first, with its `seeds` raised to 16** (once per model file, steps, sampler
and scheduler; its other settings are this workflow's). Calibrate remembers how early this model's previews tell
the seeds apart, and here the **CachedSearch Budget** (`choose` auto, `budget_rollouts` 8) and the **Pruning
Plan** (`schedule` auto) read it: they choose how many seeds to draft and at which steps to keep only the best
previews, for the best video the cost of 8 full renders can buy, the full-compute commit of the winner included.
The search drafts at most as many seeds as were calibrated (16 here, `max_candidates`) and needs at least 8 for a
budget of 8. The sampler's panel and the Recommit's report say what was bought: the width, the pruning rounds, the
calibration it came from (prompts x seeds), the expected gain over full best-of-8 with its interval, and the calls
spent against the budget. It never spends more than the budget: on a prompt where the cache skips less than
calibrated it drafts fewer seeds or stops a survivor early, and says so.

**Without a usable calibration** the search still runs: it drafts seeds while they fit the budget, as `choose`
"as drafts fit" does, and one line on the panel says why auto was not used: none remembered ("a Calibrate run on
this model, steps, sampler and scheduler buys a wider search"), too few seeds ("calibrate at least 8 seeds": 04's
default is 4), or another model file, steps, sampler, scheduler, cache warmup and cooldown, verifier, preview
frames or an Apply Cache `tau` that Calibrate did not measure (the line names it). The settings here are 04's:
50 steps, uni_pc/simple, cache warmup 5 and cooldown 5, ImageReward, tau 0.10 (one of 04's taus; to save
calibration time, list only the tau you search at in 04's `taus`). Leave the Pruning Plan's `preview_frames` at its
default 4: Calibrate scores its previews on 4 frames.
"""


def wan21_searched_wide() -> dict:
    """The Wan 2.1 workflow spending full best-of-8's budget as the calibration says: Budget and Pruning Plan on
    auto, every setting equal to workflow 04's Calibrate so that its calibration is the one used."""
    workflow = wan21_t2v_pruned()
    api = workflow["api"]
    api["pruning"]["inputs"]["schedule"] = "auto"  # preview_frames at its default, which Calibrate's previews use
    api["budget"] = {"class_type": "CachedSearchBudget", "inputs": {
        "budget_rollouts": 8, "budget_unit": "transformer calls", "max_candidates": 16, "choose": "auto"}}
    api["search"]["inputs"]["budget"] = ["budget", 0]
    workflow["columns"]["budget"] = workflow["columns"]["search"]
    workflow["note"] = workflow["note"].replace(PRUNING_NOTE, AUTO_NOTE)
    workflow["titles"] = {"pruning": "Pruning Plan (auto: rounds from the calibration)",
                          "budget": "Budget: 8 full renders (auto)"}
    return workflow


SUBGRAPH_NOTE = """
### The search in a subgraph
As ComfyUI's official templates do, the whole pipeline sits in the subgraph **Wan 2.1 search**: the node shows
the inputs you set on every run (prompt, size, seeds, steps, model files) and, after a run, what the search
inside did. Open it (the icon at its top right, or "open the subgraph" below its widgets) to watch the drafts play
on the Verifier's panel and to commit the one you like; everything else (tau, sampler, verifier settings) is
inside too.
"""


def wan21_in_subgraph() -> dict:
    """The Wan 2.1 search in the official templates' shape: the pipeline in one subgraph, SaveVideo outside."""
    workflow = wan21_t2v()
    workflow["note"] += SUBGRAPH_NOTE
    workflow["subgraph"] = {"name": "Wan 2.1 search", "outside": ("save",), "promoted": (
        ("prompt", "value", "prompt"), ("latent", "width", None), ("latent", "height", None),
        ("latent", "length", "frames"), ("search", "seed", None), ("search", "num_candidates", None),
        ("search", "steps", None), ("unet", "unet_name", "diffusion_model"), ("clip", "clip_name", "text_encoder"),
        ("vae", "vae_name", None), ("load_verifier", "ckpt_name", "image_reward"))}
    return workflow


LTX_NOTE = """
### LTX-2.3: only the winner is upsampled and refined
This is ComfyUI's official LTX-2.3 text-to-video graph (the same files, sigmas, CFG and LoRA strengths) with the
search on its first stage: N drafts at half size, the Verifier ranks their pictures (the sound is not judged), and
only the Recommit's winner goes through the x2 upsampler and the 3-sigma refine pass, with its sound. The refine
pass is the commit's cost: the search pays N cached first stages, one full first stage and one refine, where
running the whole pipeline N times pays N first stages and N refines. LTX-2 needs ComfyUI 0.33 or newer.
"""


def ltx23_t2v_search_upscale() -> dict:
    """The official LTX-2.3 two-stage text-to-video graph, searched on its first stage, in a subgraph as there."""
    workflow = _workflow(ltx_workflow.ltx23_t2v_nodes(PROMPT), ltx_workflow.MODELS,
                         "0.10 here (not calibrated on LTX-2: calibrate it on your prompts with workflow 05)")
    workflow["note"] += LTX_NOTE
    workflow["titles"] = {"search": "N cached drafts (first stage)", "refine": "Refine the winner (x2, 3 sigmas)"}
    workflow["subgraph"] = {"name": "LTX-2.3 search + upscale", "outside": ("save",), "promoted": (
        ("prompt", "value", "prompt"), ("video_latent", "width", None), ("video_latent", "height", None),
        ("video_latent", "length", "frames"), ("search", "seed", None), ("search", "num_candidates", None),
        ("checkpoint", "ckpt_name", "checkpoint"), ("load_verifier", "ckpt_name", "image_reward"))}
    return workflow

TITLES = {
    "cache": "Apply Cache (explore cheap)", "search": "N cached drafts", "verify": "Rank drafts (ImageReward)",
    "recommit": "Recommit winner (full compute)", "prompt": "Prompt (text encoder + verifier)",
    "decode_drafts": "Decode drafts", "decode": "Decode delivered video",
    "collector": "ComfyUI-Distributed: sends the search to your workers",
    "pruning": "Prune drafts at 40 % (keep the best 4 previews)",
    "calibrate": "Calibrate tau (runs once per setup)", "chart": "Calibration chart",
}
GROUPS = (("1. Models", 0, "#3f789e"), ("2. Prompt and latent", 1, "#8a8a3f"), ("3. Explore: N cached drafts", 2,
          "#a1309b"), ("4. Verify", 3, "#b06634"), ("5. Commit the winner", 4, "#3f8a54"), ("6. Save", 5, "#444"))


def _workflow(nodes: dict, models: str, tau_advice: str, bypassed=()) -> dict:
    api = {key: {"class_type": kind, "inputs": inputs} for key, (kind, inputs, _) in nodes.items()}
    columns = {key: column for key, (_, _, column) in nodes.items()}
    return {"api": api, "columns": columns, "note": EXPLAIN.format(models=models, tau_advice=tau_advice),
            "bypassed": bypassed}


WORKFLOWS = {  # file name (the template browser's card title, numbered in the order to meet them): its builder
    "01 Wan 2.1 (start here)": wan21_t2v,
    "02 Wan 2.1 pruned search": wan21_t2v_pruned,
    "03 Wan 2.1 on several GPUs": wan21_t2v_distributed,
    "04 Calibrate tau, one prompt": wan21_calibrate,
    "05 Calibrate a model family": wan21_calibrate_family,
    "06 Wan 2.2 TI2V 5B search": wan22_ti2v,
    "07 Wan 2.2 A14B two experts": wan22_a14b_t2v,
    "08 Wan 2.2 image to video": wan22_a14b_i2v,
    "09 Wan 2.2 A14B 4-step LoRA": wan22_a14b_t2v_4step,
    "10 Wan 2.2 A14B GGUF": wan22_a14b_t2v_gguf,
    "11 Calibrate Wan 2.2 A14B": wan22_a14b_calibrate,
    "12 HunyuanVideo search": hunyuan_t2v,
    "13 HunyuanVideo 1.5 + 1080p": hunyuan15_t2v,
    "14 Wan 2.1 in a subgraph": wan21_in_subgraph,
    "15 LTX-2.3 search + upscale": ltx23_t2v_search_upscale,
    "16 Wan 2.1 searched wide": wan21_searched_wide,
}


def build(object_info: dict) -> dict[str, tuple[dict, dict]]:
    built = {}
    for name, define in WORKFLOWS.items():
        workflow = define()
        api = workflow["api"]
        unknown = sorted({node["class_type"] for node in api.values()} - set(object_info))
        if unknown:
            print(f"skipped {name}: this ComfyUI lacks {unknown}")
            continue
        layout, boxes = column_layout(api, workflow["columns"], object_info)
        groups = [(title, boxes[column], color) for title, column, color in workflow.get("groups", GROUPS)
                  if column in boxes]
        bottom = max(y + height for _, y, _, height in boxes.values())
        note_box = (boxes[0][0] + GROUP_PADDING, bottom + 80, sum(boxes[c][2] for c in sorted(boxes)[:3]), 420)
        gui = api_to_gui(api, object_info, layout, {k: v for k, v in (TITLES | workflow.get("titles", {})).items() if k in api},
                         notes=[(workflow["note"], note_box)], groups=groups,
                         bypassed=workflow["bypassed"])
        for key, node in zip(api, gui["nodes"]):
            # The missing-nodes dialog and ComfyUI-Manager name a pack (and offer it) from these.
            node["properties"].update(node_packs.workflow_properties(
                object_info[node["type"]].get("python_module", ""), comfy_runtime.EXTENSION_FOLDER))
        for key, properties in workflow.get("node_properties", {}).items():
            gui["nodes"][list(api).index(key)]["properties"].update(properties)
        if "subgraph" in workflow:
            gui = _in_subgraph(gui, list(api), workflow["subgraph"], object_info)
        # The API twin is what the frontend queues for the GUI file (every widget, defaults included).
        built[name] = (gui, gui_to_api(gui, object_info))
    return built


def _in_subgraph(gui: dict, keys: list[str], subgraph: dict, object_info: dict) -> dict:
    """The workflow's pipeline moved into a subgraph (its nodes are numbered in the order of ``keys``)."""
    node_id = {key: index + 1 for index, key in enumerate(keys)}
    return wrap_in_subgraph(gui, object_info, subgraph["name"], {node_id[key] for key in subgraph["outside"]},
                            [(node_id[key], name, label) for key, name, label in subgraph["promoted"]])


def main() -> None:
    base = comfy_runtime.scratch_directory("cachedsearch_workflows_")
    server = comfy_runtime.ComfyServer(base)
    for pack in (node_packs.DISTRIBUTED, node_packs.GGUF):  # for the workflows that use these packs' nodes
        archive = pack.find_archive()
        if archive is not None:
            pack.install(server.base_dir / "custom_nodes", archive)
    with server:
        object_info = server.get("/object_info")
    (WORKFLOWS_DIR / "api").mkdir(parents=True, exist_ok=True)
    for name, (gui, api) in build(object_info).items():
        (WORKFLOWS_DIR / f"{name}.json").write_text(json.dumps(gui, indent=1) + "\n")
        (WORKFLOWS_DIR / "api" / f"{name}.json").write_text(json.dumps(api, indent=1) + "\n")
        print(f"wrote workflows/{name}.json and workflows/api/{name}.json")


if __name__ == "__main__":
    main()
