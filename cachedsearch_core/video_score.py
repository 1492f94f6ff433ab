"""VideoScore v1.1 (TIGER-Lab) from local files, on transformers' Idefics2 modules plus its regression head.

VideoScore v1.1 is Mantis-8B-Idefics2 with a linear regression head
(``score``: hidden -> 5) read at the last token of the prompt. It sees a whole
clip: up to 48 uniformly sampled frames, each an Idefics2 image (shortest edge
378, longest 980, 64 perceiver tokens), after a fixed query naming the five
aspects. The official checkpoint folder is loaded with every key and shape
checked before any weight is read; nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib

import torch

from .image_reward import VerifierFileError, require_prompt

ASPECTS = ("visual quality", "temporal consistency", "dynamic degree", "text-to-video alignment",
           "factual consistency")
MAX_FRAMES = 48  # what v1.1 was trained to read
REPORT_FRAMES = 24  # the report scores 24 frames per video ("Video-native verifier robustness")
AVERAGE = "average of the five aspects"  # the report ranks by the mean ("VideoScore avg")
CONFIG_FILE = "config.json"
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
PROCESSOR_FILES = ("preprocessor_config.json", "tokenizer_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")  # either one
HEAD_PREFIX = "score."
BACKBONE_PREFIX = "model."
# The query VideoScore was trained on (the model card's REGRESSION_QUERY_PROMPT); the model reads these exact words.
QUERY = """
Suppose you are an expert in judging and evaluating the quality of AI-generated videos,
please watch the following frames of a given video and see the text prompt for generating the video,
then give scores from 5 different dimensions:
(1) visual quality: the quality of the video in terms of clearness, resolution, brightness, and color
(2) temporal consistency, both the consistency of objects or humans and the smoothness of motion or movements
(3) dynamic degree, the degree of dynamic changes
(4) text-to-video alignment, the alignment between the text prompt and the video content
(5) factual consistency, the consistency of the video content with the common-sense and factual knowledge

for each dimension, output a float number from 1.0 to 4.0,
the higher the number is, the better the video performs in that sub-score, 
the lowest 1.0 means Bad, the highest 4.0 means Perfect/Real (the video is like a real video)
Here is an output example:
visual quality: 3.2
temporal consistency: 2.7
dynamic degree: 4.0
text-to-video alignment: 2.3
factual consistency: 1.8

For this video, the text prompt is "{text_prompt}",
all the frames of video are as follows:
"""


def expected_files_message(folder: pathlib.Path) -> str:
    return (f"the folder {folder} must hold VideoScore-v1.1 as published (TIGER-Lab/VideoScore-v1.1): {CONFIG_FILE}, "
            f"{INDEX_FILE} with its model-0000N-of-0000M.safetensors shards (or one {SINGLE_FILE}), "
            f"{', '.join(PROCESSOR_FILES)} and {' or '.join(TOKENIZER_FILES)}; "
            "scripts/download_video_score.py fetches them on a machine that is online")


def sample_frame_indices(frame_count: int, max_frames: int = MAX_FRAMES) -> list[int]:
    """The frames VideoScore reads: all of them up to ``max_frames``, else floor(i * F / K) for i < K
    (the model card's uniform stride from frame 0, which leaves out the last frames)."""
    if frame_count < 1 or max_frames < 1:
        raise ValueError(f"frames: need at least one frame and max_frames >= 1, got {frame_count} and {max_frames}")
    if frame_count <= max_frames:
        return list(range(frame_count))
    return [index * frame_count // max_frames for index in range(max_frames)]


def build_query(prompt: str, frame_count: int) -> str:
    return QUERY.format(text_prompt=require_prompt(prompt)) + "<image> " * frame_count


@dataclasses.dataclass(frozen=True)
class AspectWeights:
    """How the five aspect scores become one ranking score: a weighted mean (the default is the plain mean)."""

    weights: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0, 1.0)

    def __post_init__(self):
        weights = tuple(float(w) for w in self.weights)
        if len(weights) != len(ASPECTS) or any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"aspect weights: expected {len(ASPECTS)} non-negative numbers, not all zero, one per "
                             f"aspect ({', '.join(ASPECTS)}); got {self.weights}")
        object.__setattr__(self, "weights", weights)

    @classmethod
    def parse(cls, rank_by: str, weights_text: str = "") -> AspectWeights:
        """``rank_by`` is the average, one aspect, or "weighted" with ``weights_text`` like "2,1,1,1,0"."""
        if rank_by == AVERAGE:
            return cls()
        if rank_by in ASPECTS:
            return cls(tuple(1.0 if aspect == rank_by else 0.0 for aspect in ASPECTS))
        if rank_by == "weighted":
            try:
                values = tuple(float(part) for part in weights_text.replace(";", ",").split(",") if part.strip())
            except ValueError:
                values = ()
            if len(values) != len(ASPECTS):
                raise ValueError(f"aspect_weights: got {weights_text!r}; give {len(ASPECTS)} comma-separated numbers "
                                 f"in the order {', '.join(ASPECTS)}, e.g. 1,1,1,2,1")
            return cls(values)
        raise ValueError(f"rank_by: got {rank_by!r}; choose {AVERAGE!r}, one of {list(ASPECTS)} or 'weighted'")

    def combine(self, aspect_scores: torch.Tensor) -> torch.Tensor:
        weights = torch.tensor(self.weights, dtype=aspect_scores.dtype, device=aspect_scores.device)
        return (aspect_scores * weights).sum(-1) / weights.sum()


class VideoScoreNetwork(torch.nn.Module):
    """Idefics2 backbone (``model``) and the regression head (``score``), named as the checkpoint's keys."""

    def __init__(self, config):
        super().__init__()
        from transformers import Idefics2Model

        self.model = Idefics2Model(config)
        self.score = torch.nn.Linear(config.text_config.hidden_size, config.num_labels)
        self.pad_token_id = getattr(config, "pad_token_id", None)  # the top-level one, as Mantis reads it

    def forward(self, input_ids, attention_mask, pixel_values, pixel_attention_mask) -> torch.Tensor:
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, pixel_values=pixel_values,
                            pixel_attention_mask=pixel_attention_mask, use_cache=False).last_hidden_state
        # Mantis reads the head at the token before the first padding token (the last token when there is none).
        if self.pad_token_id is None:
            last = torch.full((input_ids.shape[0],), input_ids.shape[1] - 1, device=input_ids.device)
        else:
            last = (input_ids.eq(self.pad_token_id).int().argmax(-1) - 1) % input_ids.shape[1]
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        return self.score(pooled)


def _check_folder(folder: pathlib.Path) -> list[pathlib.Path]:
    """The weight files, after checking every file the model needs is there."""
    if not folder.is_dir():
        raise VerifierFileError(f"VideoScore folder not found: {folder}; {expected_files_message(folder)}")
    for name in (CONFIG_FILE, *PROCESSOR_FILES):
        if not (folder / name).is_file():
            raise VerifierFileError(f"VideoScore folder is missing {name}; {expected_files_message(folder)}")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise VerifierFileError(f"VideoScore folder has no tokenizer ({' or '.join(TOKENIZER_FILES)}); "
                                f"{expected_files_message(folder)}")
    if (folder / INDEX_FILE).is_file():
        index = json.loads((folder / INDEX_FILE).read_text())
        shards = sorted(set(index.get("weight_map", {}).values()))
        if not shards:
            raise VerifierFileError(f"{folder / INDEX_FILE} lists no weights; {expected_files_message(folder)}")
        for shard in shards:
            if not (folder / shard).is_file():
                raise VerifierFileError(f"VideoScore weight shard {shard} (listed in {INDEX_FILE}) is missing from "
                                        f"{folder}; download it again")
        return [folder / shard for shard in shards]
    if (folder / SINGLE_FILE).is_file():
        return [folder / SINGLE_FILE]
    raise VerifierFileError(f"VideoScore folder has no weights ({INDEX_FILE} or {SINGLE_FILE}); "
                            f"{expected_files_message(folder)}")


def _read_header_shapes(files: list[pathlib.Path]) -> dict[str, tuple[tuple[int, ...], pathlib.Path]]:
    from safetensors import safe_open

    shapes = {}
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            for key in handle.keys():
                if key in shapes:
                    raise VerifierFileError(f"weight {key!r} is in both {shapes[key][1].name} and {path.name}")
                shapes[key] = (tuple(handle.get_slice(key).get_shape()), path)
    return shapes


def _load_config(folder: pathlib.Path):
    from transformers import Idefics2Config

    config = Idefics2Config.from_pretrained(str(folder), local_files_only=True)
    if config.num_labels != len(ASPECTS):
        raise VerifierFileError(f"{folder / CONFIG_FILE} declares {config.num_labels} outputs, but VideoScore's head "
                                f"has {len(ASPECTS)} (one per aspect); is this the regression VideoScore-v1.1?")
    return config


class VideoScore:
    """Five aspect scores on VideoScore's [1, 4] scale for one clip and its prompt."""

    aspects = ASPECTS

    def __init__(self, network: VideoScoreNetwork, processor):
        self.network = network
        self.processor = processor

    @classmethod
    def from_folder(cls, folder: str | pathlib.Path, dtype: torch.dtype = torch.float32) -> VideoScore:
        """Load on the CPU in ``dtype`` (the caller moves it); every key and shape is checked first."""
        from transformers import Idefics2Processor

        folder = pathlib.Path(folder)
        files = _check_folder(folder)
        config = _load_config(folder)
        with torch.device("meta"):
            network = VideoScoreNetwork(config)
        expected = {key: tuple(tensor.shape) for key, tensor in network.state_dict().items()}
        found = _read_header_shapes(files)
        missing = sorted(set(expected) - set(found))
        if missing:
            raise VerifierFileError(f"VideoScore checkpoint in {folder} is missing weight {missing[0]!r} "
                                    f"({len(missing)} missing); the download is incomplete or not VideoScore-v1.1")
        extra = sorted(set(found) - set(expected))
        if extra:
            raise VerifierFileError(f"VideoScore checkpoint has unexpected weight {extra[0]!r} in "
                                    f"{found[extra[0]][1].name} ({len(extra)} unexpected); it does not match "
                                    f"{folder / CONFIG_FILE}: is this VideoScore-v1.1 (Idefics2 + 5-output head)?")
        for key, shape in expected.items():
            if found[key][0] != shape:
                raise VerifierFileError(f"VideoScore weight {key!r} in {found[key][1].name} has shape {found[key][0]}, "
                                        f"but {folder / CONFIG_FILE} implies {shape}")
        from safetensors.torch import load_file

        state = {}
        for path in files:
            state.update({key: tensor.to(dtype) for key, tensor in load_file(str(path)).items()})
        network.load_state_dict(state, strict=True, assign=True)
        # Buffers computed at construction (rotary frequencies) are not in the checkpoint: rebuild them off meta.
        text_model = network.model.text_model
        text_model.rotary_emb = type(text_model.rotary_emb)(config=config.text_config)
        leftover = [name for name, tensor in network.state_dict(keep_vars=True).items() if tensor.is_meta]
        leftover += [name for name, tensor in network.named_buffers() if tensor.is_meta]
        if leftover:
            raise VerifierFileError(f"VideoScore: {leftover[0]!r} was not filled from the checkpoint")
        processor = Idefics2Processor.from_pretrained(str(folder), local_files_only=True)
        return cls(network.eval(), processor)

    def inputs(self, prompt: str, frames: torch.Tensor) -> dict[str, torch.Tensor]:
        """Processor inputs for one clip: [F, H, W, 3] floats in [0, 1], all of them (sample beforehand)."""
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"images: expected frames shaped [F, H, W, 3], got {tuple(frames.shape)}")
        if not torch.isfinite(frames).all():
            raise ValueError("images: some frames contain NaN or infinite values; check the VAE decode")
        from PIL import Image

        # The model card feeds decoded uint8 RGB frames as PIL images.
        pixels = (frames.float().clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()
        images = [Image.fromarray(frame) for frame in pixels]
        return dict(self.processor(text=build_query(prompt, len(images)), images=[images], return_tensors="pt"))

    @torch.inference_mode()
    def score_clip(self, prompt: str, frames: torch.Tensor) -> torch.Tensor:
        """[5] aspect scores (float32) for the clip ``frames`` (already sampled)."""
        parameter = next(self.network.parameters())
        batch = self.inputs(prompt, frames)
        batch = {key: value.to(parameter.device) for key, value in batch.items()}
        batch["pixel_values"] = batch["pixel_values"].to(parameter.dtype)
        return self.network(**batch)[0].float()
