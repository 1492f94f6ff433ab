"""A tiny VideoScore-v1.1-architecture folder in the official layout (config, sharded safetensors with an index,
Idefics2 processor files), with random weights of non-trivial norms.

The keys are those of Mantis' ``Idefics2ForSequenceClassification`` (``model.`` + the Idefics2 backbone,
``score.weight`` / ``score.bias``), written out from the shapes below, not from a transformers module.
"""

from __future__ import annotations

import json
import pathlib

import torch

WORDS = ["a", "an", "the", "cat", "dog", "red", "blue", "ball", "on", "in", "grass", "running", "video", "of",
         "sunset", "over", "sea", "robot", "dancing", "city", "at", "night", "quality", "frames"]
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]
IMAGE_TOKENS = ["<fake_token_around_image>", "<image>", "<end_of_utterance>"]
VOCAB = len(SPECIAL) + len(WORDS) + len(IMAGE_TOKENS)
IMAGE_TOKEN_ID = len(SPECIAL) + len(WORDS) + 1
PAD_TOKEN_ID = SPECIAL.index("<pad>")

SIZES = dict(vision_hidden=32, vision_mlp=48, vision_layers=2, vision_heads=2, image_size=56, patch_size=14,
             latents=4, resampler_depth=1, resampler_heads=2, resampler_head_dim=8, resampler_kv_heads=1,
             text_hidden=32, text_mlp=64, text_layers=2, text_heads=4, text_kv_heads=2, rope_theta=10000.0,
             rms_eps=1e-5, vision_eps=1e-6, shortest_edge=28, longest_edge=56)


def config_dict(sizes: dict = SIZES) -> dict:
    """config.json of the tiny model, with the fields VideoScore-v1.1's config.json sets."""
    return {
        "architectures": ["Idefics2ForSequenceClassification"],
        "model_type": "idefics2",
        "image_token_id": IMAGE_TOKEN_ID,
        "pad_token_id": PAD_TOKEN_ID,
        "problem_type": "regression",
        "id2label": {str(i): f"LABEL_{i}" for i in range(5)},
        "label2id": {f"LABEL_{i}": i for i in range(5)},
        "use_cache": False,
        "vision_config": {"model_type": "idefics2_vision", "hidden_size": sizes["vision_hidden"],
                          "intermediate_size": sizes["vision_mlp"], "num_hidden_layers": sizes["vision_layers"],
                          "num_attention_heads": sizes["vision_heads"], "image_size": sizes["image_size"],
                          "patch_size": sizes["patch_size"], "hidden_act": "gelu_pytorch_tanh",
                          "layer_norm_eps": sizes["vision_eps"]},
        "perceiver_config": {"model_type": "idefics2_perceiver", "hidden_size": sizes["text_hidden"],
                             "hidden_act": "silu", "resampler_n_latents": sizes["latents"],
                             "resampler_depth": sizes["resampler_depth"], "resampler_n_heads": sizes["resampler_heads"],
                             "resampler_head_dim": sizes["resampler_head_dim"],
                             "num_key_value_heads": sizes["resampler_kv_heads"], "rms_norm_eps": sizes["rms_eps"]},
        "text_config": {"model_type": "mistral", "vocab_size": VOCAB, "hidden_size": sizes["text_hidden"],
                        "intermediate_size": sizes["text_mlp"], "num_hidden_layers": sizes["text_layers"],
                        "num_attention_heads": sizes["text_heads"], "num_key_value_heads": sizes["text_kv_heads"],
                        "max_position_embeddings": 1024, "rope_theta": sizes["rope_theta"],
                        "rms_norm_eps": sizes["rms_eps"], "sliding_window": None, "pad_token_id": PAD_TOKEN_ID,
                        "hidden_act": "silu"},
    }


def official_layout(sizes: dict = SIZES) -> dict[str, tuple[int, ...]]:
    """Checkpoint key -> shape for these sizes."""
    d, dm = sizes["vision_hidden"], sizes["vision_mlp"]
    h, hm = sizes["text_hidden"], sizes["text_mlp"]
    positions = (sizes["image_size"] // sizes["patch_size"]) ** 2
    shapes = {
        "model.vision_model.embeddings.patch_embedding.weight": (d, 3, sizes["patch_size"], sizes["patch_size"]),
        "model.vision_model.embeddings.patch_embedding.bias": (d,),
        "model.vision_model.embeddings.position_embedding.weight": (positions, d),
        "model.vision_model.post_layernorm.weight": (d,),
        "model.vision_model.post_layernorm.bias": (d,),
    }
    for i in range(sizes["vision_layers"]):
        layer = f"model.vision_model.encoder.layers.{i}."
        for name, shape in (("self_attn.q_proj", (d, d)), ("self_attn.k_proj", (d, d)), ("self_attn.v_proj", (d, d)),
                            ("self_attn.out_proj", (d, d)), ("mlp.fc1", (dm, d)), ("mlp.fc2", (d, dm))):
            shapes[layer + name + ".weight"] = shape
            shapes[layer + name + ".bias"] = (shape[0],)
        for name in ("layer_norm1", "layer_norm2"):
            shapes[layer + name + ".weight"] = (d,)
            shapes[layer + name + ".bias"] = (d,)
    connector = "model.connector."
    shapes[connector + "modality_projection.gate_proj.weight"] = (hm, d)
    shapes[connector + "modality_projection.up_proj.weight"] = (hm, d)
    shapes[connector + "modality_projection.down_proj.weight"] = (h, hm)
    resampler = connector + "perceiver_resampler."
    shapes[resampler + "latents"] = (sizes["latents"], h)
    shapes[resampler + "norm.weight"] = (h,)
    q_width = sizes["resampler_heads"] * sizes["resampler_head_dim"]
    kv_width = sizes["resampler_kv_heads"] * sizes["resampler_head_dim"]
    for i in range(sizes["resampler_depth"]):
        layer = f"{resampler}layers.{i}."
        for name, shape in (("input_latents_norm", (h,)), ("input_context_norm", (h,)),
                            ("post_attention_layernorm", (h,)), ("self_attn.q_proj", (q_width, h)),
                            ("self_attn.k_proj", (kv_width, h)), ("self_attn.v_proj", (kv_width, h)),
                            ("self_attn.o_proj", (h, q_width)), ("mlp.gate_proj", (4 * h, h)),
                            ("mlp.up_proj", (4 * h, h)), ("mlp.down_proj", (h, 4 * h))):
            shapes[layer + name + ".weight"] = shape
    text = "model.text_model."
    shapes[text + "embed_tokens.weight"] = (VOCAB, h)
    shapes[text + "norm.weight"] = (h,)
    head_dim = h // sizes["text_heads"]
    for i in range(sizes["text_layers"]):
        layer = f"{text}layers.{i}."
        for name, shape in (("input_layernorm", (h,)), ("post_attention_layernorm", (h,)),
                            ("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (sizes["text_kv_heads"] * head_dim, h)),
                            ("self_attn.v_proj", (sizes["text_kv_heads"] * head_dim, h)), ("self_attn.o_proj", (h, h)),
                            ("mlp.gate_proj", (hm, h)), ("mlp.up_proj", (hm, h)), ("mlp.down_proj", (h, hm))):
            shapes[layer + name + ".weight"] = shape
    shapes["score.weight"] = (5, h)
    shapes["score.bias"] = (5,)
    return shapes


def tiny_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in official_layout().items():
        if len(shape) == 1 and ("norm" in key):  # norm gains around 1
            value = 1.0 + 0.2 * torch.randn(shape, generator=generator)
        elif key.endswith("score.bias"):
            value = 2.5 + 0.1 * torch.randn(shape, generator=generator)  # around the middle of VideoScore's [1, 4]
        elif len(shape) >= 2 and "embed" not in key and "latents" not in key:
            value = torch.randn(shape, generator=generator) / (shape[1] if len(shape) == 2 else shape[1] * 196) ** 0.5
        else:
            value = 0.5 * torch.randn(shape, generator=generator)
        state[key] = value
    return state


def write_processor(folder: pathlib.Path, sizes: dict = SIZES) -> None:
    """Idefics2 processor files: a word-level fast tokenizer with the Idefics2 image tokens, and the image
    processor at the tiny image size (no image splitting, like VideoScore's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import Idefics2ImageProcessor, Idefics2Processor, PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(SPECIAL + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                        unk_token="<unk>", pad_token="<pad>")
    tokenizer.add_special_tokens({"additional_special_tokens": IMAGE_TOKENS})
    image_processor = Idefics2ImageProcessor(
        size={"shortest_edge": sizes["shortest_edge"], "longest_edge": sizes["longest_edge"]},
        do_image_splitting=False)
    processor = Idefics2Processor(image_processor=image_processor, tokenizer=tokenizer,
                                  image_seq_len=sizes["latents"])
    processor.save_pretrained(str(folder))
    # The official folder predates the merged processor_config.json: the image processor has its own file.
    merged = json.loads((folder / "processor_config.json").read_text())
    image_settings = {**merged.pop("image_processor"), "processor_class": "Idefics2Processor"}
    (folder / "preprocessor_config.json").write_text(json.dumps(image_settings, indent=1))
    (folder / "processor_config.json").write_text(json.dumps(merged, indent=1))


def write_tiny_video_score(folder: pathlib.Path, shards: int = 2) -> pathlib.Path:
    """The folder ``models/video_score/<name>`` as the official download lays it out; returns the folder."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config_dict(), indent=1))
    state = tiny_state_dict()
    keys = sorted(state)
    weight_map = {}
    for shard in range(shards):
        name = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        part = {key: state[key].contiguous() for key in keys[shard::shards]}
        save_file(part, str(folder / name), metadata={"format": "pt"})
        weight_map.update({key: name for key in part})
    index = {"metadata": {"total_size": sum(t.numel() * 4 for t in state.values())}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    write_processor(folder)
    return folder
