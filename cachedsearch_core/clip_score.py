"""CLIP score verifier from a local transformers CLIP folder: 100 x cosine(image, prompt) per frame.

A second built-in verifier beside ImageReward (the method is verifier-agnostic,
the report's Sec. 3.2). The folder is what ``CLIPModel.save_pretrained`` writes plus
its tokenizer files; nothing is downloaded.
"""

from __future__ import annotations

import json
import pathlib

import torch

from .image_reward import CLIP_MEAN, CLIP_STD, VerifierFileError, preprocess_frames, require_prompt


class ClipScore(torch.nn.Module):
    def __init__(self, model, tokenizer, image_size: int, mean, std):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.image_size = image_size
        self.register_buffer("pixel_mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("pixel_std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)

    @classmethod
    def from_folder(cls, folder: pathlib.Path, device="cpu", dtype=torch.float32) -> ClipScore:
        from transformers import AutoTokenizer, CLIPModel

        folder = pathlib.Path(folder)
        if not (folder / "config.json").exists():
            raise VerifierFileError(f"no CLIP model at {folder}: expected config.json, the weights and the "
                                    "tokenizer files saved by transformers (CLIPModel.save_pretrained)")
        model = CLIPModel.from_pretrained(str(folder), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        if len(tokenizer) > model.config.text_config.vocab_size:
            raise VerifierFileError(f"tokenizer in {folder} has {len(tokenizer)} tokens but the CLIP text model only "
                                    f"{model.config.text_config.vocab_size}; use the tokenizer saved with the model")
        mean, std = CLIP_MEAN, CLIP_STD
        preprocessor = folder / "preprocessor_config.json"
        if preprocessor.exists():
            settings = json.loads(preprocessor.read_text())
            mean, std = settings.get("image_mean", mean), settings.get("image_std", std)
        verifier = cls(model, tokenizer, model.config.vision_config.image_size, mean, std)
        return verifier.to(device=device, dtype=dtype).eval()

    @torch.inference_mode()
    def score(self, prompt: str, frames: torch.Tensor) -> torch.Tensor:
        """100 x cosine similarity of each frame with ``prompt``."""
        tokens = self.tokenizer(require_prompt(prompt), padding="max_length", truncation=True,
                                max_length=self.model.config.text_config.max_position_embeddings, return_tensors="pt")
        device = self.pixel_mean.device
        dtype = self.model.visual_projection.weight.dtype
        pixels = preprocess_frames(frames, self.image_size, self.pixel_mean, self.pixel_std).to(dtype)
        # The projections are applied here so the result does not depend on get_*_features' return type,
        # which changed between transformers 4 and 5.
        image = self.model.visual_projection(self.model.vision_model(pixel_values=pixels).pooler_output)
        text_output = self.model.text_model(input_ids=tokens.input_ids.to(device),
                                            attention_mask=tokens.attention_mask.to(device))
        text = self.model.text_projection(text_output.pooler_output)
        cosine = torch.nn.functional.cosine_similarity(image.float(), text.float(), dim=-1)
        return 100.0 * cosine
