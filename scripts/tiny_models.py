"""Tiny random-weight checkpoints with the real key names of Wan 2.1,
HunyuanVideo and the Wan 2.1 VAE, so ComfyUI's own loaders detect and run
them on a CPU in seconds.

The modules are ComfyUI's own classes built at tiny width (what the loaders'
detection reads back from the tensor shapes), filled from a seeded generator,
and saved as safetensors. ``generate_tiny_models`` builds them in a child
process, so a caller's own ComfyUI import keeps its settings.
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
# Wan 2.2 A14B: two Wan 2.1-architecture experts (high noise, low noise) per task, and the lightx2v 4-step LoRAs.
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

TEXT_WIDTH = 4096  # umt5-xxl / llava-llama3 hidden size; fixed by model detection
POOLED_WIDTH = 768  # clip-l pooled output used by HunyuanVideo's vector_in


def _fill_deterministically(module: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Scaled-normal weights, unit norm gains, small everything else."""
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
        state[name] = value.contiguous()
    return state


def wan21_state_dict(model_type: str = "t2v", num_layers: int = 2, seed: int = 0) -> dict[str, torch.Tensor]:
    import comfy.ldm.wan.model
    import comfy.ops

    # dim 128 -> detection reads num_heads = dim // 128 = 1. I2V adds 20 channels (mask + image latent);
    # Wan 2.2 TI2V ("ti2v") is a T2V model on 48-channel latents.
    channels = {"t2v": (16, 16), "i2v": (36, 16), "ti2v": (48, 48)}[model_type]
    model = comfy.ldm.wan.model.WanModel(
        model_type="t2v" if model_type == "ti2v" else model_type, dim=128, ffn_dim=256, num_heads=1,
        num_layers=num_layers, in_dim=channels[0], out_dim=channels[1], text_dim=TEXT_WIDTH, freq_dim=256,
        operations=comfy.ops.disable_weight_init,
    )
    return _fill_deterministically(model, seed)


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
                lambda task=task, seed=seed: wan21_state_dict(task, seed=seed),
            )
            targets[f"wan22_a14b_{task}_lora_{expert}"] = (
                models_dir / "loras" / WAN22_A14B_LORA_FILES[task][expert_index],
                lambda seed=seed: wan21_lora_state_dict(seed=seed),
            )
    return targets


def write_tiny_models(models_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """Write the tiny checkpoints into ComfyUI's folder layout under ``models_dir``.

    Existing files are kept: the content depends only on the seeds above.
    """
    models_dir = pathlib.Path(models_dir)
    targets = {
        "wan21_t2v": (models_dir / "diffusion_models" / WAN21_T2V_FILE, wan21_state_dict),
        "wan21_i2v": (models_dir / "diffusion_models" / WAN21_I2V_FILE, lambda: wan21_state_dict("i2v", seed=1)),
        "hunyuan_t2v": (models_dir / "diffusion_models" / HUNYUAN_T2V_FILE, hunyuan_t2v_state_dict),
        "wan21_vae": (models_dir / "vae" / WAN21_VAE_FILE, wan21_vae_state_dict),
        "wan21_lora": (models_dir / "loras" / WAN21_LORA_FILE, wan21_lora_state_dict),
        "wan22_ti2v": (models_dir / "diffusion_models" / WAN22_TI2V_FILE, lambda: wan21_state_dict("ti2v", seed=2)),
        "wan22_vae": (models_dir / "vae" / WAN22_VAE_FILE, wan22_vae_state_dict),
        **wan22_a14b_targets(models_dir),
    }
    for path, build in targets.values():
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            save_file(build(), str(partial))
            partial.rename(path)
    return {name: path for name, (path, _) in targets.items()}


def generate_tiny_models(models_dir: pathlib.Path) -> None:
    """Run ``write_tiny_models`` in a fresh interpreter (ComfyUI imported there, on the CPU)."""
    repo_root = pathlib.Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "scripts.tiny_models", str(models_dir)], cwd=repo_root, check=True,
                   stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    from scripts.comfy_runtime import import_comfy_on_cpu

    import_comfy_on_cpu()
    for written in write_tiny_models(pathlib.Path(sys.argv[1])).values():
        print(written)
