"""Write the example workflows (GUI format in workflows/, API twins in workflows/api/).

    .venv/bin/python -m scripts.build_workflows

Each workflow is defined once below as an API graph with a layout; the GUI file
is derived from it with the live ``/object_info`` of a real ComfyUI server
running this extension, so widget order always matches the installed nodes.
"""

from __future__ import annotations

import json
import pathlib
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, distributed_runtime  # noqa: E402
from scripts.workflow_format import api_to_gui  # noqa: E402

WORKFLOWS_DIR = REPO_ROOT / "workflows"
COLUMN_WIDTH, NODE_WIDTH = 400, 340
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
"""


def _column_layout(columns: dict[str, int], heights: dict[str, int]) -> dict[str, tuple[int, int, int, int]]:
    layout, next_y = {}, {}
    for key, column in columns.items():
        y = next_y.get(column, 120)
        height = heights.get(key, 110)
        layout[key] = (60 + column * COLUMN_WIDTH, y, NODE_WIDTH, height)
        next_y[column] = y + height + 50
    return layout


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
        "recommit": ("CachedSearchRecommit", {"candidates": ["search", 1], "ranking": ["verify", 0],
                                              "mode": "commit"}, 4),
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


TITLES = {
    "cache": "Apply Cache (explore cheap)", "search": "N cached drafts", "verify": "Rank drafts (ImageReward)",
    "recommit": "Recommit winner (full compute)", "prompt": "Prompt (text encoder + verifier)",
    "decode_drafts": "Decode drafts", "decode": "Decode delivered video",
    "collector": "ComfyUI-Distributed: sends the search to your workers",
}
GROUPS = (("1. Models", 0, "#3f789e"), ("2. Prompt and latent", 1, "#8a8a3f"), ("3. Explore: N cached drafts", 2,
          "#a1309b"), ("4. Verify", 3, "#b06634"), ("5. Commit the winner", 4, "#3f8a54"), ("6. Save", 5, "#444"))


def _workflow(nodes: dict, models: str, tau_advice: str) -> dict:
    api = {key: {"class_type": kind, "inputs": inputs} for key, (kind, inputs, _) in nodes.items()}
    columns = {key: column for key, (_, _, column) in nodes.items()}
    return {"api": api, "columns": columns, "note": EXPLAIN.format(models=models, tau_advice=tau_advice)}


WORKFLOWS = {"cachedsearch_wan21_t2v": wan21_t2v, "cachedsearch_hunyuan_t2v": hunyuan_t2v,
             "cachedsearch_wan22_ti2v": wan22_ti2v, "cachedsearch_wan21_t2v_distributed": wan21_t2v_distributed}


def numbered(api: dict) -> dict:
    """The API graph with node ids "1".."n" in definition order (the GUI file's ids)."""
    ids = {key: str(index + 1) for index, key in enumerate(api)}
    return {ids[key]: {"class_type": node["class_type"],
                       "inputs": {name: [ids[value[0]], value[1]] if isinstance(value, list) else value
                                  for name, value in node["inputs"].items()}}
            for key, node in api.items()}


def build(object_info: dict) -> dict[str, tuple[dict, dict]]:
    built = {}
    for name, define in WORKFLOWS.items():
        workflow = define()
        api = workflow["api"]
        unknown = sorted({node["class_type"] for node in api.values()} - set(object_info))
        if unknown:
            print(f"skipped {name}: this ComfyUI lacks {unknown}")
            continue
        heights = {key: 80 + 28 * sum(1 for v in node["inputs"].values() if not isinstance(v, list))
                   for key, node in api.items()}
        heights["prompt"] = 220
        layout = _column_layout(workflow["columns"], heights)
        bottoms = {}
        for key, (x, y, width, height) in layout.items():
            column = workflow["columns"][key]
            bottoms[column] = max(bottoms.get(column, 0), y + height)
        groups = [(title, (40 + column * COLUMN_WIDTH, 60, NODE_WIDTH + 40, bottoms.get(column, 200)), color)
                  for title, column, color in GROUPS if column in bottoms]
        note_box = (60, max(bottoms.values()) + 80, 2 * COLUMN_WIDTH + NODE_WIDTH, 420)
        gui = api_to_gui(api, object_info, layout, {k: v for k, v in TITLES.items() if k in api},
                         notes=[(workflow["note"], note_box)], groups=groups)
        built[name] = (gui, numbered(api))
    return built


def main() -> None:
    base = pathlib.Path(tempfile.mkdtemp(prefix="cachedsearch_workflows_"))
    server = comfy_runtime.ComfyServer(base)
    archive = distributed_runtime.find_archive()
    if archive is not None:  # for the workflows that use ComfyUI-Distributed's nodes
        distributed_runtime.install(server.base_dir / "custom_nodes", archive)
    with server:
        object_info = server.get("/object_info")
    (WORKFLOWS_DIR / "api").mkdir(parents=True, exist_ok=True)
    for name, (gui, api) in build(object_info).items():
        (WORKFLOWS_DIR / f"{name}.json").write_text(json.dumps(gui, indent=1) + "\n")
        (WORKFLOWS_DIR / "api" / f"{name}.json").write_text(json.dumps(api, indent=1) + "\n")
        print(f"wrote workflows/{name}.json and workflows/api/{name}.json")


if __name__ == "__main__":
    main()
