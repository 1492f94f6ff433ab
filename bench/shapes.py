"""A procedural "moving shapes" video world in Wan's 16-channel latent space: prompts, clips and a verifier.

A prompt is (colour, shape, motion). Its clip is a soft blob (round, wide or tall) carrying the colour's
16-channel vector, moving across 3 latent frames of 8x8 from one of four starting points. The verifier scores
prompt adherence analytically: the best cosine match of the clip against the prompt's ideal clips. Used to train a small Wan model on the
CPU and to audit ranking fidelity on a model that has learned something.
"""

from __future__ import annotations

import itertools

import torch

COLOURS, SHAPES, MOTIONS = 4, 3, 3  # shapes: round, wide, tall; motions: right, down, diagonal
FRAMES, SIZE, CHANNELS, TOKENS, TEXT_WIDTH = 3, 8, 16, 8, 4096
LATENT_SHAPE = (CHANNELS, FRAMES, SIZE, SIZE)
PROMPTS = list(itertools.product(range(COLOURS), range(SHAPES), range(MOTIONS)))
_STEP = {0: (0, 2), 1: (2, 0), 2: (2, 2)}  # latent pixels per frame
STARTS = ((1.5, 1.5), (1.5, 2.5), (2.5, 1.5), (2.5, 2.5))  # blob centres in the first frame


def _world_tensors():
    generator = torch.Generator().manual_seed(1234)
    colours = torch.nn.functional.normalize(torch.randn(COLOURS, CHANNELS, generator=generator), dim=1) * 2.0
    attribute_embeddings = torch.randn(COLOURS + SHAPES + MOTIONS, TEXT_WIDTH, generator=generator)
    token_embeddings = torch.randn(TOKENS, TEXT_WIDTH, generator=generator) * 0.5
    return colours, attribute_embeddings, token_embeddings


COLOUR_VECTORS, ATTRIBUTE_EMBEDDINGS, TOKEN_EMBEDDINGS = _world_tensors()


def _blob(shape: int, row: float, column: float) -> torch.Tensor:
    """A soft blob [S, S] centred at (row, column): round, wide or tall."""
    spread_row, spread_column = ((1.2, 1.2), (0.7, 2.0), (2.0, 0.7))[shape]
    rows = torch.arange(SIZE, dtype=torch.float32).view(-1, 1)
    columns = torch.arange(SIZE, dtype=torch.float32).view(1, -1)
    return torch.exp(-0.5 * (((rows - row) / spread_row) ** 2 + ((columns - column) / spread_column) ** 2))


def clip(prompt: tuple[int, int, int], row: float, column: float) -> torch.Tensor:
    """The ideal latent clip [16, F, S, S] of ``prompt`` starting at (row, column)."""
    colour, shape, motion = prompt
    step_row, step_column = _STEP[motion]
    frames = [_blob(shape, row + frame * step_row, column + frame * step_column) for frame in range(FRAMES)]
    return COLOUR_VECTORS[colour].view(-1, 1, 1, 1) * torch.stack(frames).unsqueeze(0)


def conditioning(prompt: tuple[int, int, int] | None) -> torch.Tensor:
    """Text-encoder-shaped context [1, TOKENS, 4096]; None gives the empty (unconditional) prompt.

    Scaled to 0.2 per element like a text encoder's normalised output: at raw random-vector scale the
    model's text projection saturates and learns to ignore the prompt.
    """
    context = TOKEN_EMBEDDINGS.clone()
    if prompt is not None:
        colour, shape, motion = prompt
        meaning = (ATTRIBUTE_EMBEDDINGS[colour] + ATTRIBUTE_EMBEDDINGS[COLOURS + shape]
                   + ATTRIBUTE_EMBEDDINGS[COLOURS + SHAPES + motion])
        context = context + meaning
    return (0.2 * context / context.std(dim=-1, keepdim=True)).unsqueeze(0)


def random_clips(count: int, generator: torch.Generator) -> tuple[torch.Tensor, list[tuple[int, int, int]]]:
    prompts = [PROMPTS[i] for i in torch.randint(len(PROMPTS), (count,), generator=generator).tolist()]
    starts = [STARTS[i] for i in torch.randint(len(STARTS), (count,), generator=generator).tolist()]
    return torch.stack([clip(p, r, c) for p, (r, c) in zip(prompts, starts)]), prompts


_TEMPLATE_CACHE: dict = {}


def adherence(latent: torch.Tensor, prompt: tuple[int, int, int]) -> float:
    """Verifier: best cosine similarity of ``latent`` [16, F, S, S] with the prompt's clip from any start."""
    if prompt not in _TEMPLATE_CACHE:
        templates = torch.stack([clip(prompt, r, c) for r, c in STARTS])
        _TEMPLATE_CACHE[prompt] = torch.nn.functional.normalize(templates.flatten(1), dim=1)
    flat = torch.nn.functional.normalize(latent.float().flatten().unsqueeze(0), dim=1)
    return float((_TEMPLATE_CACHE[prompt] @ flat.T).max())
