"""The graph of workflow "15 LTX-2.3 search + upscale" (#50 item 3), as scripts/build_workflows.py lays it out.

It mirrors ComfyUI's official LTX-2.3 text-to-video template (``templates/video_ltx2_3_t2v.json`` of the workflow
templates ComfyUI 0.33.0 installs): the same loaders and file names, the distilled LoRA at 0.5 on both stages, the
8-sigma first stage at half size and CFG 1, the x2 latent upsampler, LTXVCropGuides, the 3-sigma refine pass from
0.85 with its fixed noise seed 42, VAE Decode (Tiled) 768/64/4096/4, the audio VAE decode, CreateVideo at 25 fps.
The search drafts the first stage only; the Recommit's output alone goes through the upsampler and the refine
pass. Left out: the template's prompt enhancer (TextGenerateLTX2Prompt and its LoRA and switch) and the
image-to-video nodes its T2V switch bypasses.
"""

from scripts.tiny_ltx2 import LTX2_CHECKPOINT_FILE as CHECKPOINT
from scripts.tiny_ltx2 import LTX2_DISTILLED_LORA_FILE as DISTILLED_LORA
from scripts.tiny_ltx2 import LTX2_UPSAMPLER_FILE as UPSCALER

FIRST_STAGE_SIGMAS = "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"
REFINE_SIGMAS = "0.85, 0.7250, 0.4219, 0.0"
TEXT_ENCODER = "gemma_3_12B_it_fp4_mixed.safetensors"
DISTILLED_LORA_STRENGTH = 0.5  # the template's, on both stages
NEGATIVE = "pc game, console game, video game, cartoon, childish, ugly"  # the template's
FPS, FRAMES = 25, 121  # the template's 5 s at 25 fps (its length expression seconds * fps + 1)
# The template's VAE Decode (Tiled) settings, for the drafts' pictures and the delivered video alike.
TILED_DECODE = {"tile_size": 768, "overlap": 64, "temporal_size": 4096, "temporal_overlap": 4}

MODELS = (f"- `models/checkpoints/{CHECKPOINT}` (transformer, video VAE and audio VAE)\n"
          f"- `models/text_encoders/{TEXT_ENCODER}`\n"
          f"- `models/loras/{DISTILLED_LORA}`\n"
          f"- `models/latent_upscale_models/{UPSCALER}`")


def _models_and_latent(prompt: str) -> dict:
    """Columns 0 and 1: the loaders, the prompt's conditioning, the packed empty video + audio latent."""
    return {
        "checkpoint": ("CheckpointLoaderSimple", {"ckpt_name": CHECKPOINT}, 0),
        "lora": ("LoraLoaderModelOnly", {"model": ["checkpoint", 0], "lora_name": DISTILLED_LORA,
                                         "strength_model": DISTILLED_LORA_STRENGTH}, 0),
        "cache": ("CachedSearchApplyCache", {"model": ["lora", 0], "mode": "adaptive", "tau": 0.10,
                                             "warmup_steps": 2, "cooldown_steps": 2, "static_interval": 2}, 0),
        "text_encoder": ("LTXAVTextEncoderLoader", {"text_encoder": TEXT_ENCODER, "ckpt_name": CHECKPOINT,
                                                    "device": "default"}, 0),
        "audio_vae": ("LTXVAudioVAELoader", {"ckpt_name": CHECKPOINT}, 0),
        "upscaler": ("LatentUpscaleModelLoader", {"model_name": UPSCALER}, 0),
        "prompt": ("PrimitiveStringMultiline", {"value": prompt}, 1),
        "positive": ("CLIPTextEncode", {"text": ["prompt", 0], "clip": ["text_encoder", 0]}, 1),
        "negative": ("CLIPTextEncode", {"text": NEGATIVE, "clip": ["text_encoder", 0]}, 1),
        "conditioning": ("LTXVConditioning", {"positive": ["positive", 0], "negative": ["negative", 0],
                                              "frame_rate": float(FPS)}, 1),
        "video_latent": ("EmptyLTXVLatentVideo", {"width": 640, "height": 360, "length": FRAMES,
                                                  "batch_size": 1}, 1),
        "audio_latent": ("LTXVEmptyLatentAudio", {"frames_number": FRAMES, "frame_rate": FPS, "batch_size": 1,
                                                  "audio_vae": ["audio_vae", 0]}, 1),
        "latent": ("LTXVConcatAVLatent", {"video_latent": ["video_latent", 0], "audio_latent": ["audio_latent", 0]},
                   1),
    }


def _search_and_verify() -> dict:
    """Columns 2 and 3: the first stage drafted N times on the cached model, the drafts' pictures ranked."""
    return {
        "sampler": ("KSamplerSelect", {"sampler_name": "euler"}, 2),
        "sigmas": ("ManualSigmas", {"sigmas": FIRST_STAGE_SIGMAS}, 2),
        "guider": ("CFGGuider", {"model": ["cache", 0], "positive": ["conditioning", 0],
                                 "negative": ["conditioning", 1], "cfg": 1.0}, 2),
        "search": ("CachedSearchSamplerAdvanced", {"guider": ["guider", 0], "sampler": ["sampler", 0],
                                                   "sigmas": ["sigmas", 0], "latent_image": ["latent", 0],
                                                   "seed": 42, "num_candidates": 8}, 2),
        "separate_drafts": ("LTXVSeparateAVLatent", {"av_latent": ["search", 0]}, 3),
        "decode_drafts": ("VAEDecodeTiled", {"samples": ["separate_drafts", 0], "vae": ["checkpoint", 2],
                                             **TILED_DECODE}, 3),
        "load_verifier": ("CachedSearchLoadImageReward", {"ckpt_name": "ImageReward.pt", "dtype": "fp32"}, 3),
        "verify": ("CachedSearchVerifier", {"images": ["decode_drafts", 0], "candidates": ["search", 1],
                                            "prompt": ["prompt", 0], "verifier": ["load_verifier", 0],
                                            "frames_per_candidate": 8}, 3),
    }


def _winner_upsampled_and_refined() -> dict:
    """Columns 4 and 5: the Recommit's first stage, then the template's second stage and decodes, once."""
    return {
        "recommit": ("CachedSearchRecommit", {"candidates": ["search", 1], "ranking": ["verify", 0],
                                              "mode": "commit", "pick": 0, "pick_among": 0, "wait_for_pick": False,
                                              "pick_timeout": 0}, 4),
        "separate": ("LTXVSeparateAVLatent", {"av_latent": ["recommit", 0]}, 4),
        "upsample": ("LTXVLatentUpsampler", {"samples": ["separate", 0], "upscale_model": ["upscaler", 0],
                                             "vae": ["checkpoint", 2]}, 4),
        "crop_guides": ("LTXVCropGuides", {"positive": ["conditioning", 0], "negative": ["conditioning", 1],
                                           "latent": ["separate", 0]}, 4),
        "refine_latent": ("LTXVConcatAVLatent", {"video_latent": ["upsample", 0], "audio_latent": ["separate", 1]},
                          4),
        "refine_noise": ("RandomNoise", {"noise_seed": 42}, 4),
        "refine_sigmas": ("ManualSigmas", {"sigmas": REFINE_SIGMAS}, 4),
        # The refine pass runs on the uncached model: it is part of the delivered result.
        "refine_guider": ("CFGGuider", {"model": ["lora", 0], "positive": ["crop_guides", 0],
                                        "negative": ["crop_guides", 1], "cfg": 1.0}, 4),
        "refine": ("SamplerCustomAdvanced", {"noise": ["refine_noise", 0], "guider": ["refine_guider", 0],
                                             "sampler": ["sampler", 0], "sigmas": ["refine_sigmas", 0],
                                             "latent_image": ["refine_latent", 0]}, 4),
        "separate_refined": ("LTXVSeparateAVLatent", {"av_latent": ["refine", 0]}, 5),
        "decode": ("VAEDecodeTiled", {"samples": ["separate_refined", 0], "vae": ["checkpoint", 2], **TILED_DECODE},
                   5),
        "decode_audio": ("LTXVAudioVAEDecode", {"samples": ["separate_refined", 1], "audio_vae": ["audio_vae", 0]},
                         5),
        "video": ("CreateVideo", {"images": ["decode", 0], "audio": ["decode_audio", 0], "fps": float(FPS)}, 5),
        "save": ("SaveVideo", {"video": ["video", 0], "filename_prefix": "cachedsearch/ltx23_t2v", "format": "auto",
                               "codec": "auto"}, 5),
    }


def ltx23_t2v_nodes(prompt: str) -> dict:
    """key: (class_type, inputs, layout column) for every node of the workflow."""
    return _models_and_latent(prompt) | _search_and_verify() | _winner_upsampled_and_refined()
