"""Checks of the sampler nodes' inputs shared by every node that samples a search or a calibration: each error names
the input and what to do."""

from __future__ import annotations


def check_latent(latent: dict) -> None:
    batch = latent["samples"].shape[0]
    if batch != 1:
        raise ValueError(
            f"latent_image: has a batch of {batch}; the search draws its own seeds, so give it a batch of 1 "
            "and set num_candidates instead"
        )


def check_same_latent_format(model_high, model_low) -> None:
    high, low = (type(model.model.latent_format) for model in (model_high, model_low))
    if high is not low:
        raise ValueError(
            f"model_low: works on {low.__name__} latents but model_high on {high.__name__} latents; connect the "
            "high- and low-noise experts of one model (e.g. both Wan 2.2 A14B T2V files)"
        )


def split_step_message(steps, split_step) -> str | bool:
    if steps is None or split_step is None:
        return True
    if not 0 < split_step < steps:
        return (f"split_step: got {split_step} with steps {steps}; use a step from 1 to {steps - 1} (the high-noise "
                "expert runs the steps before it, the low-noise expert the rest; the official graph splits 20 at 10)")
    return True


def denoise_message(denoise) -> str | bool:
    """validate_inputs' answer for a KSampler-style denoise (None while it comes from a link)."""
    if denoise is not None and not 0.0 < denoise <= 1.0:
        return f"denoise: got {denoise}; use a value above 0 and at most 1 (1.0 samples from pure noise)"
    return True
