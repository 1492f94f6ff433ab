"""A latent's samples as ComfyUI hands them between nodes: one tensor, or, on LTX-2 (ComfyUI 0.33's LTXAV), the
video and audio latents packed by LTXVConcatAVLatent into a ``comfy.nested_tensor.NestedTensor``. The one place
where the search joins its drafts, takes one of them and splits one into parts to save, whichever it is."""

from __future__ import annotations

import torch


def parts(samples) -> tuple[torch.Tensor, ...]:
    """The tensors ``samples`` holds: itself, or a packed latent's parts in their order ([video, audio])."""
    return (samples,) if isinstance(samples, torch.Tensor) else tuple(samples.unbind())


def carries_sound(samples) -> bool:
    """Whether ``samples`` is LTX-2's packed [video, audio] latent: its pictures are judged, its sound is not."""
    return len(parts(samples)) > 1


def packed(tensors) -> torch.Tensor:
    """The samples of ``tensors`` (``parts``' inverse): the one tensor, or several packed as LTXVConcatAVLatent
    packs them (only a runtime with LTX-2 ever has several)."""
    tensors = tuple(tensors)
    if len(tensors) == 1:
        return tensors[0]
    from comfy.nested_tensor import NestedTensor

    return NestedTensor(list(tensors))


def join(latents) -> torch.Tensor:
    """The drafts' samples ``latents`` (each a batch, packed or not) as one batch, part by part."""
    return packed(torch.cat(batches) for batches in zip(*(parts(latent) for latent in latents), strict=True))


def one(latents, index: int) -> torch.Tensor:
    """A copy of draft ``index`` of the batch ``latents`` (a batch of one), every part of it."""
    return packed(part[index : index + 1].clone() for part in parts(latents))
