"""VideoScore v1.1 on transformers' Idefics2 modules, from a tiny folder in the official layout (no ComfyUI)."""

import json
import math
import re
import shutil

import pytest
import torch
import torch.nn.functional as F

from cachedsearch_core.image_reward import VerifierFileError
from cachedsearch_core.video_score import (
    ASPECTS,
    AVERAGE,
    QUERY,
    AspectWeights,
    VideoScore,
    build_query,
    sample_frame_indices,
)
from report_text import refusal
from scripts.tiny_video_score import IMAGE_TOKEN_ID, PAD_TOKEN_ID, SIZES, tiny_state_dict, write_tiny_video_score


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_tiny_video_score(tmp_path_factory.mktemp("video_score") / "VideoScore-v1.1")


@pytest.fixture(scope="module")
def model(folder):
    return VideoScore.from_folder(folder)


def clip(seed, count=3, height=28, width=56):
    return torch.rand((count, height, width, 3), generator=torch.Generator().manual_seed(seed))


def rms(x, weight, eps=SIZES["rms_eps"]):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def attend(q, k, v, heads, kv_heads, head_dim, causal=False):
    """Multi-head attention with key/value heads shared by groups of query heads."""
    split = lambda t, n: t.view(t.shape[0], t.shape[1], n, head_dim).transpose(1, 2)  # noqa: E731
    q, k, v = split(q, heads), split(k, kv_heads), split(v, kv_heads)
    k, v = k.repeat_interleave(heads // kv_heads, dim=1), v.repeat_interleave(heads // kv_heads, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    out = scores.softmax(-1) @ v
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], heads * head_dim)


def reference_scores(state, input_ids, pixels):
    """VideoScore written out from the checkpoint keys: SigLIP-style encoder at NaViT positions -> gated projection
    -> perceiver resampler -> image tokens spliced into a Mistral decoder -> linear head on the last token.
    ``pixels`` is [F, 3, H, W] with no padding (all frames of a clip share one size)."""
    s = SIZES
    w = lambda key: state["model." + key]  # noqa: E731

    def linear(x, key, bias=True):
        return F.linear(x, w(key + ".weight"), w(key + ".bias") if bias else None)

    def gated(x, prefix):
        return linear(F.silu(linear(x, prefix + ".gate_proj", False)) * linear(x, prefix + ".up_proj", False),
                      prefix + ".down_proj", False)

    # vision: patch positions are the fractional grid coordinates bucketed into the trained grid
    side = s["image_size"] // s["patch_size"]
    x = F.conv2d(pixels, w("vision_model.embeddings.patch_embedding.weight"),
                 w("vision_model.embeddings.patch_embedding.bias"), stride=s["patch_size"])
    rows, cols = x.shape[-2:]
    row_ids = torch.tensor([math.floor(i / rows * side) for i in range(rows)])
    col_ids = torch.tensor([math.floor(j / cols * side) for j in range(cols)])
    positions = (row_ids[:, None] * side + col_ids[None, :]).flatten()
    x = x.flatten(2).transpose(1, 2) + w("vision_model.embeddings.position_embedding.weight")[positions]
    d, vh = s["vision_hidden"], s["vision_heads"]
    for i in range(s["vision_layers"]):
        p = f"vision_model.encoder.layers.{i}."
        n = F.layer_norm(x, (d,), w(p + "layer_norm1.weight"), w(p + "layer_norm1.bias"), s["vision_eps"])
        a = attend(linear(n, p + "self_attn.q_proj"), linear(n, p + "self_attn.k_proj"),
                   linear(n, p + "self_attn.v_proj"), vh, vh, d // vh)
        x = x + linear(a, p + "self_attn.out_proj")
        n = F.layer_norm(x, (d,), w(p + "layer_norm2.weight"), w(p + "layer_norm2.bias"), s["vision_eps"])
        x = x + linear(F.gelu(linear(n, p + "mlp.fc1"), approximate="tanh"), p + "mlp.fc2")
    x = F.layer_norm(x, (d,), w("vision_model.post_layernorm.weight"), w("vision_model.post_layernorm.bias"),
                     s["vision_eps"])

    # connector: gated projection to the text width, then latents attend over [context, latents]
    context = gated(x, "connector.modality_projection")
    r = "connector.perceiver_resampler."
    latents = w(r + "latents").expand(context.shape[0], -1, -1)
    heads, kv_heads, head_dim = s["resampler_heads"], s["resampler_kv_heads"], s["resampler_head_dim"]
    for i in range(s["resampler_depth"]):
        p = f"{r}layers.{i}."
        normed_latents = rms(latents, w(p + "input_latents_norm.weight"))
        both = torch.cat([rms(context, w(p + "input_context_norm.weight")), normed_latents], dim=1)
        a = attend(linear(normed_latents, p + "self_attn.q_proj", False), linear(both, p + "self_attn.k_proj", False),
                   linear(both, p + "self_attn.v_proj", False), heads, kv_heads, head_dim)
        latents = latents + linear(a, p + "self_attn.o_proj", False)
        latents = latents + gated(rms(latents, w(p + "post_attention_layernorm.weight")), p + "mlp")
    image_tokens = rms(latents, w(r + "norm.weight")).reshape(-1, s["text_hidden"])

    # Mistral decoder with the image features in place of the <image> tokens, in order
    h = w("text_model.embed_tokens.weight")[input_ids[0]].clone()
    slots = (input_ids[0] == IMAGE_TOKEN_ID).nonzero().flatten()
    assert len(slots) == len(image_tokens)
    h[slots] = image_tokens
    h = h[None]
    th, heads, kv_heads = s["text_hidden"], s["text_heads"], s["text_kv_heads"]
    head_dim = th // heads
    frequencies = 1.0 / s["rope_theta"] ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.arange(h.shape[1]).float()[:, None] * frequencies[None]
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)

    def rotate(t, n):  # t: [1, L, n * head_dim]
        t = t.view(1, -1, n, head_dim)
        first, second = t[..., : head_dim // 2], t[..., head_dim // 2 :]
        t = t * cos[None, :, None] + torch.cat([-second, first], -1) * sin[None, :, None]
        return t.reshape(1, -1, n * head_dim)

    for i in range(s["text_layers"]):
        p = f"text_model.layers.{i}."
        n = rms(h, w(p + "input_layernorm.weight"))
        a = attend(rotate(linear(n, p + "self_attn.q_proj", False), heads),
                   rotate(linear(n, p + "self_attn.k_proj", False), kv_heads),
                   linear(n, p + "self_attn.v_proj", False), heads, kv_heads, head_dim, causal=True)
        h = h + linear(a, p + "self_attn.o_proj", False)
        h = h + gated(rms(h, w(p + "post_attention_layernorm.weight")), p + "mlp")
    h = rms(h, w("text_model.norm.weight"))
    return F.linear(h[0, -1], state["score.weight"], state["score.bias"])


def test_scores_match_an_independent_reference_forward(model):
    frames = clip(1)
    prompt = "a red ball on the grass"
    scores = model.score_clip(prompt, frames)
    batch = model.inputs(prompt, frames)
    assert batch["pixel_values"].shape == (1, 3, 3, 28, 56) and bool(batch["pixel_attention_mask"].all())
    reference = reference_scores(tiny_state_dict(), batch["input_ids"], batch["pixel_values"][0])
    assert scores.shape == (len(ASPECTS),)
    assert torch.allclose(scores, reference, atol=1e-4, rtol=0), (scores, reference)
    assert scores.std() > 1e-2  # the five outputs differ


def test_head_reads_the_token_before_the_first_padding_token_like_mantis(model):
    frames = clip(4, count=1)
    batch = model.inputs("a cat <pad> on the grass", frames)
    ids = batch["input_ids"][0]
    pad = model.network.pad_token_id
    assert pad == PAD_TOKEN_ID and int((ids == pad).sum()) == 1
    with torch.inference_mode():
        hidden = model.network.model(**batch, use_cache=False).last_hidden_state[0]
        before_pad = int((ids == pad).nonzero()[0, 0]) - 1
        expected = model.network.score(hidden[before_pad])
        last = model.network.score(hidden[-1])
    assert torch.allclose(model.score_clip("a cat <pad> on the grass", frames), expected, atol=1e-6)
    assert not torch.allclose(expected, last, atol=1e-3)


def test_pixels_are_the_uint8_frames_resized_and_scaled_to_minus_one_one(model):
    frames = torch.zeros((1, 56, 112, 3))
    frames[..., 0] = 1.0  # red
    frames[0, :, 56:, 1] = 0.5  # green on the right half
    pixels = model.inputs("a cat", frames)["pixel_values"][0, 0]
    assert pixels.shape == (3, 28, 56)  # the shortest edge scaled to the tiny processor's 28
    assert torch.allclose(pixels[0], torch.ones(28, 56), atol=1e-5)
    assert torch.allclose(pixels[2], -torch.ones(28, 56), atol=1e-5)
    assert pixels[1, :, :20].max() < -0.99 and abs(pixels[1, :, -20:].mean().item() - (128 / 255 * 2 - 1)) < 1e-3


def test_query_has_the_five_aspects_the_prompt_and_one_image_slot_per_frame(model):
    query = build_query("a dog running", 3)
    assert query.startswith(QUERY.format(text_prompt="a dog running")) and query.endswith("<image> " * 3)
    for number, aspect in enumerate(ASPECTS, start=1):
        assert f"({number}) {aspect}" in query
    ids = model.inputs("a dog running", clip(0))["input_ids"][0]
    assert int((ids == IMAGE_TOKEN_ID).sum()) == 3 * SIZES["latents"]
    assert ids[0] == model.processor.tokenizer.bos_token_id


def test_scores_depend_on_prompt_frames_and_their_order(model, folder):
    frames = clip(2, count=4)
    first = model.score_clip("a cat running in the grass", frames)
    assert torch.equal(first, model.score_clip("a cat running in the grass", frames))
    assert (first - model.score_clip("a robot dancing in the city at night", frames)).abs().max() > 1e-3
    assert (first - model.score_clip("a cat running in the grass", frames.flip(0))).abs().max() > 1e-3
    assert torch.equal(first, VideoScore.from_folder(folder).score_clip("a cat running in the grass", frames))


def test_bf16_scores_are_close_to_fp32(folder, model):
    frames = clip(3)
    half = VideoScore.from_folder(folder, dtype=torch.bfloat16)
    assert next(half.network.parameters()).dtype == torch.bfloat16
    assert torch.allclose(half.score_clip("a cat", frames), model.score_clip("a cat", frames), atol=0.15)


def test_frame_sampling_matches_the_model_card_stride():
    assert sample_frame_indices(9) == list(range(9))
    assert sample_frame_indices(33) == list(range(33))
    picks = sample_frame_indices(81)
    assert len(picks) == 48 and picks[:6] == [0, 1, 3, 5, 6, 8] and picks[-1] == 79
    assert picks == [int(i * 81 / 48) for i in range(48)]  # the model card's arange(0, F, F / 48).astype(int)
    assert sample_frame_indices(33, 24) == [0, 1, 2, 4, 5, 6, 8, 9, 11, 12, 13, 15, 16, 17, 19, 20, 22, 23, 24, 26,
                                            27, 28, 30, 31]
    assert sample_frame_indices(9, 24) == list(range(9))
    with pytest.raises(ValueError, match="max_frames >= 1"):
        sample_frame_indices(9, 0)


def test_aspect_choice_and_weights():
    scores = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0], [5.0, 4.0, 3.0, 2.0, 1.0]])
    assert AspectWeights.parse(AVERAGE).combine(scores).tolist() == [3.0, 3.0]
    assert AspectWeights.parse("dynamic degree").combine(scores).tolist() == [3.0, 3.0]
    assert AspectWeights.parse("visual quality").combine(scores).tolist() == [1.0, 5.0]
    assert AspectWeights.parse("weighted", "0, 0, 0, 3, 1").combine(scores).tolist() == [4.25, 1.75]
    with pytest.raises(ValueError, match=refusal("aspect_weights", "'1,2'", 5)):  # 5 aspects, one number each
        AspectWeights.parse("weighted", "1,2")
    with pytest.raises(ValueError, match="not all zero"):
        AspectWeights.parse("weighted", "0,0,0,0,0")
    with pytest.raises(ValueError, match="rank_by: got 'overall'"):
        AspectWeights.parse("overall")


def copy_folder(folder, tmp_path, edit_state=None, shard_name=None):
    target = tmp_path / "VideoScore-v1.1"
    shutil.copytree(folder, target)
    if edit_state is not None:
        from safetensors.torch import load_file, save_file

        shard = target / shard_name
        state = load_file(str(shard))
        edit_state(state)
        save_file(state, str(shard))
    return target


@pytest.mark.parametrize("key, edit, message", [
    ("model.text_model.layers.1.mlp.up_proj.weight", lambda s: s.pop("model.text_model.layers.1.mlp.up_proj.weight"),
     "missing weight 'model.text_model.layers.1.mlp.up_proj.weight'"),
    ("score.bias", lambda s: s.update({"lm_head.weight": torch.zeros(2, 2)}), "unexpected weight 'lm_head.weight'"),
    ("score.weight", lambda s: s.update({"score.weight": torch.zeros(3, SIZES["text_hidden"])}),
     r"weight 'score.weight' in model-0000\d-of-00002.safetensors has shape \(3, 32\), but .*config.json implies "
     r"\(5, 32\)"),
])
def test_wrong_weights_are_rejected_naming_the_key(folder, tmp_path, key, edit, message):
    shard_name = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"][key]
    with pytest.raises(VerifierFileError, match=message):
        VideoScore.from_folder(copy_folder(folder, tmp_path, edit, shard_name))


@pytest.mark.parametrize("remove, message", [
    ("model-00002-of-00002.safetensors", "weight shard model-00002-of-00002.safetensors .* is missing from"),
    ("preprocessor_config.json", "folder is missing preprocessor_config.json; the folder .* must hold"),
    ("tokenizer.json", r"has no tokenizer \(tokenizer.json or tokenizer.model\)"),
    ("config.json", "folder is missing config.json"),
    ("model.safetensors.index.json", "has no weights"),
])
def test_missing_files_are_named(folder, tmp_path, remove, message):
    target = copy_folder(folder, tmp_path)
    (target / remove).unlink()
    with pytest.raises(VerifierFileError, match=message):
        VideoScore.from_folder(target)


def test_wrong_head_size_in_config_and_absent_folder(folder, tmp_path):
    target = copy_folder(folder, tmp_path)
    config = json.loads((target / "config.json").read_text())
    config["id2label"] = {"0": "LABEL_0"}
    config["label2id"] = {"LABEL_0": 0}
    (target / "config.json").write_text(json.dumps(config))
    with pytest.raises(VerifierFileError, match=r"\b1 outputs\b.*\b5\b"):  # the config's 1 against the head's 5
        VideoScore.from_folder(target)
    with pytest.raises(VerifierFileError, match=f"not found: {re.escape(str(tmp_path / 'nowhere'))}"):
        VideoScore.from_folder(tmp_path / "nowhere")


def test_bad_frames_and_empty_prompt_are_rejected(model):
    bad = clip(0)
    bad[1, 2, 3, 0] = math.nan
    with pytest.raises(ValueError, match=refusal("images", "NaN")):
        model.score_clip("a cat", bad)
    with pytest.raises(ValueError, match=refusal("prompt", "empty")):
        model.score_clip(" ", clip(0))
