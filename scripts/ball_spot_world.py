"""A procedural small video world in Wan's 16-channel latent space where seed search visibly matters.

A prompt is (ball colour, spot colour, motion): "a red ball with a blue spot moving right". Its clip is a soft
round ball of the ball colour on a dark ground, moving one token a frame across 3 latent frames of 8x8, with a spot
of the spot colour at its centre. The world is drawn on the model's 2x2 patch grid (each token is one uniform 2x2
block), so a small model trained on the CPU can learn it. The ball starts anywhere its path stays in the frame:
Wan's t2v transformer sees only relative positions (rotary attention, no absolute position embedding), so it
cannot learn a fixed start, and the seed decides where the ball goes. Like a real model's attribute binding, the
training data honour the spot only half of the time (``SPOT_FIDELITY``); otherwise the spot is missing (the ball's
own colour). So a trained model forgets the spot for many seeds, and because the spot is one token, whether it
appears is decided in the middle to late part of the trajectory: the seed matters, and so does how faithfully a
cheap draft follows the full rollout.

The verifier (``adherence``) is analytic: with the ground's direction removed from the latent, the cosine match of
the clip with the prompt's ideal clip outside the spot (the best over the ball's possible starts), scaled by
(1 + s) / 2 where s is the cosine of the latent at that start's spot tokens with the prompt's spot colour (mean over
the frames): a right ball without its spot scores 0.5, a perfect clip 1, an empty ground 0 (what removing the ground
leaves of it is float rounding, which counts as nothing: ``EMPTY_REMAINDER_SHARE``). Colours and the ground are
orthogonal 16-channel vectors, so ``render`` can turn a latent clip into RGB frames.
"""

from __future__ import annotations

import itertools
import pathlib

import torch

# The small Wan model trained in this world (bench/train_tiny_wan.py), and the sigma shift it was trained with
# (sample it with ModelSamplingSD3(shift=TRAINING_SHIFT)).
TRAINED_MODEL = pathlib.Path(__file__).resolve().parent / "models" / "tiny_wan_ball_spot.safetensors"
TRAINING_SHIFT = 3.0

COLOUR_NAMES = ("red", "green", "blue", "yellow")
MOTION_NAMES = ("right", "down", "diagonal")
COLOURS, MOTIONS = len(COLOUR_NAMES), len(MOTION_NAMES)
FRAMES, SIZE, CHANNELS, TOKENS, TEXT_WIDTH = 3, 8, 16, 8, 4096
LATENT_SHAPE = (CHANNELS, FRAMES, SIZE, SIZE)
PROMPTS = [(ball, spot, motion) for ball, spot, motion in itertools.product(range(COLOURS), range(COLOURS),
                                                                          range(MOTIONS)) if ball != spot]
SPOT_FIDELITY = 0.5  # share of training clips that show the prompt's spot
PATCH, GRID = 2, 4  # the model's patch size in latent pixels; tokens per side
_STEP = {0: (0, 1), 1: (1, 0), 2: (1, 1)}  # tokens per frame
DEFAULT_START = (1, 1)  # the ball's centre token in the first frame, where a caller names none
BALL_SPREAD, AMPLITUDE, GROUND_AMPLITUDE = 0.9, 2.0, 1.0  # spread in tokens
# Removing the ground from an empty ground leaves float rounding (0 here, 3e-8 per element on another machine), and
# the cosine of rounding with a clip is whatever the machine's summation order makes it (0.028 there). So a remainder
# below this share of the input's norm is nothing and matches nothing (cosine 0): float32 arithmetic leaves about 1e-7
# of it, and the faintest clip ``render`` can show at all (1/255 of a colour at one pixel) is 1e-3 of an empty
# ground's norm; 1e-5 keeps a margin of 100 on each side. An input stored coarser than float32 carries its own
# rounding, up to half its dtype's eps per element, so for it the share is that eps.
EMPTY_REMAINDER_SHARE = 1e-5
RGB = torch.tensor([(230, 57, 50), (60, 180, 75), (50, 110, 235), (245, 205, 40)], dtype=torch.float32) / 255
BACKGROUND = torch.tensor((24, 24, 28), dtype=torch.float32) / 255


def _world_tensors():
    generator = torch.Generator().manual_seed(1234)
    orthonormal, _ = torch.linalg.qr(torch.randn(CHANNELS, CHANNELS, generator=generator))
    colours = orthonormal[:, :COLOURS].T.contiguous() * AMPLITUDE
    # A ground under the ball gives the latent a real VAE's non-zero background; orthogonal to the colours.
    ground = orthonormal[:, COLOURS].contiguous()
    # Separate words for "red ball" and "red spot": the binding is part of the meaning.
    attribute_embeddings = torch.randn(2 * COLOURS + MOTIONS, TEXT_WIDTH, generator=generator)
    token_embeddings = torch.randn(TOKENS, TEXT_WIDTH, generator=generator) * 0.5
    return colours, ground, attribute_embeddings, token_embeddings


COLOUR_VECTORS, GROUND_DIRECTION, ATTRIBUTE_EMBEDDINGS, TOKEN_EMBEDDINGS = _world_tensors()
GROUND_VECTOR = GROUND_DIRECTION * GROUND_AMPLITUDE


def prompt_text(prompt: tuple[int, int, int]) -> str:
    ball, spot, motion = prompt
    return f"a {COLOUR_NAMES[ball]} ball with a {COLOUR_NAMES[spot]} spot moving {MOTION_NAMES[motion]}"


def _token_image(image: torch.Tensor) -> torch.Tensor:
    """[..., GRID, GRID] on the token grid -> [..., SIZE, SIZE] latent pixels (uniform 2x2 blocks)."""
    return image.repeat_interleave(PATCH, dim=-2).repeat_interleave(PATCH, dim=-1)


def _ball(row: int, column: int) -> torch.Tensor:
    rows = torch.arange(GRID, dtype=torch.float32).view(-1, 1)
    columns = torch.arange(GRID, dtype=torch.float32).view(1, -1)
    return torch.exp(-0.5 * ((rows - row) ** 2 + (columns - column) ** 2) / BALL_SPREAD ** 2)


def starts(motion: int) -> list[tuple[int, int]]:
    """Every first-frame centre token from which the ball stays in the frame for all frames."""
    step_row, step_column = _STEP[motion]
    return [(row, column) for row in range(GRID - (FRAMES - 1) * step_row)
            for column in range(GRID - (FRAMES - 1) * step_column)]


def centres(motion: int, start: tuple[int, int]) -> list[tuple[int, int]]:
    """The ball's centre token in each frame."""
    step_row, step_column = _STEP[motion]
    return [(start[0] + frame * step_row, start[1] + frame * step_column) for frame in range(FRAMES)]


def clip(prompt: tuple[int, int, int], start: tuple[int, int] = DEFAULT_START, spot_colour: int | None = None
         ) -> torch.Tensor:
    """The latent clip [16, F, S, S] of ``prompt`` starting at ``start``; ``spot_colour`` overrides the prompt's."""
    ball, spot, motion = prompt
    spot = spot if spot_colour is None else spot_colour
    frames = []
    for row, column in centres(motion, start):
        spot_mask = torch.zeros(GRID, GRID)
        spot_mask[row, column] = 1.0
        body = _ball(row, column) * (1 - spot_mask)
        cover = (body + spot_mask).clamp(max=1)
        frames.append(COLOUR_VECTORS[ball].view(-1, 1, 1) * body + COLOUR_VECTORS[spot].view(-1, 1, 1) * spot_mask
                      + GROUND_VECTOR.view(-1, 1, 1) * (1 - cover))
    return _token_image(torch.stack(frames, dim=1))


def conditioning(prompt: tuple[int, int, int] | None) -> torch.Tensor:
    """Text-encoder-shaped context [1, TOKENS, 4096]; None gives the empty (unconditional) prompt.

    Scaled to 0.2 per element like a text encoder's normalised output: at raw random-vector scale the
    model's text projection saturates and learns to ignore the prompt.
    """
    context = TOKEN_EMBEDDINGS.clone()
    if prompt is not None:
        ball, spot, motion = prompt
        context = context + (ATTRIBUTE_EMBEDDINGS[ball] + ATTRIBUTE_EMBEDDINGS[COLOURS + spot]
                             + ATTRIBUTE_EMBEDDINGS[2 * COLOURS + motion])
    return (0.2 * context / context.std(dim=-1, keepdim=True)).unsqueeze(0)


def random_clips(count: int, generator: torch.Generator) -> tuple[torch.Tensor, list[tuple[int, int, int]]]:
    """Training clips and their prompts, each from a random start; a share 1 - SPOT_FIDELITY lacks the spot."""
    prompts = [PROMPTS[i] for i in torch.randint(len(PROMPTS), (count,), generator=generator).tolist()]
    faithful = (torch.rand(count, generator=generator) < SPOT_FIDELITY).tolist()
    clips = []
    for prompt, keep in zip(prompts, faithful):
        choices = starts(prompt[2])
        start = choices[int(torch.randint(len(choices), (1,), generator=generator))]
        clips.append(clip(prompt, start, None if keep else prompt[0]))
    return torch.stack(clips), prompts


def _spot_mask(motion: int, start: tuple[int, int]) -> torch.Tensor:
    """1 on the spot's latent pixels, [1, F, S, S]."""
    mask = torch.zeros(1, FRAMES, GRID, GRID)
    for frame, (row, column) in enumerate(centres(motion, start)):
        mask[0, frame, row, column] = 1.0
    return _token_image(mask)


def _without_ground(latent: torch.Tensor) -> torch.Tensor:
    """``latent`` [16, ...] less its component along the ground's direction at every pixel."""
    direction = GROUND_DIRECTION.view(-1, *([1] * (latent.dim() - 1)))
    return latent - direction * (latent * direction).sum(dim=0, keepdim=True)


def _cosine_of_remainder(remainder: torch.Tensor, whole: torch.Tensor, target: torch.Tensor, share: float
                         ) -> torch.Tensor:
    """Cosine of ``remainder`` (``whole`` without the ground) with ``target``; 0 where the remainder is under
    ``share`` of the whole's norm (rounding, not content: ``EMPTY_REMAINDER_SHARE``)."""
    remainder, target = remainder.flatten(), target.flatten()
    if torch.linalg.vector_norm(remainder) <= share * torch.linalg.vector_norm(whole):
        return torch.zeros((), dtype=remainder.dtype)
    return torch.nn.functional.cosine_similarity(remainder, target, dim=0)


def adherence_parts(latent: torch.Tensor, prompt: tuple[int, int, int]) -> tuple[float, float]:
    """(ball, spot) of the verifier: the best cosine of the latent with the prompt's clips over the starts, both
    outside the spot and without the ground, and the mean cosine of the latent at that start's spot tokens (mean
    over each token's pixels) with the prompt's spot colour. A part with only rounding left without the ground
    matches nothing (0)."""
    share = max(EMPTY_REMAINDER_SHARE, torch.finfo(latent.dtype).eps)
    whole = latent.float()
    latent = _without_ground(whole)
    candidate_starts = starts(prompt[2])
    matches = []
    for start in candidate_starts:
        outside = 1 - _spot_mask(prompt[2], start)
        ideal = _without_ground(clip(prompt, start)) * outside
        matches.append(_cosine_of_remainder(latent * outside, whole * outside, ideal, share))
    best = int(torch.stack(matches).argmax())
    spot_colour = COLOUR_VECTORS[prompt[1]]
    spot_matches = []
    for frame, (row, column) in enumerate(centres(prompt[2], candidate_starts[best])):
        token = (slice(None), frame, slice(PATCH * row, PATCH * (row + 1)), slice(PATCH * column, PATCH * (column + 1)))
        spot_matches.append(_cosine_of_remainder(latent[token].mean(dim=(1, 2)), whole[token].mean(dim=(1, 2)),
                                                 spot_colour, share))
    return float(matches[best]), float(torch.stack(spot_matches).mean())


def adherence(latent: torch.Tensor, prompt: tuple[int, int, int]) -> float:
    """Verifier score in [-1, 1] of ``latent`` [16, F, S, S] for ``prompt``: ball match x (1 + spot match) / 2."""
    ball, spot = adherence_parts(latent, prompt)
    return ball * (1 + spot) / 2


def render(latent: torch.Tensor, scale: int = 8) -> torch.Tensor:
    """RGB frames [F, S * scale, S * scale, 3] in [0, 1]: each pixel mixes the colours its latent projects onto."""
    weights = torch.einsum("cfhw,kc->fhwk", latent.float(), COLOUR_VECTORS) / AMPLITUDE ** 2
    weights = weights.clamp(0, 1)
    coverage = weights.sum(-1, keepdim=True).clamp(max=1)
    frames = BACKGROUND * (1 - coverage) + weights @ RGB
    frames = frames.clamp(0, 1)
    return frames.repeat_interleave(scale, dim=1).repeat_interleave(scale, dim=2)
