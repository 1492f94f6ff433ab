"""Demo-only ComfyUI nodes for the ball-and-spot world (scripts/ball_spot_world.py): its prompts, verifier and renderer,
and stand-ins for a VAE and a verifier model so that CachedSearch Calibrate (which decodes and scores like the
Verifier node) runs in the world.

``scripts/demo.py`` installs this pack next to CachedSearch in the demo's own ComfyUI base directory, so the real
search nodes run on the model trained in that world. It is not part of the extension: a user's ComfyUI, which
loads only the repository's top-level ``__init__.py``, never sees these nodes.
"""

import importlib.util
import pathlib

import torch

# Loaded by path: ComfyUI imports this pack on its own, without the repository's packages on sys.path.
_WORLD_PATH = pathlib.Path(__file__).resolve().parents[1] / "ball_spot_world.py"
_spec = importlib.util.spec_from_file_location("cachedsearch_demo_ball_spot_world", _WORLD_PATH)
ball_spot_world = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ball_spot_world)


def _prompt_of(text: str) -> tuple[int, int, int]:
    for prompt in ball_spot_world.PROMPTS:
        if ball_spot_world.prompt_text(prompt) == text.strip():
            return prompt
    raise ValueError(f"prompt: got {text!r}; connect the prompt output of the Ball-and-Spot Prompt node "
                     "(texts like 'a red ball with a blue spot moving right')")


def _model_scale(samples: torch.Tensor) -> torch.Tensor:
    """Latents as the sampler returns them (Wan 2.1 VAE scale) in the scale the world's model was trained in."""
    import comfy.latent_formats

    return comfy.latent_formats.Wan21().process_in(samples.float())


def _clips(latent: dict) -> torch.Tensor:
    samples = latent["samples"]
    if tuple(samples.shape[1:]) != ball_spot_world.LATENT_SHAPE:
        raise ValueError(f"latent: got shape {tuple(samples.shape)}; the ball-and-spot world needs "
                         f"[N, {', '.join(map(str, ball_spot_world.LATENT_SHAPE))}] (EmptyHunyuanLatentVideo "
                         f"{8 * ball_spot_world.SIZE}x{8 * ball_spot_world.SIZE}, "
                         f"length {4 * ball_spot_world.FRAMES - 3})")
    return _model_scale(samples)


class BallAndSpotPrompt:
    CATEGORY = "CachedSearch/demo"
    FUNCTION = "encode"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "STRING")
    RETURN_NAMES = ("positive", "negative", "prompt")
    DESCRIPTION = "Demo-only: the ball-and-spot world's text conditioning (what a text encoder would give)."

    @classmethod
    def INPUT_TYPES(cls):
        colours = list(ball_spot_world.COLOUR_NAMES)
        return {"required": {
            "ball": (colours, {"default": "red", "tooltip": "Colour of the ball."}),
            "spot": (colours, {"default": "blue", "tooltip": "Colour of the one-pixel spot at the ball's centre; "
                               "must differ from the ball's."}),
            "motion": (list(ball_spot_world.MOTION_NAMES),
                       {"default": "right", "tooltip": "Direction the ball moves."}),
        }}

    def encode(self, ball, spot, motion):
        if ball == spot:
            raise ValueError(f"spot: got {spot!r}, the same colour as the ball; pick another colour for the spot")
        world = ball_spot_world
        prompt = (world.COLOUR_NAMES.index(ball), world.COLOUR_NAMES.index(spot), world.MOTION_NAMES.index(motion))
        return ([[world.conditioning(prompt), {}]], [[world.conditioning(None), {}]], world.prompt_text(prompt))


class WorldTextEncoder:
    """A text encoder stand-in (what CLIPTextEncode calls): the world's conditioning of a prompt's text, so that
    CachedSearch Calibrate encodes several world prompts, one per line, as it would with a real CLIP."""

    def tokenize(self, text: str) -> str:
        return text

    def encode_from_tokens_scheduled(self, tokens: str) -> list:
        prompt = _prompt_of(tokens) if tokens.strip() else None
        return [[ball_spot_world.conditioning(prompt), {}]]


class BallAndSpotTextEncoder:
    CATEGORY = "CachedSearch/demo"
    FUNCTION = "load"
    RETURN_TYPES = ("CLIP",)
    DESCRIPTION = ("Demo-only: the world's text conditioning as a text encoder, for CLIPTextEncode and CachedSearch "
                   "Calibrate's clip input (world prompts only).")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def load(self):
        return (WorldTextEncoder(),)


class BallAndSpotVerifier:
    CATEGORY = "CachedSearch/demo"
    FUNCTION = "score"
    RETURN_TYPES = ("STRING",)
    RETURN_NAMES = ("scores",)
    OUTPUT_NODE = True
    DESCRIPTION = ("Demo-only: the world's analytic prompt-adherence verifier, one score per latent in the batch "
                   "(feed CachedSearch Ranking From Scores).")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "latent": ("LATENT", {"tooltip": "Drafts (or a delivered video) from a sampler, N on the batch axis."}),
            "prompt": ("STRING", {"forceInput": True, "tooltip": "The prompt output of Ball-and-Spot Prompt."}),
        }}

    def score(self, latent, prompt):
        target = _prompt_of(prompt)
        scores = "\n".join(f"{ball_spot_world.adherence(clip, target):.4f}" for clip in _clips(latent))
        return {"ui": {"text": (scores,)}, "result": (scores,)}


class BallAndSpotRender:
    CATEGORY = "CachedSearch/demo"
    FUNCTION = "render"
    RETURN_TYPES = ("IMAGE",)
    DESCRIPTION = "Demo-only: colours each latent pixel by the world's colours it carries (no VAE needed)."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "latent": ("LATENT", {"tooltip": "Ball-and-spot latents, N on the batch axis."}),
            "scale": ("INT", {"default": 12, "min": 1, "max": 64, "tooltip": "Pixels per latent pixel."}),
        }}

    def render(self, latent, scale):
        return (torch.cat([ball_spot_world.render(clip, scale) for clip in _clips(latent)]),)


class WorldFrames:
    """A VAE stand-in: "decodes" a latent to the world's latent clip in the model's scale, one frame per latent
    frame with the 16 channels as pixel channels, so the world's verifier can read it back exactly."""

    def decode(self, samples: torch.Tensor) -> torch.Tensor:
        return _model_scale(samples).permute(0, 2, 3, 4, 1)


class WorldVerifier:
    """The world's analytic verifier behind the interface of CachedSearch's verifiers (``score(prompt, frames)``).
    It judges a whole clip (its motion spans the frames), so it returns one score for all the frames it is given:
    averaged, as the Verifier node averages per-frame scores, that is the clip's score exactly."""

    name = "ball-and-spot adherence"

    def score(self, prompt: str, frames: torch.Tensor) -> torch.Tensor:
        expected = (ball_spot_world.FRAMES, ball_spot_world.SIZE, ball_spot_world.SIZE, ball_spot_world.CHANNELS)
        if tuple(frames.shape) != expected:
            raise ValueError(f"the ball-and-spot verifier reads whole world clips of frames {list(expected)} (from "
                             f"Ball-and-Spot Latent Frames, at least {ball_spot_world.FRAMES} frames per candidate), got "
                             f"{list(frames.shape)}")
        clip = frames.permute(3, 0, 1, 2)
        return torch.tensor([ball_spot_world.adherence(clip, _prompt_of(prompt))], dtype=torch.float64)


class BallAndSpotFrames:
    CATEGORY = "CachedSearch/demo"
    FUNCTION = "load"
    RETURN_TYPES = ("VAE",)
    DESCRIPTION = ("Demo-only: a VAE stand-in for nodes that decode (CachedSearch Calibrate): the world's latent "
                   "clip as frames for the Ball-and-Spot Verifier Model, not pictures.")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def load(self):
        return (WorldFrames(),)


class BallAndSpotVerifierModel:
    CATEGORY = "CachedSearch/demo"
    FUNCTION = "load"
    RETURN_TYPES = ("CACHEDSEARCH_VERIFIER",)
    DESCRIPTION = ("Demo-only: the world's analytic verifier as a verifier model, for CachedSearch Calibrate with "
                   "Ball-and-Spot Latent Frames as its VAE.")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def load(self):
        return (WorldVerifier(),)


NODE_CLASS_MAPPINGS = {
    "CachedSearchDemoBallAndSpotPrompt": BallAndSpotPrompt,
    "CachedSearchDemoBallAndSpotVerifier": BallAndSpotVerifier,
    "CachedSearchDemoBallAndSpotRender": BallAndSpotRender,
    "CachedSearchDemoBallAndSpotFrames": BallAndSpotFrames,
    "CachedSearchDemoBallAndSpotVerifierModel": BallAndSpotVerifierModel,
    "CachedSearchDemoBallAndSpotTextEncoder": BallAndSpotTextEncoder,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "CachedSearchDemoBallAndSpotPrompt": "Ball-and-Spot Prompt (CachedSearch demo)",
    "CachedSearchDemoBallAndSpotVerifier": "Ball-and-Spot Verifier (CachedSearch demo)",
    "CachedSearchDemoBallAndSpotRender": "Ball-and-Spot Render (CachedSearch demo)",
    "CachedSearchDemoBallAndSpotFrames": "Ball-and-Spot Latent Frames (CachedSearch demo)",
    "CachedSearchDemoBallAndSpotVerifierModel": "Ball-and-Spot Verifier Model (CachedSearch demo)",
    "CachedSearchDemoBallAndSpotTextEncoder": "Ball-and-Spot Text Encoder (CachedSearch demo)",
}
