"""ImageReward v1.0 from local files, on transformers' BLIP modules (report Sec. 3.2).

The official checkpoint is a BLIP ViT-L/16 image encoder, a BERT-base text
encoder with cross-attention and a five-Linear head. ``BlipVisionModel`` and
``BlipTextModel`` load it strictly after renaming keys (no splits or
transposes). Everything loads from disk; nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import torch

REWARD_MEAN = 0.16717362830052426
REWARD_STD = 1.0333394966054072
MAX_PROMPT_TOKENS = 35
IMAGE_SIZE = 224
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
HEAD_LAYERS = (0, 2, 4, 6, 7)  # nn.Sequential indices of the Linears; the rest are dropouts
DROPPED_PREFIXES = ("blip.vision_proj.", "blip.text_proj.")
DROPPED_KEYS = ("blip.text_encoder.embeddings.position_ids",)
TOKENIZER_FOLDER = "bert-base-uncased"


class VerifierFileError(ValueError):
    """A checkpoint or tokenizer that cannot be used; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class ImageRewardArchitecture:
    """Sizes that strict loading cannot check (head counts, eps) plus the rest, for one checkpoint.

    The defaults are ImageReward-v1.0's. A checkpoint of other sizes needs a
    ``<checkpoint>.json`` beside it with the fields that differ.
    """

    vision_hidden: int = 1024
    vision_layers: int = 24
    vision_heads: int = 16
    vision_mlp: int = 4096
    patch_size: int = 16
    image_size: int = IMAGE_SIZE
    vision_eps: float = 1e-6
    text_vocab: int = 30524
    text_hidden: int = 768
    text_layers: int = 12
    text_heads: int = 12
    text_mlp: int = 3072
    text_positions: int = 512
    text_eps: float = 1e-12

    @classmethod
    def for_checkpoint(cls, checkpoint: pathlib.Path) -> ImageRewardArchitecture:
        sidecar = checkpoint.with_suffix(".json")
        if not sidecar.exists():
            return cls()
        fields = {field.name for field in dataclasses.fields(cls)}
        values = json.loads(sidecar.read_text())
        unknown = set(values) - fields
        if unknown:
            raise VerifierFileError(f"{sidecar}: unknown field(s) {sorted(unknown)}; allowed: {sorted(fields)}")
        return cls(**values)

    def vision_config(self):
        from transformers import BlipVisionConfig

        return BlipVisionConfig(
            hidden_size=self.vision_hidden, intermediate_size=self.vision_mlp, num_hidden_layers=self.vision_layers,
            num_attention_heads=self.vision_heads, patch_size=self.patch_size, image_size=self.image_size,
            hidden_act="gelu", layer_norm_eps=self.vision_eps,
        )

    def text_config(self):
        from transformers import BlipTextConfig

        # is_decoder=True is the only way BLIP builds cross-attention layers; forward runs with is_decoder=False.
        return BlipTextConfig(
            vocab_size=self.text_vocab, hidden_size=self.text_hidden, num_hidden_layers=self.text_layers,
            num_attention_heads=self.text_heads, intermediate_size=self.text_mlp,
            max_position_embeddings=self.text_positions, layer_norm_eps=self.text_eps,
            encoder_hidden_size=self.vision_hidden, is_decoder=True, hidden_act="gelu",
        )


_VISION_RENAMES = (
    ("cls_token", "embeddings.class_embedding"),
    ("pos_embed", "embeddings.position_embedding"),
    ("patch_embed.proj.", "embeddings.patch_embedding."),
    ("norm.", "post_layernorm."),
)
_VISION_BLOCK_RENAMES = (
    ("norm1.", "layer_norm1."),
    ("norm2.", "layer_norm2."),
    ("attn.qkv.", "self_attn.qkv."),
    ("attn.proj.", "self_attn.projection."),
    ("mlp.fc1.", "mlp.fc1."),
    ("mlp.fc2.", "mlp.fc2."),
)


def split_official_state_dict(state: dict[str, torch.Tensor]) -> tuple[dict, dict, dict]:
    """ImageReward.pt keys -> (vision, text, head) state dicts in transformers' names."""
    vision, text, head, unknown = {}, {}, {}, []
    for key, tensor in state.items():
        if key in DROPPED_KEYS or key.startswith(DROPPED_PREFIXES):
            continue
        if key.startswith("blip.visual_encoder."):
            vision[_rename_vision_key(key[len("blip.visual_encoder."):], key)] = tensor
        elif key.startswith("blip.text_encoder."):
            text[key[len("blip.text_encoder."):]] = tensor
        elif key.startswith("mlp.layers."):
            index, rest = key[len("mlp.layers."):].split(".", 1)
            if int(index) not in HEAD_LAYERS:
                unknown.append(key)
            head[f"{HEAD_LAYERS.index(int(index))}.{rest}"] = tensor
        else:
            unknown.append(key)
    if unknown:
        raise VerifierFileError(f"checkpoint has unexpected key {unknown[0]!r} ({len(unknown)} in all); "
                                "is this the ImageReward-v1.0 checkpoint (ImageReward.pt)?")
    return vision, text, head


def _rename_vision_key(key: str, original: str) -> str:
    if key.startswith("blocks."):
        _, index, rest = key.split(".", 2)
        for old, new in _VISION_BLOCK_RENAMES:
            if rest.startswith(old):
                return f"encoder.layers.{index}.{new}{rest[len(old):]}"
        raise VerifierFileError(f"checkpoint has unexpected key {original!r}; is this ImageReward.pt?")
    for old, new in _VISION_RENAMES:
        if key == old or (old.endswith(".") and key.startswith(old)):
            return new + key[len(old):]
    raise VerifierFileError(f"checkpoint has unexpected key {original!r}; is this ImageReward.pt?")


def _load_strictly(module: torch.nn.Module, state: dict, part: str) -> None:
    """Like load_state_dict(strict=True), but the error names the checkpoint key and what to do."""
    expected = {k: v for k, v in module.state_dict().items() if not k.endswith("position_ids")}
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing:
        raise VerifierFileError(f"checkpoint is missing {part} weight {missing[0]!r} ({len(missing)} missing); "
                                "the file is incomplete or not ImageReward-v1.0")
    if extra:
        raise VerifierFileError(f"checkpoint has unexpected {part} weight {extra[0]!r}; "
                                "the file is not ImageReward-v1.0 or its sizes need a .json beside it")
    for key, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[key].shape):
            raise VerifierFileError(
                f"checkpoint {part} weight {key!r} has shape {tuple(tensor.shape)}, expected "
                f"{tuple(expected[key].shape)}; for a model of other sizes put a .json with them beside the checkpoint"
            )
    module.load_state_dict(state, strict=False)  # keys and shapes checked above; position_ids is a buffer


def _read_checkpoint(path: pathlib.Path) -> dict[str, torch.Tensor]:
    if not path.exists():
        raise VerifierFileError(f"ImageReward checkpoint not found at {path}; put ImageReward.pt there "
                                "(see README: Verifier files)")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    state = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
    return state.get("state_dict", state) if isinstance(state, dict) else state


def load_tokenizer(folder: pathlib.Path, vocab_size: int):
    """BERT-uncased tokenizer plus BLIP's [DEC] and [ENC] tokens, from a local folder only."""
    from transformers import BertTokenizer

    if not (folder / "vocab.txt").exists():
        raise VerifierFileError(f"tokenizer not found: expected {folder / 'vocab.txt'} (the bert-base-uncased "
                                "tokenizer files) next to the checkpoint")
    tokenizer = BertTokenizer.from_pretrained(str(folder), local_files_only=True)
    tokenizer.add_special_tokens({"bos_token": "[DEC]"})
    tokenizer.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
    if len(tokenizer) != vocab_size:
        raise VerifierFileError(f"tokenizer in {folder} has {len(tokenizer)} tokens with [DEC] and [ENC], but the "
                                f"checkpoint expects {vocab_size}; use the bert-base-uncased vocab.txt")
    return tokenizer


class ImageReward(torch.nn.Module):
    """Scores (prompt, image) pairs like ImageReward v1.0's ``score``."""

    def __init__(self, architecture: ImageRewardArchitecture, tokenizer, head: torch.nn.Sequential):
        super().__init__()
        from transformers import BlipTextModel, BlipVisionModel

        self.architecture = architecture
        self.tokenizer = tokenizer
        self.vision = BlipVisionModel(architecture.vision_config())
        self.text = BlipTextModel(architecture.text_config(), add_pooling_layer=False)
        self.head = head
        self.register_buffer("clip_mean", torch.tensor(CLIP_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("clip_std", torch.tensor(CLIP_STD).view(1, 3, 1, 1), persistent=False)

    @classmethod
    def from_files(cls, checkpoint: pathlib.Path, tokenizer_folder: pathlib.Path | None = None,
                   device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> ImageReward:
        checkpoint = pathlib.Path(checkpoint)
        architecture = ImageRewardArchitecture.for_checkpoint(checkpoint)
        tokenizer_folder = pathlib.Path(tokenizer_folder or checkpoint.parent / TOKENIZER_FOLDER)
        vision_state, text_state, head_state = split_official_state_dict(_read_checkpoint(checkpoint))
        tokenizer = load_tokenizer(tokenizer_folder, architecture.text_vocab)
        model = cls(architecture, tokenizer, _head_from_state(head_state))
        _load_strictly(model.vision, vision_state, "vision")
        _load_strictly(model.text, text_state, "text")
        return model.to(device=device, dtype=dtype).eval()

    def tokenize(self, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = self.tokenizer(require_prompt(prompt), padding="max_length", truncation=True, max_length=MAX_PROMPT_TOKENS,
                                return_tensors="pt")
        return tokens.input_ids, tokens.attention_mask

    def preprocess(self, frames: torch.Tensor) -> torch.Tensor:
        """[F, H, W, 3] floats in [0, 1] -> normalised [F, 3, 224, 224], as BLIP's eval transform does."""
        return preprocess_frames(frames, self.architecture.image_size, self.clip_mean, self.clip_std)

    @torch.inference_mode()
    def score(self, prompt: str, frames: torch.Tensor) -> torch.Tensor:
        """One reward per frame for ``prompt``."""
        input_ids, attention_mask = self.tokenize(prompt)
        device, dtype = self.clip_mean.device, next(self.vision.parameters()).dtype
        pixels = self.preprocess(frames.to(device)).to(dtype)
        image_embeds = self.vision(pixel_values=pixels).last_hidden_state
        count = image_embeds.shape[0]
        text = self.text(
            input_ids=input_ids.to(device).expand(count, -1),
            attention_mask=attention_mask.to(device).expand(count, -1),
            encoder_hidden_states=image_embeds,
            encoder_attention_mask=torch.ones(image_embeds.shape[:2], dtype=torch.long, device=device),
            is_decoder=False,
        )
        reward = self.head(text.last_hidden_state[:, 0]).float().squeeze(-1)
        return (reward - REWARD_MEAN) / REWARD_STD


def _head_from_state(head_state: dict[str, torch.Tensor]) -> torch.nn.Sequential:
    """The five Linears (dropouts are identity at eval), sized from the checkpoint."""
    layers = []
    for index in range(len(HEAD_LAYERS)):
        weight = head_state.get(f"{index}.weight")
        bias = head_state.get(f"{index}.bias")
        if weight is None or bias is None:
            raise VerifierFileError(f"checkpoint is missing head weight 'mlp.layers.{HEAD_LAYERS[index]}."
                                    f"{'weight' if weight is None else 'bias'}'")
        linear = torch.nn.Linear(weight.shape[1], weight.shape[0])
        linear.load_state_dict({"weight": weight, "bias": bias})
        layers.append(linear)
    if layers[-1].out_features != 1:
        raise VerifierFileError(f"checkpoint head ends in {layers[-1].out_features} outputs, expected 1")
    return torch.nn.Sequential(*layers)


def preprocess_frames(frames: torch.Tensor, size: int, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """[F, H, W, 3] in [0, 1] -> [F, 3, size, size]: uint8 levels, short side to ``size`` (bicubic), centre crop,
    normalised with ``mean``/``std`` shaped [1, 3, 1, 1]."""
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"images: expected frames shaped [F, H, W, 3], got {tuple(frames.shape)}")
    if not torch.isfinite(frames).all():
        raise ValueError("images: some frames contain NaN or infinite values; check the VAE decode")
    pixels = (frames.float().clamp(0, 1) * 255).round() / 255  # the report scores uint8 frames
    pixels = pixels.movedim(-1, 1).to(mean.device)
    height, width = pixels.shape[-2:]
    scale = size / min(height, width)
    resized = (max(size, round(height * scale)), max(size, round(width * scale)))
    pixels = torch.nn.functional.interpolate(pixels, size=resized, mode="bicubic", align_corners=False, antialias=True)
    top, left = (resized[0] - size) // 2, (resized[1] - size) // 2
    pixels = pixels[..., top : top + size, left : left + size]
    return (pixels - mean) / std


def require_prompt(prompt: str) -> str:
    if not prompt or not prompt.strip():
        raise ValueError("prompt: got an empty prompt; the verifier scores how well frames match the text, "
                         "so connect the same prompt the text encoder received")
    return prompt
