"""Tiny random-weight LTX-2.3 files (ComfyUI's LTXAV, ComfyUI 0.33 and later) under the official names: the
transformer alone, the whole checkpoint as the templates load it (transformer, video VAE, audio VAE and vocoder),
the x2 spatial latent upsampler and the distilled LoRA, each with its widths in the metadata as the official files
have them. ``scripts.tiny_models`` writes them with the other families when the runtime has LTXAV (``ltx2_targets``).
"""

from __future__ import annotations

import json
import pathlib

import torch

from scripts.tiny_models import _fill_deterministically

# LTX-2.3's transformer alone (the official file is a whole checkpoint; the transformer loads through UNETLoader)
LTX2_FILE = "ltx-2.3-22b-dev.safetensors"
# The official LTX-2.3 checkpoint, as the templates load it (LTXVAudioVAELoader reads the audio VAE out of it).
LTX2_CHECKPOINT_FILE = "ltx-2.3-22b-dev-fp8.safetensors"
# The official LTX-2.3 spatial upscaler (x2) the two-stage templates upsample the first stage's video latent with.
LTX2_UPSAMPLER_FILE = "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"
# The official LTX-2.3 distilled LoRA both stages of the templates load at 0.5.
LTX2_DISTILLED_LORA_FILE = "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors"


# LTX-2 (ComfyUI's LTXAV): its widths are not all readable from the tensor shapes, so the official files carry them in
# the safetensors metadata ("config" -> "transformer"), which ComfyUI's detection reads. The tiny ones: video 32 heads
# of 4 (detection reads the head width as attn2.to_k rows / 32), audio 4 heads of 16, 64-wide captions, text
# connectors of one layer; LTX-2's rope settings. Audio latents are 8 channels x 16 frequency bins = 128 inputs.
LTX2_TINY_CONFIG = {
    "num_layers": 2, "attention_head_dim": 4, "num_attention_heads": 32, "cross_attention_dim": 128,
    "audio_attention_head_dim": 16, "audio_num_attention_heads": 4, "audio_cross_attention_dim": 64,
    "caption_channels": 64, "connector_attention_head_dim": 16, "connector_num_attention_heads": 4,
    "connector_num_layers": 1, "rope_type": "split", "frequencies_precision": "float64",
}


# LTX-2's audio VAE (mel autoencoder and vocoder) also takes its widths from the metadata: 8 channels at the first
# level instead of 128, a vocoder from 64 channels instead of 1024 with one resblock per upsampling. The latent
# layout is LTX-2's: 8 channels x 16 frequency bins, 25 latents a second of 16 kHz audio.
LTX2_TINY_AUDIO_VAE_CONFIG = {
    "audio_vae": {
        "model": {"params": {"sampling_rate": 16000, "ddconfig": {
            "double_z": True, "mel_bins": 64, "z_channels": 8, "resolution": 256, "downsample_time": False,
            "in_channels": 2, "out_ch": 2, "ch": 8, "ch_mult": [1, 2, 4], "num_res_blocks": 1, "attn_resolutions": [],
            "dropout": 0.0, "mid_block_add_attention": False, "norm_type": "pixel", "causality_axis": "height"}}},
        "preprocessing": {"stft": {"filter_length": 1024, "hop_length": 160}},
    },
    "vocoder": {"upsample_initial_channel": 64, "upsample_rates": [5, 4, 2, 2, 2],
                "upsample_kernel_sizes": [10, 8, 4, 4, 4], "resblock_kernel_sizes": [3],
                "resblock_dilation_sizes": [[1, 3, 5]], "stereo": True},
}


# LTX-2's video VAE (32x space, 8x time, 128 latent channels), its blocks one layer deep from 8 channels.
LTX2_TINY_VIDEO_VAE_CONFIG = {"vae": {
    "_class_name": "CausalVideoAutoencoder", "dims": 3, "in_channels": 3, "out_channels": 3, "latent_channels": 128,
    "encoder_blocks": [["res_x", {"num_layers": 1}], ["compress_space_res", {"multiplier": 2}],
                       ["res_x", {"num_layers": 1}], ["compress_time_res", {"multiplier": 2}],
                       ["res_x", {"num_layers": 1}], ["compress_all_res", {"multiplier": 2}],
                       ["res_x", {"num_layers": 1}], ["compress_all_res", {"multiplier": 2}], ["res_x", {"num_layers": 1}]],
    "decoder_blocks": [["res_x", {"num_layers": 1, "inject_noise": False}],
                       ["compress_all", {"residual": True, "multiplier": 2}],
                       ["res_x", {"num_layers": 1, "inject_noise": False}],
                       ["compress_all", {"residual": True, "multiplier": 2}],
                       ["res_x", {"num_layers": 1, "inject_noise": False}],
                       ["compress_all", {"residual": True, "multiplier": 2}],
                       ["res_x", {"num_layers": 1, "inject_noise": False}]],
    "scaling_factor": 1.0, "norm_layer": "pixel_norm", "patch_size": 4, "latent_log_var": "uniform",
    "use_quant_conv": False, "causal_decoder": False, "timestep_conditioning": False,
    "encoder_base_channels": 8, "decoder_base_channels": 8,
}}


def ltx2_checkpoint(seed: int = 22) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """LTX-2 (LTXAV, ComfyUI 0.33 and later): the state dict and the metadata that tells detection its widths."""
    import comfy.ldm.lightricks.av_model
    import comfy.ops

    with torch.device("meta"):
        model = comfy.ldm.lightricks.av_model.LTXAVModel(in_channels=128, audio_in_channels=128,
                                                         operations=comfy.ops.disable_weight_init, **LTX2_TINY_CONFIG)
    return _fill_deterministically(model, seed), {"config": json.dumps({"transformer": LTX2_TINY_CONFIG})}


def ltx2_full_checkpoint(seed: int = 23) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The official checkpoint's layout: the transformer above under ``model.diffusion_model.``, the video VAE under
    ``vae.``, the audio VAE under ``audio_vae.`` and ``vocoder.``, every width in the metadata. No text encoder
    (the templates load Gemma beside it)."""
    import comfy.ldm.lightricks.vae.audio_vae
    import comfy.ldm.lightricks.vae.causal_video_autoencoder

    config = {"transformer": LTX2_TINY_CONFIG} | LTX2_TINY_VIDEO_VAE_CONFIG | LTX2_TINY_AUDIO_VAE_CONFIG
    with torch.device("meta"):
        audio_vae = comfy.ldm.lightricks.vae.audio_vae.AudioVAE({"config": json.dumps(config)})
        video_vae = comfy.ldm.lightricks.vae.causal_video_autoencoder.VideoVAE(config=config["vae"])
    state = {f"model.diffusion_model.{name}": tensor for name, tensor in ltx2_checkpoint()[0].items()}
    state |= {f"vae.{name}": tensor for name, tensor in _fill_deterministically(video_vae, seed + 1).items()}
    for name, tensor in _fill_deterministically(audio_vae, seed).items():
        state[f"audio_vae.{name.removeprefix('autoencoder.')}" if name.startswith("autoencoder.") else name] = tensor
    # Unit per-channel deviations: encoding divides by them (the filler would draw numbers near 0).
    deviations = "audio_vae.per_channel_statistics.std-of-means"
    state[deviations] = torch.ones_like(state[deviations])
    return state, {"config": json.dumps(config)}


def ltx2_distilled_lora(seed: int = 25) -> dict[str, torch.Tensor]:
    """The official distilled LoRA's layout: ``diffusion_model.<layer>.lora_A`` / ``lora_B`` on every linear layer
    of the transformer (video, audio and their cross attentions, feed-forwards, AdaLN), no alpha, and a rank that
    differs from layer to layer as the "dynamic" file's does (here 1 to 4), in bf16."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    linear = [(name, tensor.shape) for name, tensor in ltx2_checkpoint()[0].items()
              if name.endswith(".weight") and tensor.dim() == 2]
    for index, (name, (rows, columns)) in enumerate(linear):
        layer, rank = f"diffusion_model.{name.removesuffix('.weight')}", 1 + index % 4
        state[f"{layer}.lora_A.weight"] = (torch.randn((rank, columns), generator=generator) / columns**0.5).bfloat16()
        state[f"{layer}.lora_B.weight"] = (torch.randn((rows, rank), generator=generator) * 0.1).bfloat16()
    return state


# LTX-2's latent upsampler: x2 in space on 128 channels, its widths in the metadata as the official file has them;
# 32 middle channels (its GroupNorm needs a multiple of 32) and one block a stage.
LTX2_TINY_UPSAMPLER_CONFIG = {"_class_name": "LatentUpsampler", "in_channels": 128, "mid_channels": 32,
                              "num_blocks_per_stage": 1, "dims": 3, "spatial_upsample": True,
                              "temporal_upsample": False, "spatial_scale": 2.0, "rational_resampler": False}


def ltx2_latent_upsampler(seed: int = 24) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """LTX-2's spatial latent upsampler, as LatentUpscaleModelLoader reads it (the config in the metadata)."""
    import comfy.ldm.lightricks.latent_upsampler
    import comfy.ops

    with torch.device("meta"):
        model = comfy.ldm.lightricks.latent_upsampler.LatentUpsampler.from_config(
            LTX2_TINY_UPSAMPLER_CONFIG, operations=comfy.ops.disable_weight_init)
    return _fill_deterministically(model, seed), {"config": json.dumps(LTX2_TINY_UPSAMPLER_CONFIG)}


def ltx2_targets(models_dir: pathlib.Path) -> dict:
    """The LTX-2 files under ``models_dir`` in ComfyUI's folder layout, each with its builder (a state dict and the
    file's metadata)."""
    return {
        "ltx2": (models_dir / "diffusion_models" / LTX2_FILE, ltx2_checkpoint),
        "ltx2_checkpoint": (models_dir / "checkpoints" / LTX2_CHECKPOINT_FILE, ltx2_full_checkpoint),
        "ltx2_upsampler": (models_dir / "latent_upscale_models" / LTX2_UPSAMPLER_FILE, ltx2_latent_upsampler),
        "ltx2_lora": (models_dir / "loras" / LTX2_DISTILLED_LORA_FILE, ltx2_distilled_lora),
    }
