"""The HunyuanVideo 1.5 workflow (720p search, recommit, 1080p super-resolution of the winner) on a live server.

Tiny weights throughout, except the HunyuanVideo 1.5 VAE: ComfyUI builds it at fixed width (1.26 B parameters),
so a test node reads frames straight off the latent in its place. Everything between the loaders and the frames
(cache, search, verifier, recommit, latent upsampler, super-resolution sampling) is ComfyUI's and ours, for real.
"""

import copy
import json
import pathlib

import numpy
from PIL import Image

from scripts import tiny_models
from scripts.graphs import tiny_workflow_variant

WORKFLOW = (pathlib.Path(__file__).resolve().parents[1] / "workflows" / "api"
            / "13 HunyuanVideo 1.5 + 1080p.json")
TEMPLATE_SETTINGS = {
    # node key -> inputs that must match ComfyUI's video_hunyuan_video_1.5_720p_t2v template
    "unet": {"unet_name": tiny_models.HUNYUAN15_T2V_FILE},
    "sr_unet": {"unet_name": tiny_models.HUNYUAN15_SR_FILE},
    "sr_upsampler": {"model_name": tiny_models.HUNYUAN15_UPSAMPLER_FILE},
    "vae": {"vae_name": "hunyuanvideo15_vae_fp16.safetensors"},
    "clip": {"clip_name1": "qwen_2.5_vl_7b_fp8_scaled.safetensors", "clip_name2": "byt5_small_glyphxl_fp16.safetensors",
             "type": "hunyuan_video_15"},
    "shift": {"shift": 7.0}, "sr_shift": {"shift": 2.0},
    "guider": {"cfg": 6.0}, "sr_guider_high": {"cfg": 1.0}, "sr_guider_low": {"cfg": 1.0},
    "sigmas": {"scheduler": "simple", "steps": 20}, "sr_sigmas": {"scheduler": "simple", "steps": 8},
    "sr_split": {"step": 4}, "sampler": {"sampler_name": "euler"},
    "latent": {"width": 1280, "height": 720, "length": 121},
    "sr_upscale": {"width": 1920, "height": 1080}, "sr_conditioning": {"noise_augmentation": 0.7},
}


def load_api():
    return json.loads(WORKFLOW.read_text())


def keyed(api):
    """The API graph keyed by the build script's node names (the file numbers them in definition order)."""
    from scripts.build_workflows import hunyuan15_t2v

    names = list(hunyuan15_t2v()["api"])
    return {names[int(node_id) - 1]: node for node_id, node in api.items()}


def tiny_variant(api):
    graph = tiny_workflow_variant(api, pooled=True)
    for node in graph.values():
        inputs = node["inputs"]
        if node["class_type"] == "CachedSearchTestConditioning":
            inputs.update(width=tiny_models.QWEN_VL_WIDTH, byt5_tokens=4)
        if node["class_type"] == "EmptyHunyuanVideo15Latent":
            inputs.update(width=64, height=64, length=5)
        if node["class_type"] == "HunyuanVideo15LatentUpscaleWithModel":
            inputs.update(width=128, height=128)
        if node["class_type"] in ("VAEDecode", "VAEDecodeTiled"):
            node.update(class_type="CachedSearchTestLatentFrames", inputs={"samples": inputs["samples"]})
    for key in [k for k, node in graph.items() if node["class_type"] == "VAELoader"]:
        del graph[key]
    return graph


def stock_variant(graph, seed):
    """The template's own graph for ``seed``: SamplerCustomAdvanced on the uncached model, then the same SR stage."""
    stock = copy.deepcopy(graph)
    (search_key,) = [k for k, n in stock.items() if n["class_type"] == "CachedSearchSamplerAdvanced"]
    (recommit_key,) = [k for k, n in stock.items() if n["class_type"] == "CachedSearchRecommit"]
    (cache_key,) = [k for k, n in stock.items() if n["class_type"] == "CachedSearchApplyCache"]
    search = stock[search_key]["inputs"]
    stock[search["guider"][0]]["inputs"]["model"] = stock[cache_key]["inputs"]["model"]
    stock["stock_noise"] = {"class_type": "RandomNoise", "inputs": {"noise_seed": seed}}
    stock[recommit_key] = {"class_type": "SamplerCustomAdvanced", "inputs": {
        "noise": ["stock_noise", 0], "guider": search["guider"], "sampler": search["sampler"],
        "sigmas": search["sigmas"], "latent_image": search["latent_image"]}}
    drafts_only = [k for k, n in stock.items() if n["class_type"].startswith("CachedSearch") and k != recommit_key
                   and not n["class_type"].startswith("CachedSearchTest")]
    drafts_only += [k for k, n in stock.items() if n["inputs"].get("samples") == [search_key, 0]]
    for key in drafts_only:
        del stock[key]
    return stock


def frames(server, entry):
    return [numpy.asarray(Image.open(server.base_dir / "output" / image["subfolder"] / image["filename"]))
            for image in entry["outputs"]["frames"]["images"]]


def test_settings_and_file_names_are_the_official_templates():
    graph = keyed(load_api())
    for key, expected in TEMPLATE_SETTINGS.items():
        assert {name: graph[key]["inputs"][name] for name in expected} == expected, key
    # only the winner is super-resolved: the SR stage reads the recommitted latent, never the drafts
    assert graph["sr_upscale"]["inputs"]["samples"][0] == next(
        k for k, n in load_api().items() if n["class_type"] == "CachedSearchRecommit")


def test_searches_at_720p_recommits_and_super_resolves_only_the_winner(comfy_server):
    graph = tiny_variant(load_api())
    entry = comfy_server.run_prompt(graph)
    (recommit_key,) = [k for k, n in graph.items() if n["class_type"] == "CachedSearchRecommit"]
    report = entry["outputs"][recommit_key]["text"][0]
    assert report.startswith("CachedSearch: 3 candidate(s)") and "inactive" not in report
    (save_key,) = [k for k, n in graph.items() if n["class_type"] == "SaveVideo"]
    (video,) = entry["outputs"][save_key]["images"]
    assert (comfy_server.base_dir / "output" / video["subfolder"] / video["filename"]).stat().st_size > 0
    delivered = frames(comfy_server, entry)
    assert delivered[0].shape[:2] == (128 // 16 * 8, 128 // 16 * 8)  # the 2x upsampled latent, not the 720p one
    winner_seed = entry["outputs"][recommit_key]["cachedsearch_delivery"][0]["seed"]
    reference = frames(comfy_server, comfy_server.run_prompt(stock_variant(graph, winner_seed)))
    assert len(delivered) == len(reference) == 2
    assert all((a == b).all() for a, b in zip(delivered, reference))


def test_stock_comparison_can_fail(comfy_server):
    """Another seed through the same stock graph gives other frames, so the equality above is meaningful."""
    graph = tiny_variant(load_api())
    first = frames(comfy_server, comfy_server.run_prompt(stock_variant(graph, 42)))
    other = frames(comfy_server, comfy_server.run_prompt(stock_variant(graph, 43)))
    assert any((a != b).any() for a, b in zip(first, other))
