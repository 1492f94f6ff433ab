"""Tiny random-weight checkpoints with the real key names of Wan 2.1,
HunyuanVideo and the Wan 2.1 VAE, so ComfyUI's own loaders detect and run
them on a CPU in seconds.

Files named ``*_fp8_scaled`` are written in the layout of ComfyUI's official
fp8-scaled checkpoints (``fp8_scaled``): the transformer blocks' linear
weights in float8_e4m3fn with per-layer scales, and the ``scaled_fp8`` marker.
The ``.gguf`` files are written as city96's ComfyUI-GGUF loads community
quantizations (``write_gguf``; needs the ``gguf`` package, a test dependency).

The modules are ComfyUI's own classes built at tiny width (what the loaders'
detection reads back from the tensor shapes), filled from a seeded generator,
and saved as safetensors. ``generate_tiny_models`` builds them in a child
process, so a caller's own ComfyUI import keeps its settings. LTX-2's files
(checkpoint, upsampler, LoRA) are made in ``scripts/tiny_ltx2.py``.
"""

from __future__ import annotations

import math
import pathlib
import subprocess
import sys

import torch
from safetensors.torch import save_file

# ComfyUI's official repackaged file names (used by the example workflows).
WAN21_T2V_FILE = "wan2.1_t2v_1.3B_fp16.safetensors"
WAN21_I2V_FILE = "wan2.1_i2v_480p_14B_fp16.safetensors"
HUNYUAN_T2V_FILE = "hunyuan_video_t2v_720p_bf16.safetensors"
WAN21_VAE_FILE = "wan_2.1_vae.safetensors"
WAN21_LORA_FILE = "tiny_wan21_lora.safetensors"
WAN22_TI2V_FILE = "wan2.2_ti2v_5B_fp16.safetensors"
WAN22_VAE_FILE = "wan2.2_vae.safetensors"
WAN21_T2V_FP8_FILE = "wan2.1_t2v_14B_fp8_scaled.safetensors"
# Wan 2.2 A14B: two Wan 2.1-architecture experts (high noise, low noise) per task, fp8-scaled as the official files
# are, and the lightx2v 4-step LoRAs.
WAN22_A14B_FILES = {
    "t2v": ("wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors", "wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors"),
    "i2v": ("wan2.2_i2v_high_noise_14B_fp8_scaled.safetensors", "wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors"),
}
WAN22_A14B_LORA_FILES = {
    "t2v": ("wan2.2_t2v_lightx2v_4steps_lora_v1.1_high_noise.safetensors",
            "wan2.2_t2v_lightx2v_4steps_lora_v1.1_low_noise.safetensors"),
    "i2v": ("wan2.2_i2v_lightx2v_4steps_lora_v1_high_noise.safetensors",
            "wan2.2_i2v_lightx2v_4steps_lora_v1_low_noise.safetensors"),
}
# GGUF quantizations for ComfyUI-GGUF's Unet Loader (GGUF), under the names the community's uploads use.
WAN21_T2V_GGUF_FILES = {"Q8_0": "wan2.1-t2v-14b-Q8_0.gguf", "Q4_K_M": "wan2.1-t2v-14b-Q4_K_M.gguf"}
WAN22_A14B_GGUF_FILES = {"t2v": ("wan2.2_t2v_high_noise_14B_Q4_K_M.gguf", "wan2.2_t2v_low_noise_14B_Q4_K_M.gguf")}
WAN21_VACE_FILE = "wan2.1_vace_1.3B_fp16.safetensors"
HUNYUAN_I2V_FILE = "hunyuan_video_image_to_video_720p_bf16.safetensors"
HUNYUAN15_T2V_FILE = "hunyuanvideo1.5_720p_t2v_fp16.safetensors"
# ComfyUI's repackaged HunyuanVideo 1.5 ships fp16 only; fp8-scaled conversions of it circulate under this pattern.
HUNYUAN15_T2V_FP8_FILE = "hunyuanvideo1.5_720p_t2v_fp8_scaled.safetensors"
HUNYUAN15_SR_FILE = "hunyuanvideo1.5_1080p_sr_distilled_fp16.safetensors"
HUNYUAN15_UPSAMPLER_FILE = "hunyuanvideo15_latent_upsampler_1080p.safetensors"
LTXV_FILE = "ltx-video-2b-v0.9.5.safetensors"
KANDINSKY5_T2V_FILE = "kandinsky5lite_t2v_sft_5s.safetensors"

QWEN_VL_WIDTH = 3584  # qwen2.5-vl-7b hidden size (HunyuanVideo 1.5, Kandinsky 5)
BYT5_WIDTH = 1472  # byt5-small glyph encoder (HunyuanVideo 1.5)
SIGLIP_WIDTH = 1152  # HunyuanVideo 1.5's vision input; detection requires exactly this width

TEXT_WIDTH = 4096  # umt5-xxl / llava-llama3 hidden size; fixed by model detection
POOLED_WIDTH = 768  # clip-l pooled output used by HunyuanVideo's vector_in


def _fill_deterministically(module: torch.nn.Module, seed: int, dtype: torch.dtype = torch.float32
                            ) -> dict[str, torch.Tensor]:
    """Scaled-normal weights, unit norm gains, small everything else (from the shapes alone: the module may be on
    the meta device)."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, tensor in sorted(module.state_dict().items()):
        shape = tuple(tensor.shape)
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("gamma", "scale") or (leaf == "weight" and len(shape) == 1 and "norm" in name):
            value = torch.ones(shape)
        elif leaf == "weight" and len(shape) >= 2:
            fan_in = math.prod(shape[1:])
            value = torch.randn(shape, generator=generator) / math.sqrt(fan_in)
        else:
            value = torch.randn(shape, generator=generator) * 0.02
        state[name] = value.to(dtype).contiguous()
    return state


# The official fp8-scaled files quantize the linear layers inside the transformer blocks (Wan: self_attn and
# cross_attn q/k/v/o, ffn.0, ffn.2); embeddings, heads, norms and biases stay in 16 bits.
FP8_BLOCK_PREFIXES = ("blocks.", "double_blocks.", "single_blocks.")
SCALED_FP8_MARKER = "scaled_fp8"


def fp8_scaled(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` in ComfyUI's fp8-scaled layout, as ComfyUI 0.3.x saves it and both runtimes load it:

    - every 2-D ``<layer>.weight`` of a transformer block becomes float8_e4m3fn after dividing by a per-layer scale
      (absmax / 448, so the largest weight lands on fp8's largest value), with ``<layer>.scale_weight`` (float32,
      0-dim) to multiply it back and ``<layer>.scale_input`` (float32 1.0: inputs unscaled);
    - every other tensor in bf16;
    - the marker ``scaled_fp8``: an empty float8_e4m3fn tensor (0.3.x reads its dtype as the weights' fp8 format
      and its emptiness as "fp8 matmul allowed"; 0.33 converts the layers to its per-layer ``comfy_quant`` format).
    """
    fp8_max = torch.finfo(torch.float8_e4m3fn).max
    converted = {}
    for name, tensor in state.items():
        layer, _, leaf = name.rpartition(".")
        if leaf == "weight" and tensor.ndim == 2 and any(prefix in name for prefix in FP8_BLOCK_PREFIXES):
            scale = (tensor.abs().max().float() / fp8_max).clamp_min(torch.finfo(torch.float32).tiny)
            converted[name] = (tensor.float() / scale).to(torch.float8_e4m3fn)
            converted[f"{layer}.scale_weight"] = scale.reshape(())
            converted[f"{layer}.scale_input"] = torch.ones((), dtype=torch.float32)
        else:
            converted[name] = tensor.to(torch.bfloat16)
    converted[SCALED_FP8_MARKER] = torch.empty(0, dtype=torch.float8_e4m3fn)
    return converted


# Which Wan tensors community GGUF files keep unquantized (ComfyUI-GGUF's tools: convert.py keeps ".modulation" in
# F32, its llama.cpp patch never quantizes these prefixes nor any tensor that is not 2-D).
GGUF_WAN_UNQUANTIZED = ("modulation", "patch_embedding.", "text_embedding.", "time_projection.", "time_embedding.",
                        "img_emb.", "head.")
GGUF_SMALL_TENSOR = 1024  # convert.py keeps tensors of at most this many values in F32
# file name quantization -> (the GGML type of the block linears, the file type recorded in the header)
GGUF_QUANTIZATIONS = {"Q8_0": ("Q8_0", "MOSTLY_Q8_0"), "Q4_K_M": ("Q4_K", "MOSTLY_Q4_K_M")}
QK_K = 256  # values per K-quant super-block


def quantize_q4_k(rows):
    """Float rows (the last dimension a multiple of 256) as GGML Q4_K blocks, uint8 rows of 144 bytes per 256 values.

    gguf-py cannot quantize K-quants; this is the plain min/max rounding (per 32-value sub-block a 6-bit scale and
    min under the super-block's fp16 ``d`` and ``dmin``, 4-bit values), read back by any GGML dequantizer.
    """
    import numpy as np

    sub_blocks = rows.astype(np.float32).reshape(-1, 8, 32)
    low = np.minimum(sub_blocks.min(axis=-1), 0.0)
    scale = (sub_blocks.max(axis=-1) - low) / 15.0
    d = (scale.max(axis=-1) / 63.0).astype(np.float16)
    dmin = ((-low).max(axis=-1) / 63.0).astype(np.float16)

    def nonzero(value):
        return np.where(value > 0, value, 1.0)

    scales = np.clip(np.rint(scale / nonzero(d.astype(np.float32))[:, None]), 0, 63).astype(np.uint8)
    mins = np.clip(np.rint(-low / nonzero(dmin.astype(np.float32))[:, None]), 0, 63).astype(np.uint8)
    step = d.astype(np.float32)[:, None] * scales
    offset = dmin.astype(np.float32)[:, None] * mins
    values = np.clip(np.rint((sub_blocks + offset[..., None]) / nonzero(step)[..., None]), 0, 15).astype(np.uint8)
    # 12 bytes: low 6 bits of scales 0-3 and mins 0-3, their top 2 bits carrying bits 4-5 of scales / mins 4-7,
    # then the low nibbles of scales 4-7 with those of mins 4-7.
    packed_scales = np.concatenate([(scales[:, :4] & 0x3F) | ((scales[:, 4:] >> 4) << 6),
                                    (mins[:, :4] & 0x3F) | ((mins[:, 4:] >> 4) << 6),
                                    (scales[:, 4:] & 0x0F) | ((mins[:, 4:] & 0x0F) << 4)], axis=-1)
    pairs = values.reshape(-1, 4, 2, 32)  # per 64 values: sub-block 2j in the low nibbles, 2j + 1 in the high
    nibbles = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).reshape(-1, 128)
    blocks = np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), packed_scales,
                             nibbles], axis=-1)
    return blocks.reshape(rows.shape[0], -1)


def gguf_tensor_type(name: str, tensor: torch.Tensor, quantized: str) -> str:
    """The GGML type a community Wan GGUF file stores ``name`` in: 1-D, tiny and ``.modulation`` tensors in F32,
    the block linears' 2-D weights in the file's quantization, every other tensor in F16."""
    if tensor.ndim <= 1 or tensor.numel() <= GGUF_SMALL_TENSOR or "modulation" in name:
        return "F32"
    if tensor.ndim == 2 and not any(prefix in name for prefix in GGUF_WAN_UNQUANTIZED):
        return quantized
    return "F16"


def write_gguf(path: pathlib.Path, state: dict[str, torch.Tensor], quantization: str, arch: str = "wan") -> None:
    """``state`` as a ``.gguf`` file that ComfyUI-GGUF's loader reads: ``general.architecture`` = ``arch``, the
    tensors under their checkpoint names (no prefix), types by ``gguf_tensor_type``. A K-quant needs rows of 256
    values; a narrower tiny weight is stored as rows of 256 with its real shape in ``comfy.gguf.orig_shape.<name>``
    (the loader's own reshape metadata)."""
    import gguf
    import numpy as np

    quantized, file_type = GGUF_QUANTIZATIONS[quantization]
    writer = gguf.GGUFWriter(path=None, arch=arch)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(gguf.LlamaFileType[file_type])
    for name, tensor in state.items():
        kind = gguf_tensor_type(name, tensor, quantized)
        values = tensor.float().numpy()
        if kind == "F32":
            writer.add_tensor(name, values)
        elif kind == "F16":
            writer.add_tensor(name, values.astype(np.float16))
        elif kind == "Q4_K":
            if values.shape[-1] % QK_K:
                writer.add_array(f"comfy.gguf.orig_shape.{name}", [int(size) for size in values.shape])
                values = values.reshape(-1, QK_K)
            writer.add_tensor(name, quantize_q4_k(values), raw_dtype=gguf.GGMLQuantizationType.Q4_K)
        else:
            qtype = gguf.GGMLQuantizationType[kind]
            writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
    writer.write_header_to_file(path=str(path))
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def wan21_state_dict(model_type: str = "t2v", num_layers: int = 2, seed: int = 0, dim: int = 128, ffn_dim: int = 256,
                     dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """A random Wan 2.1 / 2.2 state dict; tiny by default, any width and depth (e.g. 1.3B: dim 1536, ffn_dim 8960,
    30 layers) built from shapes only, so a real-size one costs its weights' memory once."""
    import comfy.ldm.wan.model
    import comfy.ops

    # Detection reads num_heads = dim // 128. I2V adds 20 channels (mask + image latent);
    # Wan 2.2 TI2V ("ti2v") is a T2V model on 48-channel latents.
    channels = {"t2v": (16, 16), "i2v": (36, 16), "ti2v": (48, 48)}[model_type]
    with torch.device("meta"):
        model = comfy.ldm.wan.model.WanModel(
            model_type="t2v" if model_type == "ti2v" else model_type, dim=dim, ffn_dim=ffn_dim,
            num_heads=dim // 128, num_layers=num_layers, in_dim=channels[0], out_dim=channels[1],
            text_dim=TEXT_WIDTH, freq_dim=256, operations=comfy.ops.disable_weight_init,
        )
    return _fill_deterministically(model, seed, dtype)


def _accepted_fields(params_class, **optional) -> dict:
    """The optional constructor fields that this runtime's params dataclass declares (it differs by version)."""
    import dataclasses

    declared = {field.name for field in dataclasses.fields(params_class)}
    return {name: value for name, value in optional.items() if name in declared}


def hunyuan_t2v_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    import comfy.ldm.hunyuan_video.model
    import comfy.ops

    # Detection: 16 input channels and vector_in/guidance_in keep it on HunyuanVideo T2V.
    model = comfy.ldm.hunyuan_video.model.HunyuanVideo(
        image_model="hunyuan_video", in_channels=16, out_channels=16, vec_in_dim=POOLED_WIDTH,
        context_in_dim=TEXT_WIDTH, hidden_size=128, mlp_ratio=4.0, num_heads=1, depth=1,
        depth_single_blocks=1, axes_dim=[16, 56, 56], theta=256, patch_size=[1, 2, 2], qkv_bias=True,
        guidance_embed=True, byt5=False, meanflow=False, use_cond_type_embedding=False, vision_in_dim=None,
        operations=comfy.ops.disable_weight_init,
        # ComfyUI 0.33 added meanflow_sum as a required field; 0.3.75 rejects it.
        **_accepted_fields(comfy.ldm.hunyuan_video.model.HunyuanVideoParams, meanflow_sum=False),
    )
    return _fill_deterministically(model, seed)


def wan21_vace_state_dict(seed: int = 3) -> dict[str, torch.Tensor]:
    """Wan 2.1 VACE: detection keys on ``vace_patch_embedding``; 96 VACE channels (control latent pair + mask)."""
    import comfy.ldm.wan.model
    import comfy.ops

    model = comfy.ldm.wan.model.VaceWanModel(
        dim=128, ffn_dim=256, num_heads=1, num_layers=2, in_dim=16, out_dim=16, text_dim=TEXT_WIDTH, freq_dim=256,
        vace_layers=1, vace_in_dim=96, operations=comfy.ops.disable_weight_init,
    )
    return _fill_deterministically(model, seed)


def _hunyuan_video_state_dict(seed: int, **params) -> dict[str, torch.Tensor]:
    import comfy.ldm.hunyuan_video.model
    import comfy.ops

    common = dict(
        image_model="hunyuan_video", hidden_size=128, mlp_ratio=4.0, num_heads=1, depth=1, depth_single_blocks=1,
        axes_dim=[16, 56, 56], theta=256, patch_size=[1, 2, 2], qkv_bias=True, meanflow=False,
        operations=comfy.ops.disable_weight_init,
    )
    params = common | params
    # ComfyUI 0.33 added meanflow_sum as a required field (True exactly when vision_in exists); 0.3.75 rejects it.
    optional = _accepted_fields(comfy.ldm.hunyuan_video.model.HunyuanVideoParams,
                                meanflow_sum=params.get("vision_in_dim") is not None)
    return _fill_deterministically(comfy.ldm.hunyuan_video.model.HunyuanVideo(**params, **optional), seed)


def hunyuan_i2v_state_dict(seed: int = 4) -> dict[str, torch.Tensor]:
    """HunyuanVideo I2V: 33 input channels (latent, image latent, mask) select HunyuanVideoI2V."""
    return _hunyuan_video_state_dict(
        seed, in_channels=33, out_channels=16, vec_in_dim=POOLED_WIDTH, context_in_dim=TEXT_WIDTH,
        guidance_embed=True, byt5=False, use_cond_type_embedding=False, vision_in_dim=None,
    )


def hunyuan15_state_dict(in_channels: int = 65, seed: int = 5) -> dict[str, torch.Tensor]:
    """HunyuanVideo 1.5: 32-channel latents, Qwen2.5-VL + ByT5 text, a 1152-wide vision input.

    65 input channels (latent, image latent, mask) is the 720p T2V/I2V model; 98 the distilled super-resolution
    model (latent, upsampled latent pair and two masks).
    """
    return _hunyuan_video_state_dict(
        seed, in_channels=in_channels, out_channels=32, vec_in_dim=None, context_in_dim=QWEN_VL_WIDTH,
        guidance_embed=False, byt5=True, use_cond_type_embedding=True, vision_in_dim=SIGLIP_WIDTH,
        patch_size=[1, 1, 1],
    )


def ltxv_state_dict(seed: int = 6) -> dict[str, torch.Tensor]:
    """LTX-Video: detection reads the head width as attn2.to_k rows / 32, so 32 heads of width 4."""
    import comfy.ldm.lightricks.model
    import comfy.ops

    model = comfy.ldm.lightricks.model.LTXVModel(
        in_channels=128, cross_attention_dim=128, attention_head_dim=4, num_attention_heads=32,
        caption_channels=TEXT_WIDTH, num_layers=1, operations=comfy.ops.disable_weight_init,
    )
    return _fill_deterministically(model, seed)


def kandinsky5_state_dict(seed: int = 7) -> dict[str, torch.Tensor]:
    """Kandinsky 5 (ComfyUI 0.33 and later): width 128 = 2 heads of the default 64-wide rope axes."""
    import comfy.ldm.kandinsky5.model
    import comfy.ops

    # 16 latent + 16 image + 1 mask channels, times the 1x2x2 patch.
    model = comfy.ldm.kandinsky5.model.Kandinsky5(
        in_visual_dim=16, out_visual_dim=16, in_text_dim=QWEN_VL_WIDTH, in_text_dim2=POOLED_WIDTH, time_dim=64,
        model_dim=128, ff_dim=256, visual_embed_dim=33 * 4, num_text_blocks=1, num_visual_blocks=1,
        operations=comfy.ops.disable_weight_init,
    )
    return _fill_deterministically(model, seed)


def hunyuan15_latent_upsampler_state_dict(seed: int = 9) -> dict[str, torch.Tensor]:
    """HunyuanVideo 1.5's 1080p latent upsampler; the loader reads its widths from ``conv_in`` and ``up.*``."""
    import nodes  # noqa: F401  puts comfy/ on sys.path; ComfyUI 0.3.75's upsampler imports model_management bare
    import comfy.ldm.hunyuan_video.upsampler

    model = comfy.ldm.hunyuan_video.upsampler.Upsampler(z_channels=32, out_channels=32, block_out_channels=(32, 32))
    return _fill_deterministically(model, seed)


def runtime_has(module_name: str, attribute: str) -> bool:
    """Whether this ComfyUI defines ``module_name.attribute`` (families differ between versions)."""
    import importlib

    try:
        return hasattr(importlib.import_module(module_name), attribute)
    except ImportError:
        return False


def wan21_vae_state_dict(dim: int = 8, seed: int = 0) -> dict[str, torch.Tensor]:
    import comfy.ldm.wan.vae

    vae = comfy.ldm.wan.vae.WanVAE(
        dim=dim, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
        temperal_downsample=[False, True, True], dropout=0.0,
    )
    return _fill_deterministically(vae, seed)


def wan22_vae_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    """The Wan 2.2 VAE cannot be tiny: ComfyUI fixes its width at 160 (705M parameters). Saved in fp16."""
    import comfy.ldm.wan.vae2_2

    vae = comfy.ldm.wan.vae2_2.WanVAE(
        dim=160, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
        temperal_downsample=[False, True, True], dropout=0.0,
    )
    return {name: tensor.half() for name, tensor in _fill_deterministically(vae, seed).items()}


def wan21_lora_state_dict(rank: int = 4, seed: int = 0) -> dict[str, torch.Tensor]:
    """A LoRA on both blocks' self-attention projections, in ComfyUI's ``diffusion_model.`` key format."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for block in range(2):
        for projection in ("q", "k", "v", "o"):
            key = f"diffusion_model.blocks.{block}.self_attn.{projection}"
            state[f"{key}.lora_up.weight"] = torch.randn((128, rank), generator=generator) * 0.5
            state[f"{key}.lora_down.weight"] = torch.randn((rank, 128), generator=generator) * 0.5
            state[f"{key}.alpha"] = torch.tensor(float(rank))
    return state


def wan22_a14b_targets(models_dir: pathlib.Path) -> dict:
    """Tiny stand-ins for Wan 2.2 A14B under the official names: per task, two experts with different weights
    (T2V on 16 channels, I2V on a 36-channel input) and two LoRAs."""
    targets = {}
    for task_index, task in enumerate(("t2v", "i2v")):
        for expert_index, expert in enumerate(("high", "low")):
            seed = 10 + 2 * task_index + expert_index
            targets[f"wan22_a14b_{task}_{expert}"] = (
                models_dir / "diffusion_models" / WAN22_A14B_FILES[task][expert_index],
                lambda task=task, seed=seed: fp8_scaled(wan21_state_dict(task, seed=seed)),
            )
            targets[f"wan22_a14b_{task}_lora_{expert}"] = (
                models_dir / "loras" / WAN22_A14B_LORA_FILES[task][expert_index],
                lambda seed=seed: wan21_lora_state_dict(seed=seed),
            )
    return targets


def wan_gguf_targets(models_dir: pathlib.Path) -> dict:
    """GGUF quantizations of the same random models as the fp8-scaled files (same seeds): Wan 2.1 T2V in Q8_0 and
    Q4_K_M, the Wan 2.2 A14B T2V experts in Q4_K_M. Each entry: (path, state builder, quantization)."""
    folder = models_dir / "diffusion_models"
    targets = {
        f"wan21_t2v_gguf_{quantization.lower()}": (folder / name, lambda: wan21_state_dict(seed=20), quantization)
        for quantization, name in WAN21_T2V_GGUF_FILES.items()
    }
    for expert_index, expert in enumerate(("high", "low")):
        targets[f"wan22_a14b_t2v_{expert}_gguf"] = (folder / WAN22_A14B_GGUF_FILES["t2v"][expert_index],
                                                    lambda seed=10 + expert_index: wan21_state_dict(seed=seed),
                                                    "Q4_K_M")
    return targets


def write_tiny_models(models_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """Write the tiny checkpoints into ComfyUI's folder layout under ``models_dir``.

    Existing files are kept: the content depends only on the seeds above.
    """
    models_dir = pathlib.Path(models_dir)
    targets = {
        "wan21_t2v": (models_dir / "diffusion_models" / WAN21_T2V_FILE, wan21_state_dict),
        "wan21_t2v_fp8": (models_dir / "diffusion_models" / WAN21_T2V_FP8_FILE,
                          lambda: fp8_scaled(wan21_state_dict(seed=20))),
        "wan21_i2v": (models_dir / "diffusion_models" / WAN21_I2V_FILE, lambda: wan21_state_dict("i2v", seed=1)),
        "hunyuan_t2v": (models_dir / "diffusion_models" / HUNYUAN_T2V_FILE, hunyuan_t2v_state_dict),
        "wan21_vae": (models_dir / "vae" / WAN21_VAE_FILE, wan21_vae_state_dict),
        "wan21_lora": (models_dir / "loras" / WAN21_LORA_FILE, wan21_lora_state_dict),
        "wan22_ti2v": (models_dir / "diffusion_models" / WAN22_TI2V_FILE, lambda: wan21_state_dict("ti2v", seed=2)),
        "wan22_vae": (models_dir / "vae" / WAN22_VAE_FILE, wan22_vae_state_dict),
        **wan22_a14b_targets(models_dir),
        "wan21_vace": (models_dir / "diffusion_models" / WAN21_VACE_FILE, wan21_vace_state_dict),
        "hunyuan_i2v": (models_dir / "diffusion_models" / HUNYUAN_I2V_FILE, hunyuan_i2v_state_dict),
        "hunyuan15_t2v": (models_dir / "diffusion_models" / HUNYUAN15_T2V_FILE, hunyuan15_state_dict),
        "hunyuan15_t2v_fp8": (models_dir / "diffusion_models" / HUNYUAN15_T2V_FP8_FILE,
                              lambda: fp8_scaled(hunyuan15_state_dict(seed=21))),
        "hunyuan15_sr": (models_dir / "diffusion_models" / HUNYUAN15_SR_FILE, lambda: hunyuan15_state_dict(98, seed=8)),
        "ltxv": (models_dir / "diffusion_models" / LTXV_FILE, ltxv_state_dict),
        "hunyuan15_upsampler": (models_dir / "latent_upscale_models" / HUNYUAN15_UPSAMPLER_FILE,
                                hunyuan15_latent_upsampler_state_dict),
    }
    if runtime_has("comfy.ldm.kandinsky5.model", "Kandinsky5"):
        targets["kandinsky5_t2v"] = (models_dir / "diffusion_models" / KANDINSKY5_T2V_FILE, kandinsky5_state_dict)
    if runtime_has("comfy.ldm.lightricks.av_model", "LTXAVModel"):
        from scripts.tiny_ltx2 import ltx2_targets  # here: tiny_ltx2 imports this module's filler

        targets |= ltx2_targets(models_dir)
    for path, build in targets.values():
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            built = build()
            # A builder returns the state dict, or the state dict and the file's metadata.
            state, metadata = built if isinstance(built, tuple) else (built, None)
            save_file(state, str(partial), metadata=metadata)
            partial.rename(path)
    gguf_targets = wan_gguf_targets(models_dir)
    for path, build, quantization in gguf_targets.values():
        if not path.exists():
            partial = path.with_suffix(".partial")
            write_gguf(partial, build(), quantization)
            partial.rename(path)
    return {name: path for name, (path, *_) in (targets | gguf_targets).items()}


def generate_tiny_models(models_dir: pathlib.Path) -> None:
    """Run ``write_tiny_models`` in a fresh interpreter (ComfyUI imported there, on the CPU)."""
    repo_root = pathlib.Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "scripts.tiny_models", str(models_dir)], cwd=repo_root, check=True,
                   stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    from scripts.comfy_runtime import import_comfy

    import_comfy()
    for written in write_tiny_models(pathlib.Path(sys.argv[1])).values():
        print(written)
