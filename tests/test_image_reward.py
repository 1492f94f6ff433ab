"""ImageReward on transformers' BLIP modules, from a tiny checkpoint in the official layout (no ComfyUI)."""

import json
import math

import pytest
import torch
import torch.nn.functional as F

from cachedsearch_core.image_reward import (
    MAX_PROMPT_TOKENS,
    REWARD_MEAN,
    REWARD_STD,
    ImageReward,
    VerifierFileError,
)
from report_text import refusal
from scripts.tiny_image_reward import TINY_SIZES, tiny_state_dict, write_tiny_image_reward


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_tiny_image_reward(tmp_path_factory.mktemp("image_reward"))


@pytest.fixture(scope="module")
def model(checkpoint):
    return ImageReward.from_files(checkpoint)


def frames_224(seed, count=3):
    return torch.rand((count, 224, 224, 3), generator=torch.Generator().manual_seed(seed))


def reference_reward(state, input_ids, attention_mask, pixels):
    """ImageReward's forward written out from the official keys: ViT (pre-norm) -> BERT with cross-attention."""
    sizes = TINY_SIZES

    def linear(x, prefix):
        return F.linear(x, state[prefix + ".weight"], state[prefix + ".bias"])

    def norm(x, prefix, eps):
        return F.layer_norm(x, x.shape[-1:], state[prefix + ".weight"], state[prefix + ".bias"], eps)

    def attend(q, k, v, heads, additive_mask=None):
        batch, q_len, width = q.shape
        split = lambda t: t.view(batch, t.shape[1], heads, width // heads).transpose(1, 2)  # noqa: E731
        scores = split(q) @ split(k).transpose(-1, -2) / math.sqrt(width // heads)
        if additive_mask is not None:
            scores = scores + additive_mask
        return (scores.softmax(-1) @ split(v)).transpose(1, 2).reshape(batch, q_len, width)

    v = "blip.visual_encoder."
    x = F.conv2d(pixels, state[v + "patch_embed.proj.weight"], state[v + "patch_embed.proj.bias"], stride=16)
    x = x.flatten(2).transpose(1, 2)
    x = torch.cat([state[v + "cls_token"].expand(x.shape[0], -1, -1), x], dim=1) + state[v + "pos_embed"]
    for i in range(sizes["vision_layers"]):
        b = f"{v}blocks.{i}."
        q, k, val = linear(norm(x, b + "norm1", 1e-6), b + "attn.qkv").chunk(3, dim=-1)
        x = x + linear(attend(q, k, val, sizes["vision_heads"]), b + "attn.proj")
        x = x + linear(F.gelu(linear(norm(x, b + "norm2", 1e-6), b + "mlp.fc1")), b + "mlp.fc2")
    image = norm(x, v + "norm", 1e-6)

    t = "blip.text_encoder."
    ids = input_ids.expand(image.shape[0], -1)
    h = state[t + "embeddings.word_embeddings.weight"][ids] + \
        state[t + "embeddings.position_embeddings.weight"][: ids.shape[1]]
    h = norm(h, t + "embeddings.LayerNorm", 1e-12)
    padding = (1.0 - attention_mask.float())[:, None, None, :] * torch.finfo(torch.float32).min
    for i in range(sizes["text_layers"]):
        layer = f"{t}encoder.layer.{i}."
        a = attend(linear(h, layer + "attention.self.query"), linear(h, layer + "attention.self.key"),
                   linear(h, layer + "attention.self.value"), sizes["text_heads"], padding)
        h = norm(h + linear(a, layer + "attention.output.dense"), layer + "attention.output.LayerNorm", 1e-12)
        c = attend(linear(h, layer + "crossattention.self.query"), linear(image, layer + "crossattention.self.key"),
                   linear(image, layer + "crossattention.self.value"), sizes["text_heads"])
        h = norm(h + linear(c, layer + "crossattention.output.dense"), layer + "crossattention.output.LayerNorm",
                 1e-12)
        f = linear(F.gelu(linear(h, layer + "intermediate.dense")), layer + "output.dense")
        h = norm(h + f, layer + "output.LayerNorm", 1e-12)
    feature = h[:, 0]
    for index in (0, 2, 4, 6, 7):
        feature = linear(feature, f"mlp.layers.{index}")
    return (feature.squeeze(-1) - REWARD_MEAN) / REWARD_STD


def test_reward_matches_an_independent_reference_forward(model):
    frames = frames_224(1)
    prompt = "A red ball on the grass"
    rewards = model.score(prompt, frames)
    input_ids, attention_mask = model.tokenize(prompt)
    quantised = (frames * 255).round() / 255
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(1, 3, 1, 1)
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(1, 3, 1, 1)
    pixels = (quantised.permute(0, 3, 1, 2) - mean) / std
    reference = reference_reward(tiny_state_dict(), input_ids, attention_mask, pixels)
    assert rewards.shape == (3,)
    # An independent forward may round otherwise on other kernels: a few float32 units of the reward (141 on the
    # tiny model, where a unit is 1.5e-5; an absolute 1e-5 asked for the same bits).
    assert torch.allclose(rewards, reference, atol=1e-5, rtol=1e-6)
    assert rewards.std() > 1e-3  # frames are told apart


def test_reward_depends_on_prompt_and_is_deterministic(model, checkpoint):
    frames = frames_224(2, count=2)
    first = model.score("a cat running in the grass", frames)
    assert torch.equal(first, model.score("a cat running in the grass", frames))
    assert not torch.allclose(first, model.score("a robot dancing in the city at night", frames))
    assert torch.equal(first, ImageReward.from_files(checkpoint).score("a cat running in the grass", frames))


def test_prompt_is_cls_sep_padded_to_35_tokens(model):
    ids, mask = model.tokenize("The red Cats!")
    vocab = model.tokenizer.get_vocab()
    expected = [vocab["[CLS]"], vocab["the"], vocab["red"], vocab["cat"], vocab["##s"], vocab["[UNK]"], vocab["[SEP]"]]
    assert ids.shape == mask.shape == (1, MAX_PROMPT_TOKENS)
    assert ids[0, :7].tolist() == expected and ids[0, 7:].eq(vocab["[PAD]"]).all()
    assert mask[0].tolist() == [1] * 7 + [0] * (MAX_PROMPT_TOKENS - 7)
    long_ids, _ = model.tokenize(" ".join(["cat"] * 100))
    assert long_ids.shape[1] == MAX_PROMPT_TOKENS and long_ids[0, -1] == vocab["[SEP]"]
    assert len(model.tokenizer) == TINY_SIZES["text_vocab"]  # [DEC] and [ENC] added


def test_preprocess_resizes_short_side_and_centre_crops(model):
    frame = torch.zeros((1, 300, 600, 3))
    frame[:, :, 150:450] = 1.0  # a white centre band half the width
    pixels = model.preprocess(frame)
    assert pixels.shape == (1, 3, 224, 224)
    white = (1.0 - 0.48145466) / 0.26862954
    assert torch.allclose(pixels[0, 0, :, 112], torch.full((224,), white), atol=1e-4)
    # the band spans 224 px after resizing to 224 x 448 and fills the centre crop up to its edges
    assert pixels[0, 0, 112, 1] > white - 0.1


def test_empty_prompt_and_bad_frames_are_rejected(model):
    with pytest.raises(ValueError, match=refusal("prompt", "empty")):
        model.score("  ", frames_224(0))
    bad = frames_224(0)
    bad[1, 5, 5, 0] = math.nan
    with pytest.raises(ValueError, match=refusal("images", "NaN")):
        model.score("a cat", bad)
    with pytest.raises(ValueError, match=refusal("images", "[F, H, W, 3]")):  # the shape it takes
        model.score("a cat", torch.rand(2, 3, 64, 64))


def save_variant(checkpoint, tmp_path, edit):
    state = torch.load(checkpoint, weights_only=True)
    edit(state)
    variant = tmp_path / "ImageReward.pt"
    torch.save(state, variant)
    variant.with_suffix(".json").write_text(checkpoint.with_suffix(".json").read_text())
    (tmp_path / "bert-base-uncased").symlink_to(checkpoint.parent / "bert-base-uncased")
    return variant


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.pop("blip.text_encoder.encoder.layer.1.crossattention.self.key.weight"),
     "missing text weight 'encoder.layer.1.crossattention.self.key.weight'"),
    (lambda s: s.update({"blip.visual_encoder.blocks.0.attn.extra": torch.zeros(1)}),
     "unexpected key 'blip.visual_encoder.blocks.0.attn.extra'"),
    (lambda s: s.update({"blip.itm_head.weight": torch.zeros(2, 2)}), "unexpected key 'blip.itm_head.weight'"),
    (lambda s: s.update({"blip.visual_encoder.norm.weight": torch.ones(7)}),
     r"vision weight 'post_layernorm.weight' has shape \(7,\), expected \(32,\)"),
    (lambda s: s.pop("mlp.layers.7.bias"), "missing head weight 'mlp.layers.7.bias'"),
])
def test_wrong_checkpoints_are_rejected_naming_the_key(checkpoint, tmp_path, edit, message):
    with pytest.raises(VerifierFileError, match=message):
        ImageReward.from_files(save_variant(checkpoint, tmp_path, edit))


def test_missing_files_name_the_expected_path(checkpoint, tmp_path):
    with pytest.raises(VerifierFileError, match=f"checkpoint not found at {tmp_path / 'ImageReward.pt'}"):
        ImageReward.from_files(tmp_path / "ImageReward.pt")
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    (lonely / "ImageReward.pt").symlink_to(checkpoint)
    (lonely / "ImageReward.json").symlink_to(checkpoint.with_suffix(".json"))
    with pytest.raises(VerifierFileError, match=f"expected {lonely / 'bert-base-uncased' / 'vocab.txt'}"):
        ImageReward.from_files(lonely / "ImageReward.pt")


def test_tokenizer_of_the_wrong_size_is_rejected(checkpoint, tmp_path):
    folder = tmp_path / "bert-base-uncased"
    folder.mkdir()
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncat\n")
    (tmp_path / "ImageReward.pt").symlink_to(checkpoint)
    (tmp_path / "ImageReward.json").symlink_to(checkpoint.with_suffix(".json"))
    # the vocabulary's 8 tokens (with [DEC] and [ENC]) against the checkpoint's
    with pytest.raises(VerifierFileError, match=rf"\b8 tokens\b.*\b{TINY_SIZES['text_vocab']}\b"):
        ImageReward.from_files(tmp_path / "ImageReward.pt")


def test_sizes_file_with_unknown_field_is_rejected(checkpoint, tmp_path):
    variant = save_variant(checkpoint, tmp_path, lambda s: None)
    variant.with_suffix(".json").write_text(json.dumps({"text_head": 3}))
    with pytest.raises(VerifierFileError, match=r"unknown field\(s\) \['text_head'\]"):
        ImageReward.from_files(variant)


def test_clip_score_is_100_times_the_cosine_of_projected_features(tmp_path):
    from cachedsearch_core.clip_score import ClipScore
    from cachedsearch_core.image_reward import preprocess_frames
    from scripts.tiny_image_reward import write_tiny_clip

    verifier = ClipScore.from_folder(write_tiny_clip(tmp_path / "clip"))
    frames = torch.rand((2, 40, 56, 3), generator=torch.Generator().manual_seed(3))
    scores = verifier.score("a red cat", frames)
    model = verifier.model
    tokens = verifier.tokenizer("a red cat", padding="max_length", max_length=24, return_tensors="pt")
    with torch.no_grad():
        pixels = preprocess_frames(frames, 32, verifier.pixel_mean, verifier.pixel_std)
        image = model.visual_projection(model.vision_model(pixel_values=pixels).pooler_output)
        text = model.text_projection(model.text_model(**tokens).pooler_output)
    expected = 100 * (image / image.norm(dim=-1, keepdim=True) * (text / text.norm(dim=-1, keepdim=True))).sum(-1)
    assert torch.allclose(scores, expected, atol=1e-4)
    assert not torch.allclose(scores, verifier.score("the blue sea", frames))
    with pytest.raises(VerifierFileError, match="no CLIP model at"):
        ClipScore.from_folder(tmp_path / "nothing")
