"""A procedural "moving shapes" video world in Wan's 16-channel latent space: prompts, clips and a verifier.

A prompt is (colour, shape, motion). Its clip is a shape filled with the colour's 16-channel vector, moving
across 5 latent frames of 12x12. The verifier scores prompt adherence analytically: the best cosine match
of the clip against the prompt's ideal clip over every start position. Used to train a small Wan model on the
CPU and to audit ranking fidelity on a model that has learned something.
"""

from __future__ import annotations

import itertools

import torch

COLOURS, SHAPES, MOTIONS = 4, 3, 3  # motions: right, down, diagonal
FRAMES, SIZE, CHANNELS, TOKENS, TEXT_WIDTH = 5, 12, 16, 8, 4096
LATENT_SHAPE = (CHANNELS, FRAMES, SIZE, SIZE)
PROMPTS = list(itertools.product(range(COLOURS), range(SHAPES), range(MOTIONS)))
_STEP = {0: (0, 1), 1: (1, 0), 2: (1, 1)}


def _world_tensors():
    generator = torch.Generator().manual_seed(1234)
    colours = torch.nn.functional.normalize(torch.randn(COLOURS, CHANNELS, generator=generator), dim=1) * 2.0
    attribute_embeddings = torch.randn(COLOURS + SHAPES + MOTIONS, TEXT_WIDTH, generator=generator)
    token_embeddings = torch.randn(TOKENS, TEXT_WIDTH, generator=generator) * 0.5
    return colours, attribute_embeddings, token_embeddings


COLOUR_VECTORS, ATTRIBUTE_EMBEDDINGS, TOKEN_EMBEDDINGS = _world_tensors()


def shape_mask(shape: int) -> torch.Tensor:
    """3x3 masks: square, plus, diagonal bar."""
    masks = (
        [[1, 1, 1], [1, 1, 1], [1, 1, 1]],
        [[0, 1, 0], [1, 1, 1], [0, 1, 0]],
        [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
    )
    return torch.tensor(masks[shape], dtype=torch.float32)


def clip(prompt: tuple[int, int, int], row: int, column: int) -> torch.Tensor:
    """The ideal latent clip [16, F, S, S] of ``prompt`` starting at (row, column); moves wrap around."""
    colour, shape, motion = prompt
    video = torch.zeros(LATENT_SHAPE)
    mask = shape_mask(shape)
    step_row, step_column = _STEP[motion]
    for frame in range(FRAMES):
        top, left = (row + frame * step_row) % SIZE, (column + frame * step_column) % SIZE
        for dr, dc in zip(*torch.nonzero(mask, as_tuple=True)):
            video[:, frame, (top + dr) % SIZE, (left + dc) % SIZE] = COLOUR_VECTORS[colour]
    return video


def conditioning(prompt: tuple[int, int, int] | None) -> torch.Tensor:
    """Text-encoder-shaped context [1, TOKENS, 4096]; None gives the empty (unconditional) prompt."""
    context = TOKEN_EMBEDDINGS.clone()
    if prompt is not None:
        colour, shape, motion = prompt
        meaning = (ATTRIBUTE_EMBEDDINGS[colour] + ATTRIBUTE_EMBEDDINGS[COLOURS + shape]
                   + ATTRIBUTE_EMBEDDINGS[COLOURS + SHAPES + motion])
        context = context + meaning
    return context.unsqueeze(0)


def random_clips(count: int, generator: torch.Generator) -> tuple[torch.Tensor, list[tuple[int, int, int]]]:
    prompts = [PROMPTS[i] for i in torch.randint(len(PROMPTS), (count,), generator=generator).tolist()]
    starts = torch.randint(SIZE, (count, 2), generator=generator).tolist()
    return torch.stack([clip(p, r, c) for p, (r, c) in zip(prompts, starts)]), prompts


_TEMPLATE_CACHE: dict = {}


def adherence(latent: torch.Tensor, prompt: tuple[int, int, int]) -> float:
    """Verifier: best cosine similarity of ``latent`` [16, F, S, S] with the prompt's clip at any start."""
    if prompt not in _TEMPLATE_CACHE:
        templates = torch.stack([clip(prompt, r, c) for r in range(SIZE) for c in range(SIZE)])
        _TEMPLATE_CACHE[prompt] = torch.nn.functional.normalize(templates.flatten(1), dim=1)
    flat = torch.nn.functional.normalize(latent.float().flatten().unsqueeze(0), dim=1)
    return float((_TEMPLATE_CACHE[prompt] @ flat.T).max())
