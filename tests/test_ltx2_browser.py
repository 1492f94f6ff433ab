"""The LTX-2 search's panels after a live run (#50), in headless Chromium against a real ComfyUI 0.33.0 server of
its own with frontend 1.58.1, classic and Nodes 2.0: the tiny LTX-2 graph in the official graph's shape (the video
and audio latents packed by LTXVConcatAVLatent, the drafts' video part decoded for the Verifier, the Recommit's
latent separated, its picture and sound made into one video) is run as the Run button does; the Sampler's panel
plays each draft's picture, the Verifier's says its score judged the pictures and not the sound, the Recommit's
names the delivered seed, and the saved video carries the sound. Workflow 15 (LTX-2.3 search + upscale) runs the same
way on its tiny variant: the Recommit's panel counts the second stage (upsample + refine) once for the winner.
ComfyUI 0.3.75 has no LTX-2: skipped there. Screenshots: test-artifacts/ltx2_<frontend>_<renderer>.png and
ltx2_workflow15_<frontend>_<renderer>.png, each with its _sampler, _verifier and _recommit views."""

import json

import av
import pytest
from conftest import NEWEST_FRONTEND
from test_browser import ARTIFACTS, browser_available, frontend_version, run_browser_script

from report_text import numbers
from test_workflows import load

from scripts.tiny_ltx2 import LTX2_CHECKPOINT_FILE, LTX2_FILE, LTX2_TINY_CONFIG
from scripts.graphs import tiny_workflow_variant
from scripts.ltx_workflow import FIRST_STAGE_SIGMAS, REFINE_SIGMAS
from scripts.workflow_format import api_to_gui, column_layout

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and `npm ci` in tests/browser")]

CANDIDATES = 3
STEPS = 8
FPS = 25


def ltx2_search(seed: int) -> dict:
    """The tiny LTX-2 search (API format): the loaders and latents of tests/conftest.py's ``tiny_ltx2`` graph,
    Apply Cache, the Sampler with the checkpoint's video VAE for its panel, the Verifier (tiny CLIP) on the drafts'
    decoded video, the Recommit, and its latent separated, decoded and saved as one video with its sound."""
    checkpoint = LTX2_CHECKPOINT_FILE
    width = 2 * LTX2_TINY_CONFIG["caption_channels"]
    return {
        "unet": {"class_type": "UNETLoader", "inputs": {"unet_name": LTX2_FILE, "weight_dtype": "default"}},
        "checkpoint": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": checkpoint}},
        "audio_vae": {"class_type": "LTXVAudioVAELoader", "inputs": {"ckpt_name": checkpoint}},
        "text": {"class_type": "CachedSearchTestConditioning",
                 "inputs": {"text_seed": 1, "tokens": 6, "pooled": False, "width": width}},
        "negative_text": {"class_type": "CachedSearchTestConditioning",
                          "inputs": {"text_seed": 2, "tokens": 6, "pooled": False, "width": width}},
        "conditioning": {"class_type": "LTXVConditioning", "inputs": {
            "positive": ["text", 0], "negative": ["negative_text", 0], "frame_rate": float(FPS)}},
        "video_latent": {"class_type": "EmptyLTXVLatentVideo",
                         "inputs": {"width": 64, "height": 64, "length": 9, "batch_size": 1}},
        "audio_latent": {"class_type": "LTXVEmptyLatentAudio", "inputs": {
            "frames_number": 9, "frame_rate": FPS, "batch_size": 1, "audio_vae": ["audio_vae", 0]}},
        "latent": {"class_type": "LTXVConcatAVLatent",
                   "inputs": {"video_latent": ["video_latent", 0], "audio_latent": ["audio_latent", 0]}},
        "cache": {"class_type": "CachedSearchApplyCache", "inputs": {
            "model": ["unet", 0], "mode": "adaptive", "tau": 0.5, "warmup_steps": 2, "cooldown_steps": 2,
            "static_interval": 2}},
        "search": {"class_type": "CachedSearchSampler", "inputs": {
            "model": ["cache", 0], "positive": ["conditioning", 0], "negative": ["conditioning", 1],
            "latent_image": ["latent", 0], "seed": seed, "num_candidates": CANDIDATES, "steps": STEPS, "cfg": 3.0,
            "sampler_name": "euler", "scheduler": "simple", "denoise": 1.0, "preview_vae": ["checkpoint", 2]}},
        "separate_drafts": {"class_type": "LTXVSeparateAVLatent", "inputs": {"av_latent": ["search", 0]}},
        "decode_drafts": {"class_type": "VAEDecode",
                          "inputs": {"samples": ["separate_drafts", 0], "vae": ["checkpoint", 2]}},
        "load_verifier": {"class_type": "CachedSearchLoadClipVerifier",
                          "inputs": {"model_folder": "tiny-clip", "dtype": "fp32"}},
        "verifier": {"class_type": "CachedSearchVerifier", "inputs": {
            "images": ["decode_drafts", 0], "candidates": ["search", 1], "prompt": "a drum in the rain",
            "verifier": ["load_verifier", 0], "frames_per_candidate": 4}},
        "recommit": {"class_type": "CachedSearchRecommit",
                     "inputs": {"candidates": ["search", 1], "ranking": ["verifier", 0], "mode": "commit"}},
        "separate": {"class_type": "LTXVSeparateAVLatent", "inputs": {"av_latent": ["recommit", 0]}},
        "decode": {"class_type": "VAEDecode", "inputs": {"samples": ["separate", 0], "vae": ["checkpoint", 2]}},
        "decode_audio": {"class_type": "LTXVAudioVAEDecode",
                         "inputs": {"samples": ["separate", 1], "audio_vae": ["audio_vae", 0]}},
        "video": {"class_type": "CreateVideo", "inputs": {
            "images": ["decode", 0], "audio": ["decode_audio", 0], "fps": float(FPS), "bit_depth": 8}},
        "save": {"class_type": "SaveVideo", "inputs": {
            "video": ["video", 0], "filename_prefix": "ltx2_browser", "format": "auto", "format.codec": "auto",
            "codec": "auto"}},
    }


# The graph's columns on the canvas: loaders and latents, the search, the verifier, the delivery.
COLUMNS = {"unet": 0, "checkpoint": 0, "audio_vae": 0, "text": 0, "negative_text": 0, "conditioning": 0,
           "video_latent": 0, "audio_latent": 0, "latent": 0, "cache": 1, "search": 1, "separate_drafts": 2,
           "decode_drafts": 2, "load_verifier": 2, "verifier": 2, "recommit": 3, "separate": 3, "decode": 4,
           "decode_audio": 4, "video": 4, "save": 4}


@pytest.fixture(scope="module")
def ltx2_server(newest_frontend_server, start_comfy_server):
    """A server of its own with frontend 1.58.1 (no other test's drafts or runs on it); the suite's shared server
    says first whether this runtime has LTX-2, so a runtime without it starts none."""
    missing = [name for name in ("LTXVConcatAVLatent", "LTXVSeparateAVLatent", "LTXVAudioVAEDecode")
               if name not in newest_frontend_server.get("/object_info")]
    if missing:
        pytest.skip(f"LTX-2: this ComfyUI has no {', '.join(missing)}")
    return start_comfy_server("ltx2_browser", ["--front-end-root", str(NEWEST_FRONTEND)])


def saved_video_streams(server, saved_by_node: dict) -> list[str]:
    """The kinds of the streams in the video that SaveVideo's output ``saved_by_node`` names ("video", "audio")."""
    (saved,) = saved_by_node["images"]
    with av.open(str(server.base_dir / "output" / saved["subfolder"] / saved["filename"])) as container:
        return sorted(stream.type for stream in container.streams)


@pytest.mark.parametrize("vue_nodes, seed", [(False, 8100), (True, 8200)])
def test_ltx2_panels_after_a_live_run(ltx2_server, tmp_path, vue_nodes, seed):
    object_info = ltx2_server.get("/object_info")
    graph = ltx2_search(seed)
    ids = {key: str(index + 1) for index, key in enumerate(graph)}  # api_to_gui numbers the nodes in order
    layout, _ = column_layout(graph, COLUMNS, object_info)
    workflow = tmp_path / "workflow.json"
    workflow.write_text(json.dumps(api_to_gui(graph, object_info, layout, seed_control="fixed")))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    combination = f"{frontend_version('newest')}_{'nodes2' if vue_nodes else 'classic'}"
    config = {"workflow": str(workflow), "candidates": CANDIDATES,
              "nodes": {"sampler": ids["search"], "verifier": ids["verifier"], "recommit": ids["recommit"]},
              "screenshot": str(ARTIFACTS / f"ltx2_{combination}.png")}
    seen = run_browser_script("check_ltx2.mjs", ltx2_server, config, tmp_path / "config.json", vue_nodes,
                              timeout=900)
    assert seen["extensionErrors"] == []
    assert seen["vueNodes"] in (vue_nodes, None)
    assert seen["outcome"] == "success", seen["outcome"]
    (entry,) = [entry for entry in ltx2_server.get("/history").values()
                if entry["prompt"][2][ids["search"]]["inputs"]["seed"] == seed]
    outputs = entry["outputs"]
    seeds = [seed + index for index in range(CANDIDATES)]
    sampler, verifier, recommit = (seen["panels"][name] for name in ("sampler", "verifier", "recommit"))
    # The Sampler's panel plays each draft's picture (the video part, decoded by the preview VAE).
    assert [row["seed"] for row in outputs[ids["search"]]["cachedsearch_drafts"]] == seeds
    assert sampler["players"] == CANDIDATES
    # The Verifier's panel ranks every draft, each playing its scored frames, and says the sound is not judged.
    assert outputs[ids["verifier"]]["cachedsearch_verifier"][0]["sound_not_judged"] is True
    assert sorted(row["seed"] for row in verifier["rows"]) == seeds
    assert all(row["players"] == 1 for row in verifier["rows"])
    (verifier_line,) = verifier["verifier"]
    assert "the sound is not judged" in verifier_line
    (winner,) = [row["seed"] for row in verifier["rows"] if row["winner"]]
    # The Recommit's panel names the seed it delivered: the Verifier's winner, with its sound.
    assert recommit["text"].startswith(f"delivered seed {winner}")
    assert saved_video_streams(ltx2_server, outputs[ids["save"]]) == ["audio", "video"]


def depth_columns(graph: dict) -> dict[str, int]:
    """Each node's column on the canvas: its longest link path from a loader, three steps a column."""
    depth: dict[str, int] = {}

    def of(key):
        if key not in depth:
            links = [value[0] for value in graph[key]["inputs"].values() if isinstance(value, list) and len(value) == 2
                     and value[0] in graph]
            depth[key] = 1 + max(map(of, links)) if links else 0
        return depth[key]

    return {key: of(key) // 3 for key in graph}


@pytest.mark.parametrize("vue_nodes", [False, True])
def test_workflow_15_panels_after_a_live_run(ltx2_server, tmp_path, vue_nodes):
    """Workflow 15's tiny variant (scripts/graphs.py) queued from the canvas: the Verifier ranks the three first-stage
    drafts, the Recommit delivers the winner and its panel counts the refine pass once against the pipeline run for
    every candidate."""
    object_info = ltx2_server.get("/object_info")
    _, api = load("15 LTX-2.3 search + upscale")
    graph = tiny_workflow_variant(api, pooled=False)
    ids = {key: str(index + 1) for index, key in enumerate(graph)}  # api_to_gui numbers the nodes in order
    keys = {node["class_type"]: key for key, node in graph.items()}
    layout, _ = column_layout(graph, depth_columns(graph), object_info)
    workflow = tmp_path / "workflow.json"
    workflow.write_text(json.dumps(api_to_gui(graph, object_info, layout, seed_control="fixed")))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    combination = f"{frontend_version('newest')}_{'nodes2' if vue_nodes else 'classic'}"
    names = {"sampler": "CachedSearchSamplerAdvanced", "verifier": "CachedSearchVerifier",
             "recommit": "CachedSearchRecommit"}
    config = {"workflow": str(workflow), "candidates": CANDIDATES,
              "nodes": {name: ids[keys[class_type]] for name, class_type in names.items()},
              "screenshot": str(ARTIFACTS / f"ltx2_workflow15_{combination}.png")}
    seen = run_browser_script("check_ltx2.mjs", ltx2_server, config, tmp_path / "config.json", vue_nodes,
                              timeout=900)
    assert seen["extensionErrors"] == []
    assert seen["outcome"] == "success", seen["outcome"]
    verifier, recommit = seen["panels"]["verifier"], seen["panels"]["recommit"]
    assert len(verifier["rows"]) == CANDIDATES
    (winner,) = [row["seed"] for row in verifier["rows"] if row["winner"]]
    assert recommit["text"].startswith(f"delivered seed {winner}")
    # The second stage once, against the whole pipeline for each candidate: its calls, the search's, the pipeline's.
    refine, first_stage = (len(sigmas.split(",")) - 1 for sigmas in (REFINE_SIGMAS, FIRST_STAGE_SIGMAS))
    second_stage = numbers(recommit["text"].split("Second stage", 1)[1])
    assert (second_stage[0], second_stage[2]) == (refine, CANDIDATES * (first_stage + refine))
