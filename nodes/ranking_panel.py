"""What a ranking shows: its text and its panel (every candidate in seed order with score, rank and margin), as
the verifier nodes and Combine Scores show it."""

from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core.panels import describe_verifier
from .packed_latent import carries_sound
from .panel_frames import panel_rows, pruning_panel


def show_ranking(ranking, candidates, frames=None) -> io.NodeOutput:
    """The ranking, its text and the GUI table: every candidate in seed order with score, rank and margin (pruned
    ones with their preview), what the verifier's score means, and ``frames`` (keyed by candidate number)."""
    lines = []
    for index, (number, seed, score) in enumerate(zip(candidates.candidate_numbers, candidates.seeds,
                                                      ranking.scores)):
        details = "".join(f", {name} {values[index]:.4f}" for name, values in ranking.columns)
        lines.append(f"{'*' if index == ranking.winner else ' '} candidate {number}, seed {seed}: {score:.4f}"
                     f"{details}")
    text = "\n".join(lines)
    shown = {"text": (text,), "cachedsearch_ranking": panel_rows(candidates, ranking, frames),
             "cachedsearch_verifier": [describe_verifier(ranking.verifier,
                                                         carries_sound(candidates.draft_latents))],
             **pruning_panel(candidates)}
    return io.NodeOutput(ranking, text, ui=shown)
