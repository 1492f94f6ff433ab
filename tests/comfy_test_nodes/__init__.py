"""Test-only ComfyUI nodes: synthetic text conditioning.

Real text encoders (umt5-xxl, llava-llama3) cannot be made tiny, so tests and
the tiny-weight demo feed the diffusion models CONDITIONING of the right
shapes, drawn from a seed standing in for the prompt.
"""

import torch

TEXT_WIDTH = 4096
POOLED_WIDTH = 768


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
            }
        }

    def encode(self, text_seed, tokens, pooled):
        generator = torch.Generator().manual_seed(text_seed)
        context = torch.randn((1, tokens, TEXT_WIDTH), generator=generator)
        extras = {}
        if pooled:
            extras["pooled_output"] = torch.randn((1, POOLED_WIDTH), generator=generator)
        return ([[context, extras]],)


NODE_CLASS_MAPPINGS = {"CachedSearchTestConditioning": SyntheticConditioning}
NODE_DISPLAY_NAME_MAPPINGS = {"CachedSearchTestConditioning": "Synthetic Conditioning (CachedSearch tests)"}
