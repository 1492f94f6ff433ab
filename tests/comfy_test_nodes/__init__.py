"""Test-only ComfyUI nodes: synthetic text conditioning, latent frames and a queue barrier.

Real text encoders (umt5-xxl, llava-llama3) cannot be made tiny, so tests and
the tiny-weight demo feed the diffusion models CONDITIONING of the right
shapes, drawn from a seed standing in for the prompt.
"""

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


NODE_CLASS_MAPPINGS = {"CachedSearchTestConditioning": SyntheticConditioning, "CachedSearchTestLatentFrames": LatentFrames,
                       "CachedSearchTestQueueBarrier": QueueBarrier}
NODE_DISPLAY_NAME_MAPPINGS = {"CachedSearchTestConditioning": "Synthetic Conditioning (CachedSearch tests)",
                              "CachedSearchTestLatentFrames": "Latent Frames (CachedSearch tests)",
                              "CachedSearchTestQueueBarrier": "Queue Barrier (CachedSearch tests)"}
