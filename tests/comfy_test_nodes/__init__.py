"""Test-only ComfyUI nodes: synthetic text conditioning, latent frames, a queue barrier, a Cancel press at a given
transformer call, a waveform saved bit for bit and a count of the transformer calls a model computes.

Real text encoders (umt5-xxl, llava-llama3) cannot be made tiny, so tests and
the tiny-weight demo feed the diffusion models CONDITIONING of the right
shapes, drawn from a seed standing in for the prompt.
"""

import pathlib
import sys

import torch

TEXT_WIDTH = 4096
POOLED_WIDTH = 768
BYT5_WIDTH = 1472


class SyntheticConditioning:
    """CONDITIONING shaped like a text encoder's output, drawn from ``text_seed``."""

    CATEGORY = "CachedSearch/testing"
    FUNCTION = "encode"
    RETURN_TYPES = ("CONDITIONING",)
    DESCRIPTION = "Test-only: conditioning of real shapes without a text encoder."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "text_seed": ("INT", {"default": 0, "min": 0, "max": 2**31 - 1, "tooltip": "Stands in for the prompt."}),
                "tokens": ("INT", {"default": 8, "min": 1, "max": 512, "tooltip": "Sequence length L."}),
                "pooled": ("BOOLEAN", {"default": False, "tooltip": "Add pooled_output [1, 768] (HunyuanVideo)."}),
            },
            "optional": {
                "width": ("INT", {"default": TEXT_WIDTH, "min": 1, "max": 8192,
                                  "tooltip": "Text encoder width: 4096 umt5-xxl / llava-llama3 / T5-XXL, "
                                  "3584 Qwen2.5-VL (HunyuanVideo 1.5, Kandinsky 5)."}),
                "byt5_tokens": ("INT", {"default": 0, "min": 0, "max": 256,
                                        "tooltip": "Add conditioning_byt5small [1, n, 1472] (HunyuanVideo 1.5); 0 adds none."}),
                "attention_mask": ("BOOLEAN", {"default": False,
                                               "tooltip": "Add an all-ones attention_mask [1, L] (LTX-Video's T5)."}),
            },
        }

    def encode(self, text_seed, tokens, pooled, width=TEXT_WIDTH, byt5_tokens=0, attention_mask=False):
        generator = torch.Generator().manual_seed(text_seed)
        context = torch.randn((1, tokens, width), generator=generator)
        extras = {}
        if pooled:
            extras["pooled_output"] = torch.randn((1, POOLED_WIDTH), generator=generator)
        if byt5_tokens:
            extras["conditioning_byt5small"] = torch.randn((1, byt5_tokens, BYT5_WIDTH), generator=generator)
        if attention_mask:
            extras["attention_mask"] = torch.ones((1, tokens), dtype=torch.long)
        return ([[context, extras]],)


class LatentFrames:
    """IMAGE frames read straight off a video latent: a stand-in for VAEs that cannot be made tiny."""

    CATEGORY = "CachedSearch/testing"
    FUNCTION = "decode"
    RETURN_TYPES = ("IMAGE",)
    DESCRIPTION = "Test-only: the latent's first three channels as frames (no VAE)."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT", {"tooltip": "A [B, C, T, H, W] video latent."})}}

    def decode(self, samples):
        latent = samples["samples"][:, :3].float()
        frames = torch.sigmoid(latent).permute(0, 2, 3, 4, 1).flatten(0, 1)  # [B*T, H, W, 3]
        return (frames.repeat_interleave(8, dim=1).repeat_interleave(8, dim=2),)


class QueueBarrier:
    """An output node that does nothing: a prompt of it alone finishes once the worker has handled everything
    queued before it, and the worker applies POST /free's flags before it takes the next prompt."""

    CATEGORY = "CachedSearch/testing"
    FUNCTION = "mark"
    RETURN_TYPES = ()
    OUTPUT_NODE = True
    DESCRIPTION = "Test-only: finishes at once; the test client queues it to know the worker is past a point."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"token": ("STRING", {"default": "", "tooltip": "Any text; a new one per barrier."})}}

    def mark(self, token):
        return {"ui": {"token": [token]}}


class SaveWaveform:
    """Writes an AUDIO's waveform as its raw float32 bytes, so a test compares sound bit for bit (SaveAudio's FLAC
    rounds the samples to integers)."""

    CATEGORY = "CachedSearch/testing"
    FUNCTION = "save"
    RETURN_TYPES = ()
    OUTPUT_NODE = True
    DESCRIPTION = "Test-only: the waveform's float32 bytes in a .f32 file of the output folder."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"audio": ("AUDIO", {"tooltip": "The sound to write."}),
                             "filename_prefix": ("STRING", {"default": "waveform"})}}

    def save(self, audio, filename_prefix):
        import folder_paths

        waveform = audio["waveform"].float().contiguous().cpu()
        folder, name, counter, subfolder, _ = folder_paths.get_save_image_path(
            filename_prefix, folder_paths.get_output_directory())
        filename = f"{name}_{counter:05}.f32"
        (pathlib.Path(folder) / filename).write_bytes(waveform.numpy().tobytes())
        return {"ui": {"waveforms": [{"filename": filename, "subfolder": subfolder, "type": "output",
                                      "shape": list(waveform.shape), "sample_rate": audio["sample_rate"]}]}}


def press_cancel_at(model, run: int, call: int):
    """A clone of ``model`` that presses Cancel as ComfyUI's POST /interrupt does (it only sets the flag) at
    transformer call ``call`` of sampling run ``run`` (a search's draft ``run``); ComfyUI's own interrupt check then
    stops the run. Returns the clone and its live counts of runs and calls."""
    counts = {"runs": 0, "calls": 0, "at": (run, call)}
    return pressing_cancel(model, counts), counts


def pressing_cancel(model, counts: dict):
    """A clone of ``model`` that counts its sampling runs and their transformer calls into ``counts`` ("runs",
    "calls") and presses Cancel once they reach ``counts["at"]`` ((run, call); None: never), which it then clears."""
    import comfy.model_management
    import comfy.patcher_extension

    def count_runs(executor, *args, **kwargs):
        counts["runs"] += 1
        counts["calls"] = 0
        return executor(*args, **kwargs)

    def count_calls(executor, *args, **kwargs):
        counts["calls"] += 1
        if counts["at"] == (counts["runs"], counts["calls"]):
            counts["at"] = None
            comfy.model_management.interrupt_current_processing(True)
        return executor(*args, **kwargs)

    pressing = model.clone()
    wrappers = comfy.patcher_extension.WrappersMP
    pressing.add_wrapper_with_key(wrappers.OUTER_SAMPLE, "test_press_cancel", count_runs)
    pressing.add_wrapper_with_key(wrappers.DIFFUSION_MODEL, "test_press_cancel", count_calls)
    return pressing


# Where the server's PressCancel models press Cancel next: POST /cachedsearch_test/press_cancel {"run", "call"} sets
# it, counting runs from then on; one press clears it.
ARMED = {"runs": 0, "calls": 0, "at": None}


class PressCancel:
    """The model, pressing Cancel where POST /cachedsearch_test/press_cancel said: a check cancels a search while
    it drafts at the same point on every run, however slow the machine (a Cancel sent on a progress event lands
    wherever the server has got to by then). The place is no input: the saved drafts' key holds the model's inputs,
    and the resumed run must find the cancelled run's drafts."""

    CATEGORY = "CachedSearch/testing"
    FUNCTION = "press"
    RETURN_TYPES = ("MODEL",)
    DESCRIPTION = "Test-only: Cancel pressed at the transformer call POST /cachedsearch_test/press_cancel names."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {"tooltip": "The model to sample with."})}}

    def press(self, model):
        return (pressing_cancel(model, ARMED),)


def register_press_route():
    """POST /cachedsearch_test/press_cancel {"run": R, "call": C}: the next Cancel press at transformer call C of the
    R-th sampling run from now (of a model through PressCancel). Only in a server (ComfyUI's main.py imported its
    server module and made the server before it loads node packs; imported in a test process, there is none)."""
    prompt_server = getattr(getattr(sys.modules.get("server"), "PromptServer", None), "instance", None)
    if prompt_server is None:
        return
    from aiohttp import web

    @prompt_server.routes.post("/cachedsearch_test/press_cancel")
    async def arm(request):
        place = await request.json()
        ARMED.update(runs=0, calls=0, at=(int(place["run"]), int(place["call"])))
        return web.json_response({"at": list(ARMED["at"])})


register_press_route()


# Forwards the first transformer block finished, of every Wan model through CountForwards, since the server started:
# GET /cachedsearch_test/forwards.
FORWARDS = {"count": 0}


class CountForwards:
    """The model, its first transformer block counting its forwards with a torch forward hook (whatever ComfyUI or a
    cache wraps around it, every transformer call computed; a call refused as the block starts is not one), so a
    server test counts what a prompt computed beside what the search's payload says it did. The hook stays on the
    module (shared by every clone of the model) from the first run on."""

    CATEGORY = "CachedSearch/testing"
    FUNCTION = "count"
    RETURN_TYPES = ("MODEL",)
    DESCRIPTION = "Test-only: counts the transformer calls a Wan model computes (GET /cachedsearch_test/forwards)."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {"tooltip": "A Wan model."})}}

    def count(self, model):
        block = model.model.diffusion_model.blocks[0]
        if not getattr(block, "cachedsearch_test_counted", False):
            block.register_forward_hook(lambda module, args, output: FORWARDS.update(count=FORWARDS["count"] + 1))
            block.cachedsearch_test_counted = True
        return (model,)


def register_forwards_route():
    """GET /cachedsearch_test/forwards: {"count": the forwards counted so far}. Only in a server."""
    prompt_server = getattr(getattr(sys.modules.get("server"), "PromptServer", None), "instance", None)
    if prompt_server is None:
        return
    from aiohttp import web

    @prompt_server.routes.get("/cachedsearch_test/forwards")
    async def forwards(request):
        return web.json_response(FORWARDS)


register_forwards_route()


class HeldDecode:
    """Holds the next draft decode of the extension's distributed draft route until released, so a test can ask the
    server, while the decode is held, whether its event loop still answers: an answer that says "held" can only come
    from a loop the decode is not running on (a decode on the loop would hold every answer until it ends)."""

    WAIT_SECONDS = 60  # a decode on the loop is held this long at most, then the test sees "not held" and fails

    def __init__(self):
        import threading

        self.armed, self.held, self.release = False, threading.Event(), threading.Event()

    def wrap(self, decode):
        def held_decode(blob):
            if self.armed:
                self.armed = False
                self.held.set()
                self.release.wait(self.WAIT_SECONDS)
                self.held.clear()
            return decode(blob)

        return held_decode


def register_held_decode_routes():
    """POST /cachedsearch_test/hold_decode holds the next draft decode; GET /cachedsearch_test/decode_held answers
    whether one is held now; POST /cachedsearch_test/release_decode lets it go."""
    prompt_server = getattr(getattr(sys.modules.get("server"), "PromptServer", None), "instance", None)
    if prompt_server is None:
        return
    from aiohttp import web

    hold = HeldDecode()

    def wrap_the_routes_decode():
        # at the first hold, not at load: the extension may load after this pack
        (module,) = [module for name, module in list(sys.modules.items())
                     if name.endswith(".nodes.distributed_routes") and hasattr(module, "decode_draft")]
        if not getattr(module.decode_draft, "held_by_test", False):
            module.decode_draft = hold.wrap(module.decode_draft)
            module.decode_draft.held_by_test = True

    @prompt_server.routes.post("/cachedsearch_test/hold_decode")
    async def arm(request):
        wrap_the_routes_decode()
        hold.armed = True
        hold.release.clear()
        return web.json_response({"armed": True})

    @prompt_server.routes.get("/cachedsearch_test/decode_held")
    async def held(request):
        return web.json_response({"held": hold.held.is_set()})

    @prompt_server.routes.post("/cachedsearch_test/release_decode")
    async def release(request):
        hold.release.set()
        return web.json_response({"released": True})


register_held_decode_routes()


NODE_CLASS_MAPPINGS = {"CachedSearchTestConditioning": SyntheticConditioning, "CachedSearchTestLatentFrames": LatentFrames,
                       "CachedSearchTestQueueBarrier": QueueBarrier, "CachedSearchTestPressCancel": PressCancel,
                       "CachedSearchTestSaveWaveform": SaveWaveform, "CachedSearchTestCountForwards": CountForwards}
NODE_DISPLAY_NAME_MAPPINGS = {"CachedSearchTestConditioning": "Synthetic Conditioning (CachedSearch tests)",
                              "CachedSearchTestLatentFrames": "Latent Frames (CachedSearch tests)",
                              "CachedSearchTestQueueBarrier": "Queue Barrier (CachedSearch tests)",
                              "CachedSearchTestPressCancel": "Press Cancel (CachedSearch tests)",
                              "CachedSearchTestSaveWaveform": "Save Waveform (CachedSearch tests)",
                              "CachedSearchTestCountForwards": "Count Forwards (CachedSearch tests)"}
