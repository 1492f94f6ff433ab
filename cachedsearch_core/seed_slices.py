"""Which participant of a distributed search drafts which seeds.

The N drafts of a search are independent ("CachedSearch: Training-Free Cached
Exploration for Test-Time Search in Video Diffusion", Sec. 3.2), so W
participants can draft them side by side. Participant k of W (the master is
k = 0, then the workers in the order the orchestrator lists them) drafts the
contiguous slice ``seed + start_k .. seed + start_k + size_k - 1`` with
``size_k = N // W + (1 if k < N % W else 0)`` and ``start_k`` the sum of the
sizes before it. The slices are disjoint and their union is exactly the
single-machine search's seeds ``seed .. seed + N - 1``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .records import candidate_seeds


@dataclasses.dataclass(frozen=True)
class SeedSlice:
    participant: str
    seeds: tuple[int, ...]


def seed_slices(seed: int, num_candidates: int, participants: Sequence[str]) -> tuple[SeedSlice, ...]:
    """The fixed slice of each participant, in participant order (see the module docstring)."""
    seeds = candidate_seeds(seed, num_candidates)
    if not participants:
        raise ValueError("participants: got none; the master always drafts, so list at least the master")
    if len(set(participants)) != len(participants):
        raise ValueError(f"participants: got {list(participants)}; each participant may appear once")
    base, extra = divmod(num_candidates, len(participants))
    slices, start = [], 0
    for index, participant in enumerate(participants):
        size = base + (1 if index < extra else 0)
        slices.append(SeedSlice(participant, tuple(seeds[start : start + size])))
        start += size
    return tuple(slices)


def slice_of(slices: Sequence[SeedSlice], participant: str) -> tuple[int, ...]:
    for seed_slice in slices:
        if seed_slice.participant == participant:
            return seed_slice.seeds
    raise ValueError(f"participant: {participant!r} is not one of {[s.participant for s in slices]}")
