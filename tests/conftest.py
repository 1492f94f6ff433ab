"""Fixtures on the real ComfyUI runtime: in-process nodes and a live server."""

import os
import pathlib
import shutil
import sys
import tempfile

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Test variations (docs/development.md): the suite must pass whatever rounding a machine does, so it can run on
# other thread counts and matmul precisions than this machine's defaults. The thread count goes into the environment
# before torch and numpy load, so MKL and OpenBLAS take it too, here and in the servers the tests start.
TEST_THREADS = os.environ.get("CACHEDSEARCH_TEST_THREADS", "")
TEST_MATMUL_PRECISION = os.environ.get("CACHEDSEARCH_TEST_MATMUL_PRECISION", "")
if TEST_THREADS:
    if not TEST_THREADS.isdigit() or int(TEST_THREADS) < 1:
        raise pytest.UsageError(f"CACHEDSEARCH_TEST_THREADS: got {TEST_THREADS!r}; use a whole number of threads, "
                                "e.g. 1")
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = TEST_THREADS
if TEST_MATMUL_PRECISION not in ("", "highest", "high", "medium"):
    raise pytest.UsageError(f"CACHEDSEARCH_TEST_MATMUL_PRECISION: got {TEST_MATMUL_PRECISION!r}; use highest, high or "
                            "medium")

from scripts import comfy_runtime, node_packs, tiny_image_reward, tiny_models, tiny_video_score  # noqa: E402
from scripts.tiny_ltx2 import LTX2_CHECKPOINT_FILE, LTX2_FILE, LTX2_TINY_CONFIG  # noqa: E402

# ComfyUI-GGUF goes into every test ComfyUI when its snapshot is here (the GGUF tests skip without it).
GGUF_ARCHIVE = node_packs.GGUF.find_archive()


# Tiers: what a test needs beyond Python. Markers are given here from the fixtures a test uses, so they cannot
# drift from what it really starts; tests that start a server or a browser some other way mark themselves.
SERVER_FIXTURES = {"comfy_server", "start_comfy_server", "base_with_models"}
IN_PROCESS_FIXTURES = {"engine"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & SERVER_FIXTURES:
            item.add_marker(pytest.mark.server)
        if fixtures & IN_PROCESS_FIXTURES:
            item.add_marker(pytest.mark.comfy)


# The fast tier (scripts/test.sh --fast) runs what is marked none of server, browser or slow, in under two minutes;
# a test over these times without the slow marker is listed at the end of the run (a report, not a failure: time
# depends on the machine).
FAST_TIER_TEST_SECONDS = 5
SLOW_SECONDS = 60
_unmarked_slow = []


def pytest_runtest_logreport(report):
    if report.when != "call" or "slow" in report.keywords:
        return
    in_fast_tier = "server" not in report.keywords and "browser" not in report.keywords
    if report.duration > SLOW_SECONDS or (in_fast_tier and report.duration > FAST_TIER_TEST_SECONDS):
        _unmarked_slow.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter):
    if _unmarked_slow:
        terminalreporter.section(f"not marked slow, yet over {SLOW_SECONDS} s (or {FAST_TIER_TEST_SECONDS} s in the "
                                 "fast tier) here")
        for nodeid, seconds in _unmarked_slow:
            terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")


def pytest_configure(config):
    import torch

    if TEST_THREADS:
        torch.set_num_threads(int(TEST_THREADS))
    if TEST_MATMUL_PRECISION:
        torch.set_float32_matmul_precision(TEST_MATMUL_PRECISION)


def pytest_report_header(config):
    import torch

    return [f"ComfyUI {comfy_runtime.comfyui_version()} at {comfy_runtime.comfyui_root()}",
            f"torch: {torch.get_num_threads()} threads, float32 matmul precision {torch.get_float32_matmul_precision()}"]


PLACEHOLDER_MODEL_FILES = (
    "text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors", "text_encoders/clip_l.safetensors",
    "text_encoders/llava_llama3_fp8_scaled.safetensors",
    # HunyuanVideo 1.5: Qwen2.5-VL and ByT5 encoders, and its VAE (fixed at 1.26 B parameters)
    "text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors", "text_encoders/byt5_small_glyphxl_fp16.safetensors",
    "vae/hunyuanvideo15_vae_fp16.safetensors",
    # LTX-2.3: its Gemma 3 text encoder
    "text_encoders/gemma_3_12B_it_fp4_mixed.safetensors",
)


# Generated checkpoints are kept between runs (the fast tier would spend a third of its time making them), keyed by
# everything they are made from: the generators, this file, the ComfyUI they are made with, torch.
TINY_MODEL_SOURCES = ("scripts/tiny_models.py", "scripts/tiny_ltx2.py", "scripts/tiny_image_reward.py",
                      "scripts/tiny_video_score.py", "tests/conftest.py")
TINY_MODEL_CACHE = REPO_ROOT / ".cache" / "tiny-models"
TINY_MODEL_CACHE_KEPT = 4  # two runtimes, and the sets of the previous version of the generators


def _write_tiny_models(models: pathlib.Path) -> None:
    tiny_models.generate_tiny_models(models)
    tiny_image_reward.write_tiny_image_reward(models / "image_reward")
    tiny_image_reward.write_tiny_clip(models / "clip_score" / "tiny-clip")
    tiny_video_score.write_tiny_video_score(models / "video_score" / "VideoScore-v1.1")
    # The HunyuanVideo VAE cannot be made tiny (its width is fixed in ComfyUI); the tiny Wan 2.1 VAE decodes the
    # same 16-channel, 4x temporal / 8x spatial latents and stands in under the official file name.
    (models / "vae" / "hunyuan_video_vae_bf16.safetensors").symlink_to(tiny_models.WAN21_VAE_FILE)
    # Listed so workflow files validate against the server's file lists; never loaded (too large to make tiny).
    for listed_only in PLACEHOLDER_MODEL_FILES:
        (models / listed_only).parent.mkdir(parents=True, exist_ok=True)
        (models / listed_only).touch()


@pytest.fixture(scope="session")
def tiny_models_dir() -> pathlib.Path:
    """Tiny random-weight checkpoints in ComfyUI's models layout, generated once for what they are made from."""
    import hashlib

    import torch

    root = comfy_runtime.comfyui_root()
    key = hashlib.sha256()
    for source in TINY_MODEL_SOURCES:
        key.update((REPO_ROOT / source).read_bytes())
    key.update(f"{root} {(root / 'comfyui_version.py').read_bytes()!r} {torch.__version__}".encode())
    models = TINY_MODEL_CACHE / key.hexdigest()[:16]
    if not models.is_dir():
        # Written beside and renamed into place, so a run that stops half-way or a second run at the same time never
        # sees a partial folder.
        TINY_MODEL_CACHE.mkdir(parents=True, exist_ok=True)
        partial = pathlib.Path(tempfile.mkdtemp(prefix="partial-", dir=TINY_MODEL_CACHE))
        _write_tiny_models(partial)
        try:
            partial.rename(models)
        except OSError:  # another run finished the same folder first
            shutil.rmtree(partial)
    models.touch()  # last used, for the clean-up below
    older = sorted((folder for folder in TINY_MODEL_CACHE.iterdir() if not folder.name.startswith("partial-")),
                   key=lambda folder: folder.stat().st_mtime, reverse=True)[TINY_MODEL_CACHE_KEPT:]
    for stale in older:
        shutil.rmtree(stale, ignore_errors=True)
    return models


def _base_with_models(tmp_path_factory, name, models_dir) -> pathlib.Path:
    base = comfy_runtime.prepare_base_directory(tmp_path_factory.mktemp(name))
    if GGUF_ARCHIVE is not None:
        node_packs.GGUF.install(base / "custom_nodes", GGUF_ARCHIVE)
    for entry in models_dir.glob("*/*"):
        folder = base / "models" / entry.parent.name
        folder.mkdir(exist_ok=True)
        (folder / entry.name).symlink_to(entry)
    _write_start_image(base / "input")
    return base


@pytest.fixture(scope="session")
def draft_tiny_wan(engine):
    """Makes three cached tiny Wan 2.1 drafts from ``seed`` in process: (decoded frames, CANDIDATES)."""
    from scripts.tiny_models import WAN21_T2V_FILE, WAN21_VAE_FILE

    def draft(seed: int):
        model = engine.one("ModelSamplingSD3", model=engine.one("UNETLoader", unet_name=WAN21_T2V_FILE,
                                                                 weight_dtype="default"), shift=8.0)
        model = engine.one("CachedSearchApplyCache", model=model, mode="adaptive", tau=0.3, warmup_steps=2,
                           cooldown_steps=2, static_interval=2)
        positive = engine.one("CachedSearchTestConditioning", text_seed=1, tokens=8, pooled=False)
        negative = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=8, pooled=False)
        latent = engine.one("EmptyHunyuanLatentVideo", width=64, height=64, length=9, batch_size=1)
        drafts, candidates, _ = engine.run("CachedSearchSampler", model=model, positive=positive, negative=negative,
                                           latent_image=latent, seed=seed, num_candidates=3, steps=8, cfg=5.0,
                                           sampler_name="euler", scheduler="simple", denoise=1.0)
        images = engine.one("VAEDecode", samples=drafts, vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE))
        return images, candidates

    return draft


@pytest.fixture(scope="session")
def tiny_ltx2(engine):
    """The tiny LTX-2 graph's sampler inputs (model through UNETLoader, positive, negative, the packed video + audio
    latent), as the official graph makes them: LTXVConditioning and LTXVConcatAVLatent of an empty LTX video latent
    and LTXVEmptyLatentAudio's, sized by the tiny audio VAE that LTXVAudioVAELoader reads out of the checkpoint.
    Stand-in: synthetic conditioning of the processed Gemma width (two 64-wide captions). Skipped where the runtime
    has no LTX-2 (LTXAV) model."""
    import comfy.supported_models

    missing = [name for name in ("LTXVConcatAVLatent", "LTXVAudioVAELoader", "LTXVEmptyLatentAudio")
               if name not in engine.nodes]
    if not hasattr(comfy.supported_models, "LTXAV") or missing:
        pytest.skip("LTX-2: this ComfyUI has no LTXAV model" + (f" nor {', '.join(missing)}" if missing else ""))
    model = engine.one("UNETLoader", unet_name=LTX2_FILE, weight_dtype="default")
    width = 2 * LTX2_TINY_CONFIG["caption_channels"]
    positive, negative = (engine.one("CachedSearchTestConditioning", text_seed=seed, tokens=6, pooled=False,
                                     width=width) for seed in (1, 2))
    positive, negative = engine.run("LTXVConditioning", positive=positive, negative=negative, frame_rate=25.0)
    video = engine.one("EmptyLTXVLatentVideo", width=64, height=64, length=9, batch_size=1)
    audio_vae = engine.one("LTXVAudioVAELoader", ckpt_name=LTX2_CHECKPOINT_FILE)
    audio = engine.one("LTXVEmptyLatentAudio", frames_number=9, frame_rate=25, batch_size=1, audio_vae=audio_vae)
    return model, positive, negative, engine.one("LTXVConcatAVLatent", video_latent=video, audio_latent=audio)


@pytest.fixture(scope="session")
def base_with_models(tmp_path_factory, tiny_models_dir):
    """Makes a fresh ComfyUI base directory with this extension and the tiny models, for tests that start their own
    servers (imported from here, ``tests`` would resolve to ComfyUI's own tests package)."""
    return lambda name: _base_with_models(tmp_path_factory, name, tiny_models_dir)


def _write_start_image(input_dir: pathlib.Path) -> None:
    """The Wan 2.2 A14B I2V workflow's start image (the official template's file name), for LoadImage."""
    from PIL import Image

    from scripts.build_workflows import A14B_I2V_IMAGE

    Image.new("RGB", (64, 64), (200, 120, 40)).save(input_dir / A14B_I2V_IMAGE)


@pytest.fixture(scope="session")
def engine(tmp_path_factory, tiny_models_dir):
    """ComfyUI imported in this process on the CPU, with tiny models in its models folder."""
    base = _base_with_models(tmp_path_factory, "comfy_in_process", tiny_models_dir)
    nodes = comfy_runtime.load_in_process(base)
    return InProcessComfy(nodes, comfy_runtime.loaded_extension(base))


class InProcessComfy:
    def __init__(self, nodes_module, extension):
        self.nodes = nodes_module.NODE_CLASS_MAPPINGS
        self.extension = extension

    def run(self, node_id, **inputs):
        return comfy_runtime.run_node(self.nodes[node_id], **inputs)

    def one(self, node_id, **inputs):
        (result,) = self.run(node_id, **inputs)
        return result

    def output(self, node_id, **inputs):
        """The node's whole output (results and UI payload), run as ComfyUI's executor runs a V3 node."""
        import torch

        with torch.inference_mode():
            return self.nodes[node_id].PREPARE_CLASS_CLONE({}).execute(**inputs)

    @staticmethod
    def counting_transformer_calls(model):
        """A clone of ``model`` that counts the transformer calls it computes (added after a step cache's wrapper,
        so it runs inside it: calls the cache skips are not counted). Returns the clone and the live list."""
        import comfy.patcher_extension

        calls = []

        def count(executor, *args, **kwargs):
            calls.append(1)
            return executor(*args, **kwargs)

        counting = model.clone()
        counting.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "test_count_calls", count)
        return counting, calls

    @staticmethod
    def read_panel_frames(references):
        """The images a panel row refers to ({"filename", "subfolder", "type": "output"}), as uint8 arrays."""
        import folder_paths
        import numpy as np
        from PIL import Image

        assert all(reference["type"] == "output" for reference in references)
        folder = pathlib.Path(folder_paths.get_output_directory())
        return [np.asarray(Image.open(folder / reference["subfolder"] / reference["filename"]))
                for reference in references]

    @staticmethod
    def as_saved(frames):
        """Frames [F, H, W, 3] in [0, 1] as ComfyUI saves them to PNG (uint8, truncated)."""
        return [frame for frame in (255.0 * frames.float().cpu().numpy()).clip(0, 255).astype("uint8")]

    @staticmethod
    def press_cancel_at(model, run: int, call: int):
        """comfy_test_nodes.press_cancel_at: a clone of ``model`` that presses Cancel at transformer call ``call``
        of sampling run ``run``, and its live counts (in a server the node CachedSearchTestPressCancel presses where
        POST /cachedsearch_test/press_cancel says)."""
        from comfy_test_nodes import press_cancel_at

        return press_cancel_at(model, run, call)

    def two_expert_graph(self, high, low, positive, negative, latent, seed, steps, split_step, cfg):
        """Wan 2.2 A14B's official two KSamplerAdvanced nodes: the high-noise expert adds the seed's noise and
        samples to split_step with leftover noise, the low-noise expert finishes without adding noise."""
        shared = dict(steps=steps, cfg=cfg, sampler_name="euler", scheduler="simple", positive=positive,
                      negative=negative)
        leftover = self.one("KSamplerAdvanced", model=high, add_noise="enable", noise_seed=seed, latent_image=latent,
                            start_at_step=0, end_at_step=split_step, return_with_leftover_noise="enable", **shared)
        return self.one("KSamplerAdvanced", model=low, add_noise="disable", noise_seed=0, latent_image=leftover,
                        start_at_step=split_step, end_at_step=10000, return_with_leftover_noise="disable", **shared)

    def tiny_wan_t2v(self, length: int = 5):
        """Tiny Wan 2.1 T2V (shift 8), the test pack's two prompts and an empty 32x32 video latent of ``length``
        frames: the inputs of a KSampler on a tiny Wan graph."""
        from scripts.tiny_models import WAN21_T2V_FILE

        model = self.one("ModelSamplingSD3", model=self.one("UNETLoader", unet_name=WAN21_T2V_FILE,
                                                            weight_dtype="default"), shift=8.0)
        positive = self.one("CachedSearchTestConditioning", text_seed=1, tokens=8, pooled=False)
        negative = self.one("CachedSearchTestConditioning", text_seed=2, tokens=8, pooled=False)
        latent = self.one("EmptyHunyuanLatentVideo", width=32, height=32, length=length, batch_size=1)
        return model, positive, negative, latent


@pytest.fixture
def vae_decodes(engine, monkeypatch):
    """Every VAE decode during the test (ComfyUI's own VAE.decode, wrapped to record the decoded latent's shape)."""
    import comfy.sd

    decoded = []
    original = comfy.sd.VAE.decode

    def recording(self, samples, *args, **kwargs):
        decoded.append(tuple(samples.shape))
        return original(self, samples, *args, **kwargs)

    monkeypatch.setattr(comfy.sd.VAE, "decode", recording)
    return decoded


@pytest.fixture(scope="session")
def comfy_server(tmp_path_factory, tiny_models_dir):
    """A real ComfyUI server on loopback with this extension and tiny models installed."""
    base = _base_with_models(tmp_path_factory, "comfy_server", tiny_models_dir)
    server = comfy_runtime.ComfyServer(base)
    server.start()
    yield server
    server.stop()


NEWEST_FRONTEND = REPO_ROOT / ".runtimes" / "frontend-1.58.1"  # fetched by scripts/setup_browser.sh


@pytest.fixture(scope="session")
def newest_frontend_server(start_comfy_server):
    """One server for the whole run that serves the newest published frontend (--front-end-root)."""
    if not (NEWEST_FRONTEND / "index.html").exists() and os.environ.get("CI") != "true":
        pytest.skip(f"no {NEWEST_FRONTEND}: run scripts/setup_browser.sh")
    return start_comfy_server("comfy_newest_frontend", ["--front-end-root", str(NEWEST_FRONTEND)])


@pytest.fixture(scope="session")
def start_comfy_server(tmp_path_factory, tiny_models_dir):
    """Starts another real server with tiny models and extra command-line options; all stop at session end."""
    started = []

    def start(name: str, extra_args=()):
        server = comfy_runtime.ComfyServer(_base_with_models(tmp_path_factory, name, tiny_models_dir),
                                           extra_args=extra_args)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
