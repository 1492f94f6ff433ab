"""What saved work is keyed by, in one place: the digest of a value's content (``fingerprint``: a search's or a
calibration's setup), and from it the key a draft (``draft_key``) and a calibration rollout (``rollout_key``) are
saved under in ``saved_work``. A key changes exactly when what it names does."""

from __future__ import annotations

import hashlib
import json

import torch


def draft_key(setup: str, seed: int) -> str:
    """The digest a draft is saved under: its search's setup fingerprint (everything but the seed that makes the
    draft, the stage recipe included) and its seed."""
    return hashlib.sha256(json.dumps([setup, seed]).encode()).hexdigest()


def fingerprint(value) -> str:
    """A digest of ``value``'s content: tensors by dtype, shape and bytes; lists, tuples, dicts and packed latents
    (ComfyUI's NestedTensor) by their parts; numbers (a whole float as its integer), strings and None as JSON; any
    other object by its type (what it holds is not seen)."""
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()


def _feed(digest, value) -> None:
    if isinstance(value, torch.Tensor):
        tensor = value.detach().to("cpu").contiguous()
        digest.update(f"tensor {tensor.dtype} {tuple(tensor.shape)};".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    elif isinstance(value, dict):
        digest.update(f"dict {len(value)};".encode())
        for key in sorted(value, key=str):
            _feed(digest, str(key))
            _feed(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(f"list {len(value)};".encode())
        for item in value:
            _feed(digest, item)
    elif isinstance(value, float) and value.is_integer():  # 5.0 as 5: the GUI's prompt writes whole floats as ints
        digest.update(f"{json.dumps(int(value))};".encode())
    elif value is None or isinstance(value, (bool, int, float, str)):
        digest.update(f"{json.dumps(value)};".encode())
    elif isinstance(getattr(value, "tensors", None), list) and getattr(value, "is_nested", False):
        # A packed latent (ComfyUI's NestedTensor: LTX-2's video and audio) by its parts, what it holds counts.
        digest.update(b"packed;")
        _feed(digest, value.tensors)
    else:
        digest.update(f"object {type(value).__module__}.{type(value).__qualname__};".encode())


def rollout_key(setup: str, prompt: str, seed: int, arm: dict) -> str:
    """The digest a rollout is saved under: its setup's and prompt's fingerprints, its seed and its arm (JSON-ready
    settings of the cache that drafted it)."""
    return hashlib.sha256(json.dumps([setup, prompt, seed, arm], sort_keys=True).encode()).hexdigest()
