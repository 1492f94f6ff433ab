"""Scoring cost of VideoScore-v1.1's architecture (random weights) next to ImageReward's, CPU fp32 and bf16.

    .venv/bin/python -m bench.video_score_cost [--frames 24] [--candidates 8]

The full model (Idefics2-8B sizes: SigLIP-so400m vision tower of 27 layers, 3-layer perceiver, 32-layer
Mistral-7B decoder; 8.3B parameters, 30.8 GiB in fp32) does not fit beside the other work on a small CPU machine,
and every layer of a stack costs the same. So each dtype is measured on the same architecture at full width with
ONE vision layer and ONE decoder layer: forward hooks time those two layers, and the full model's time is
``rest + 27 x vision layer + 32 x decoder layer``. Memory: the weights are counted exactly for the full model
(meta device, no allocation); the activations are the peak resident growth while scoring ``--candidates``
candidates one after another (as the node does) with the one-layer model, whose per-layer activations are
those of the full model. Frames are 480x832 (Wan 2.1's size), preprocessing included; rewards are meaningless,
the cost is real. ImageReward (446M) scores 8 frames of the same size in the same process for comparison.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import time

import torch

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.search_cost import peak_rss_growth  # noqa: E402
from bench.verifier_cost import build as build_image_reward  # noqa: E402
from cachedsearch_core.judge import spread_frame_indices  # noqa: E402
from cachedsearch_core.video_score import VideoScore, VideoScoreNetwork, sample_frame_indices  # noqa: E402

VISION_LAYERS, TEXT_LAYERS = 27, 32
PROMPT = "a red fox running through fresh snow at sunrise, cinematic, detailed fur"


def idefics2_8b_config(vision_layers: int, text_layers: int):
    from transformers import Idefics2Config

    return Idefics2Config(
        vision_config=dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=vision_layers,
                           num_attention_heads=16, image_size=980, patch_size=14, hidden_act="gelu_pytorch_tanh"),
        perceiver_config=dict(hidden_size=4096, hidden_act="silu", resampler_n_latents=64, resampler_depth=3,
                              resampler_n_heads=16, resampler_head_dim=96, num_key_value_heads=4, rms_norm_eps=1e-5),
        text_config=dict(model_type="mistral", vocab_size=32003, hidden_size=4096, intermediate_size=14336,
                         num_hidden_layers=text_layers, num_attention_heads=32, num_key_value_heads=8,
                         max_position_embeddings=32768, rope_theta=10000.0, rms_norm_eps=1e-5, sliding_window=4096,
                         pad_token_id=0),
        image_token_id=32001, num_labels=5)


def full_parameter_count() -> int:
    with torch.device("meta"):
        network = VideoScoreNetwork(idefics2_8b_config(VISION_LAYERS, TEXT_LAYERS))
    return sum(parameter.numel() for parameter in network.parameters())


def processor():
    """Idefics2's processor with VideoScore's image settings and a stand-in vocabulary of the same size."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import Idefics2ImageProcessor, Idefics2Processor, PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(31997)]
    backend = Tokenizer(models.WordLevel(vocab={word: i for i, word in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    image_processor = Idefics2ImageProcessor(size={"shortest_edge": 378, "longest_edge": 980}, do_image_splitting=False)
    return Idefics2Processor(image_processor=image_processor, tokenizer=tokenizer, image_seq_len=64)


class LayerTimer:
    """Wall time spent inside one module, summed over calls, via forward pre/post hooks."""

    def __init__(self, module: torch.nn.Module):
        self.seconds = 0.0
        self._start = 0.0
        module.register_forward_pre_hook(self._begin)
        module.register_forward_hook(self._end)

    def _begin(self, *_):
        self._start = time.perf_counter()

    def _end(self, *_):
        self.seconds += time.perf_counter() - self._start


def random_video_score(vision_layers: int, text_layers: int, dtype: torch.dtype, device="cpu") -> VideoScore:
    """VideoScore-v1.1's architecture at full width with ``vision_layers`` and ``text_layers`` layers and random
    weights (normal, std 0.02), made in ``dtype`` on ``device`` (no copy elsewhere first), with the processor."""
    torch.manual_seed(0)
    config = idefics2_8b_config(vision_layers, text_layers)
    with torch.device("meta"):
        network = VideoScoreNetwork(config).to(dtype)
    network.to_empty(device=device)
    for parameter in network.parameters():
        torch.nn.init.normal_(parameter, std=0.02)
    # Rotary frequencies are computed, not loaded: rebuilt as VideoScore.from_folder does (float32).
    text_model = network.model.text_model
    text_model.rotary_emb = type(text_model.rotary_emb)(config=config.text_config).to(device)
    return VideoScore(network.eval(), processor())


def measure(dtype_name: str, frames: int, candidates: int) -> str:
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    model = random_video_score(1, 1, dtype)
    network = model.network
    vision_timer = LayerTimer(network.model.vision_model.encoder.layers[0])
    text_timer = LayerTimer(network.model.text_model.layers[0])

    clip = torch.rand((81, 480, 832, 3), generator=torch.Generator().manual_seed(1))
    picks = sample_frame_indices(len(clip), frames)
    model.score_clip(PROMPT, clip[picks[:1]])  # warm-up on one frame
    vision_timer.seconds = text_timer.seconds = 0.0
    totals = []

    def score_all():
        for _ in range(candidates):
            start = time.perf_counter()
            model.score_clip(PROMPT, clip[picks])
            totals.append(time.perf_counter() - start)

    before, peak = peak_rss_growth(score_all)
    vision_layer, text_layer = vision_timer.seconds / candidates, text_timer.seconds / candidates
    rest = sum(totals) / candidates - vision_layer - text_layer
    full_seconds = rest + VISION_LAYERS * vision_layer + TEXT_LAYERS * text_layer
    weights_gib = full_parameter_count() * torch.finfo(dtype).bits / 8 / 2**30
    activations_mib = (peak - before) / 2**20

    image_reward = build_image_reward(dtype)
    eight = clip[spread_frame_indices(len(clip), 8)]  # the frames ImageReward scores (the judge's rule)
    image_reward.score("a red fox", eight)
    start = time.perf_counter()
    image_reward.score("a red fox", eight)
    image_reward_seconds = time.perf_counter() - start
    return (f"| {dtype_name} | {len(picks)} | {vision_layer:.2f} | {text_layer:.2f} | {rest:.2f} | "
            f"**{full_seconds:.0f}** | {weights_gib:.1f} | {activations_mib:.0f} | {image_reward_seconds:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=24, help="frames VideoScore reads per candidate (max_frames)")
    parser.add_argument("--candidates", type=int, default=8, help="candidates scored one after another")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], help="measure one dtype in this process (internal)")
    args = parser.parse_args()
    if args.dtype is not None:
        print(measure(args.dtype, args.frames, args.candidates))
        return
    print(f"# VideoScore-v1.1 architecture at full width, random weights, {args.frames} of 81 frames at 480x832 per "
          f"candidate, {args.candidates} candidates in a row, torch threads {torch.get_num_threads()}, each dtype in "
          "a fresh process; ImageReward: 8 frames of the same clip")
    print("| dtype | frames read | one vision layer s | one decoder layer s | rest (preprocess, embeddings, connector, "
          "head) s | full model per candidate s (rest + 27 x vision + 32 x decoder) | full weights GiB | peak "
          "activation RSS growth, all candidates MiB | ImageReward per candidate s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype in ("fp32", "bf16"):
        command = [sys.executable, "-m", "bench.video_score_cost", "--dtype", dtype, "--frames", str(args.frames),
                   "--candidates", str(args.candidates)]
        print(subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip())


if __name__ == "__main__":
    main()
