"""A tiny ImageReward-architecture checkpoint in the official key layout, with a tokenizer folder.

The keys are written out from ImageReward v1.0's layout (BLIP visual encoder,
BERT text encoder with cross-attention, five-Linear head, plus the projection
weights the reward does not use), at tiny sizes given in a ``.json`` beside
the checkpoint; the values are random with non-trivial norms and biases.
"""

from __future__ import annotations

import json
import pathlib

import torch

WORDS = ["a", "an", "the", "cat", "dog", "red", "blue", "ball", "on", "in", "grass", "running", "##s", "video",
         "of", "sunset", "over", "sea", "robot", "dancing", "city", "at", "night"]
SPECIAL = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

TINY_SIZES = dict(vision_hidden=32, vision_layers=2, vision_heads=2, vision_mlp=64, text_hidden=32, text_layers=2,
                  text_heads=4, text_mlp=48, text_positions=40, text_vocab=len(SPECIAL) + len(WORDS) + 2)
HEAD_WIDTHS = (32, 24, 16, 8, 4, 1)


def official_layout(sizes: dict = TINY_SIZES) -> dict[str, tuple[int, ...]]:
    """Key -> shape of an ImageReward checkpoint with these sizes."""
    d, m = sizes["vision_hidden"], sizes["vision_mlp"]
    h, mt = sizes["text_hidden"], sizes["text_mlp"]
    patches = (224 // 16) ** 2
    shapes = {
        "blip.visual_encoder.cls_token": (1, 1, d),
        "blip.visual_encoder.pos_embed": (1, patches + 1, d),
        "blip.visual_encoder.patch_embed.proj.weight": (d, 3, 16, 16),
        "blip.visual_encoder.patch_embed.proj.bias": (d,),
        "blip.visual_encoder.norm.weight": (d,),
        "blip.visual_encoder.norm.bias": (d,),
    }
    for i in range(sizes["vision_layers"]):
        block = f"blip.visual_encoder.blocks.{i}."
        for name, shape in (("norm1", (d,)), ("norm2", (d,))):
            shapes[block + name + ".weight"] = shape
            shapes[block + name + ".bias"] = shape
        for name, (out_f, in_f) in (("attn.qkv", (3 * d, d)), ("attn.proj", (d, d)), ("mlp.fc1", (m, d)),
                                    ("mlp.fc2", (d, m))):
            shapes[block + name + ".weight"] = (out_f, in_f)
            shapes[block + name + ".bias"] = (out_f,)
    text = "blip.text_encoder."
    shapes[text + "embeddings.word_embeddings.weight"] = (sizes["text_vocab"], h)
    shapes[text + "embeddings.position_embeddings.weight"] = (sizes["text_positions"], h)
    shapes[text + "embeddings.LayerNorm.weight"] = (h,)
    shapes[text + "embeddings.LayerNorm.bias"] = (h,)
    for i in range(sizes["text_layers"]):
        layer = f"{text}encoder.layer.{i}."
        linears = {
            "attention.self.query": (h, h), "attention.self.key": (h, h), "attention.self.value": (h, h),
            "attention.output.dense": (h, h),
            "crossattention.self.query": (h, h), "crossattention.self.key": (h, d),
            "crossattention.self.value": (h, d), "crossattention.output.dense": (h, h),
            "intermediate.dense": (mt, h), "output.dense": (h, mt),
        }
        for name, (out_f, in_f) in linears.items():
            shapes[layer + name + ".weight"] = (out_f, in_f)
            shapes[layer + name + ".bias"] = (out_f,)
        for name in ("attention.output.LayerNorm", "crossattention.output.LayerNorm", "output.LayerNorm"):
            shapes[layer + name + ".weight"] = (h,)
            shapes[layer + name + ".bias"] = (h,)
    for index, (in_f, out_f) in zip((0, 2, 4, 6, 7), zip(HEAD_WIDTHS, HEAD_WIDTHS[1:])):
        shapes[f"mlp.layers.{index}.weight"] = (out_f, in_f)
        shapes[f"mlp.layers.{index}.bias"] = (out_f,)
    for name, width in (("vision_proj", d), ("text_proj", h)):  # in the official file, unused by the reward
        shapes[f"blip.{name}.weight"] = (16, width)
        shapes[f"blip.{name}.bias"] = (16,)
    return shapes


def tiny_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in official_layout().items():
        if key.endswith(".weight") and len(shape) == 1:  # layer norms: non-trivial gains
            value = 1.0 + 0.2 * torch.randn(shape, generator=generator)
        elif len(shape) >= 2 and "embed" not in key and "token" not in key:
            value = torch.randn(shape, generator=generator) / shape[-1] ** 0.5 * (3.0 if "mlp.layers" in key else 1.0)
        else:
            value = 0.2 * torch.randn(shape, generator=generator)
        state[key] = value
    state["blip.text_encoder.embeddings.position_ids"] = torch.arange(TINY_SIZES["text_positions"]).unsqueeze(0)
    return state


def write_tiny_image_reward(folder: pathlib.Path, name: str = "ImageReward.pt") -> pathlib.Path:
    """Checkpoint, its sizes .json and a bert-base-uncased-style tokenizer folder; returns the checkpoint path."""
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = folder / name
    torch.save(tiny_state_dict(), checkpoint)
    checkpoint.with_suffix(".json").write_text(json.dumps(TINY_SIZES, indent=1))
    tokenizer = folder / "bert-base-uncased"
    tokenizer.mkdir(exist_ok=True)
    (tokenizer / "vocab.txt").write_text("\n".join(SPECIAL + WORDS) + "\n")
    (tokenizer / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return checkpoint


def write_tiny_clip(folder: pathlib.Path) -> pathlib.Path:
    """A tiny transformers CLIP model with a character-level BPE tokenizer, saved like save_pretrained does."""
    import string

    from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

    vocab = {}
    for suffix in ("", "</w>"):
        for character in string.ascii_lowercase:
            vocab[character + suffix] = len(vocab)
    for special in ("<|startoftext|>", "<|endoftext|>"):
        vocab[special] = len(vocab)
    tokenizer = CLIPTokenizer(vocab=vocab, merges=[])
    config = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=24, bos_token_id=vocab["<|startoftext|>"],
                         eos_token_id=vocab["<|endoftext|>"], pad_token_id=vocab["<|endoftext|>"]),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        projection_dim=16,
    )
    torch.manual_seed(0)
    CLIPModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder
