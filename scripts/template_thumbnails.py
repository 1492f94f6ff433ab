"""Thumbnails for ComfyUI's template browser: workflows/<name>.jpg for every shipped workflow.

ComfyUI's frontends (1.32 to 1.58) build a custom node's template card from the workflow's file name alone (title
and description are the name) and load its picture from `<name>.jpg` beside the workflow. So the picture carries
what the card cannot: the model, what the workflow does in a few words, and drafts of the small Wan model trained in
the ball-and-spot world (scripts/models/tiny_wan_ball_spot.safetensors, sampled on the CPU in process, one prompt,
seeds 0 to 15), the best one by the world's verifier outlined as the search's winner. Each file carries its card's
text as a JPEG comment, so the tests see when a card here changed and its picture was not made again.

    .venv/bin/python scripts/template_thumbnails.py   # rewrites workflows/*.jpg (about a minute on 2 cores)
"""

from __future__ import annotations

import dataclasses
import io
import pathlib
import sys
import tempfile
import textwrap

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from PIL import Image, ImageDraw, ImageFont

WORKFLOWS = REPO_ROOT / "workflows"
SIZE = 400  # square: every frontend crops the card picture to a square
JPEG_QUALITY = 85
MAX_BYTES = 40_000
PROMPT = (0, 2, 0)  # a red ball with a blue spot moving right, the demo's prompt
FAMILY_PROMPTS = [(0, 2, 0), (1, 3, 1), (2, 0, 2), (3, 1, 0), (1, 0, 2)]
STEPS, SEEDS = 12, 16

BACKGROUND, PANEL, TEXT, MUTED = (32, 32, 36), (46, 46, 52), (245, 245, 245), (190, 190, 198)
WINNER, PRUNED = (70, 200, 90), (120, 120, 128)
FAMILY_COLOURS = {"Wan 2.1": (40, 96, 180), "Wan 2.2": (118, 70, 170), "HunyuanVideo": (196, 110, 30),
                  "LTX-2": (30, 140, 120)}


@dataclasses.dataclass(frozen=True)
class TemplateCard:
    """What one workflow's thumbnail says: the model it is for, a title, one line on what it does, and which
    picture shows it (a key of PICTURES)."""

    model: str
    title: str
    purpose: str
    picture: str
    start_here: bool = False

    def comment(self) -> bytes:
        """The card's text, stored in the JPEG so a test can tell a stale picture."""
        return f"CachedSearch template | {self.model} | {self.title} | {self.purpose}".encode()


TEMPLATE_CARDS = {
    "01 Wan 2.1 (start here)": TemplateCard(
        "Wan 2.1 T2V 1.3B", "Seed search", "Best of 8 cheap drafts; the winner rendered at full quality",
        "search", start_here=True),
    "02 Wan 2.1 pruned search": TemplateCard(
        "Wan 2.1 T2V 1.3B", "Pruned search", "Weak drafts stop at step 20 of 50: a cheaper search", "pruned"),
    "03 Wan 2.1 on several GPUs": TemplateCard(
        "Wan 2.1 T2V 1.3B", "Multi-GPU search", "Drafts spread over GPUs (needs ComfyUI-Distributed)",
        "distributed"),
    "06 Wan 2.2 TI2V 5B search": TemplateCard(
        "Wan 2.2 TI2V 5B", "Seed search", "Best of 8 cached drafts, winner at full quality", "search"),
    "07 Wan 2.2 A14B two experts": TemplateCard(
        "Wan 2.2 A14B T2V", "Two-expert search", "High- and low-noise experts, each with its cache", "search"),
    "08 Wan 2.2 image to video": TemplateCard(
        "Wan 2.2 A14B I2V", "Image-to-video search", "Your start image, best of 8 drafts", "image_to_video"),
    "09 Wan 2.2 A14B 4-step LoRA": TemplateCard(
        "Wan 2.2 A14B + 4-step LoRA", "16 fast drafts", "lightx2v 4-step LoRAs: 16 drafts, the commit is free",
        "sixteen"),
    "10 Wan 2.2 A14B GGUF": TemplateCard(
        "Wan 2.2 A14B T2V GGUF", "Search on GGUF", "For 8-16 GB cards (needs ComfyUI-GGUF)", "search"),
    "12 HunyuanVideo search": TemplateCard(
        "HunyuanVideo T2V", "Seed search", "Best of 8 cached drafts, winner at full quality", "search"),
    "13 HunyuanVideo 1.5 + 1080p": TemplateCard(
        "HunyuanVideo 1.5 T2V", "Search, then 1080p", "Only the winner goes through super-resolution",
        "upscale"),
    "14 Wan 2.1 in a subgraph": TemplateCard(
        "Wan 2.1 T2V 1.3B", "Search in a subgraph", "As the official templates: its inputs on one node", "search"),
    "15 LTX-2.3 search + upscale": TemplateCard(
        "LTX-2.3 T2V (ComfyUI 0.33+)", "Search, then upscale", "Only the winner is upsampled x2 and refined",
        "upscale"),
    "16 Wan 2.1 searched wide": TemplateCard(
        "Wan 2.1 T2V 1.3B", "Searched wide", "8 renders' GPU time, width and pruning from Calibrate", "wide"),
    "04 Calibrate tau, one prompt": TemplateCard(
        "Any one-stage model (Wan 2.1)", "Calibrate tau", "Find the cache setting that keeps your verifier's pick",
        "calibrate"),
    "11 Calibrate Wan 2.2 A14B": TemplateCard(
        "Wan 2.2 A14B T2V", "Calibrate both experts", "A tau for each expert, wired into its cache",
        "calibrate_experts"),
    "05 Calibrate a model family": TemplateCard(
        "Wan 2.1 (any model family)", "Calibrate a family", "25 prompts x 8 seeds; resumes after a stop",
        "calibrate_family"),
}


def font(size: int):
    return ImageFont.load_default(size=size)  # Pillow's bundled font: the same pictures on every machine


# -- the drafts: the trained demo model sampled in process ---------------------------------------------------------

def sample_drafts(seeds: dict[tuple[int, int, int], int]) -> dict[tuple, list[tuple[Image.Image, float]]]:
    """For each prompt, seeds 0 to seeds[prompt] - 1: each seed's middle frame (8x8 RGB) and the world verifier's score, sampled by KSampler on the
    trained model as scripts/demo.py samples it (euler, simple, the training shift, cfg 4)."""
    import torch

    from scripts import ball_spot_world, comfy_runtime

    base = pathlib.Path(tempfile.mkdtemp(prefix="cachedsearch_thumbnails_"))
    (base / "models" / "diffusion_models").mkdir(parents=True)
    (base / "models" / "diffusion_models" / ball_spot_world.TRAINED_MODEL.name).symlink_to(
        ball_spot_world.TRAINED_MODEL)
    nodes = comfy_runtime.load_in_process(base).NODE_CLASS_MAPPINGS
    import comfy.utils

    comfy.utils.PROGRESS_BAR_ENABLED = False  # 56 samplings: their bars would bury the list of files written

    def one(node, **inputs):
        return comfy_runtime.run_node(nodes[node], **inputs)[0]

    model = one("ModelSamplingSD3", model=one("UNETLoader", unet_name=ball_spot_world.TRAINED_MODEL.name,
                                               weight_dtype="default"), shift=ball_spot_world.TRAINING_SHIFT)
    latent = one("EmptyHunyuanLatentVideo", width=8 * ball_spot_world.SIZE, height=8 * ball_spot_world.SIZE,
                 length=4 * ball_spot_world.FRAMES - 3, batch_size=1)
    negative = [[ball_spot_world.conditioning(None), {}]]
    drafts = {}
    for prompt, count in seeds.items():
        positive = [[ball_spot_world.conditioning(prompt), {}]]
        drafts[prompt] = []
        for seed in range(count):
            out = one("KSampler", model=model, seed=seed, steps=STEPS, cfg=4.0, sampler_name="euler",
                      scheduler="simple", positive=positive, negative=negative, latent_image=latent, denoise=1.0)
            clip = model.model.latent_format.process_in(out["samples"])[0].float()
            frame = ball_spot_world.render(clip, scale=1)[ball_spot_world.FRAMES // 2]
            pixels = (255 * frame).round().to(torch.uint8).numpy()
            drafts[prompt].append((Image.fromarray(pixels), ball_spot_world.adherence(clip, prompt)))
    return drafts


def start_image() -> Image.Image:
    """The I2V workflow's start image: the first frame of the prompt's ideal clip in the ball-and-spot world."""
    import torch

    from scripts import ball_spot_world

    frame = ball_spot_world.render(ball_spot_world.clip(PROMPT), scale=1)[0]
    return Image.fromarray((255 * frame).round().to(torch.uint8).numpy())


# -- drawing ---------------------------------------------------------------------------------------------------------

def tile(canvas: Image.Image, frame: Image.Image, box: tuple[int, int, int], outline=None, dim=False):
    """Draws one draft's frame at (x, y) as a size x size square (crisp 2x2-token blocks), optionally outlined or
    dimmed and crossed out (a pruned draft)."""
    x, y, size = box
    picture = frame.resize((size, size), Image.Resampling.NEAREST)
    if dim:
        picture = Image.blend(picture, Image.new("RGB", picture.size, BACKGROUND), 0.65)
    canvas.paste(picture, (x, y))
    draw = ImageDraw.Draw(canvas)
    if dim:
        draw.line((x + 4, y + 4, x + size - 5, y + size - 5), fill=PRUNED, width=3)
        draw.line((x + 4, y + size - 5, x + size - 5, y + 4), fill=PRUNED, width=3)
    if outline:
        draw.rectangle((x - 3, y - 3, x + size + 2, y + size + 2), outline=outline, width=4)


def arrow(draw: ImageDraw.ImageDraw, x0: int, x1: int, y: int):
    draw.line((x0, y, x1 - 8, y), fill=MUTED, width=4)
    draw.polygon([(x1, y), (x1 - 12, y - 9), (x1 - 12, y + 9)], fill=MUTED)


def caption(draw: ImageDraw.ImageDraw, xy: tuple[int, int], text: str, fill=MUTED, size=17, anchor="la"):
    draw.text(xy, text, fill=fill, font=font(size), anchor=anchor)


def draft_grid(canvas, drafts, origin, columns, size, gap, winner=None, pruned=()):
    x0, y0 = origin
    for index, (frame, _) in enumerate(drafts):
        row, column = divmod(index, columns)
        tile(canvas, frame, (x0 + column * (size + gap), y0 + row * (size + gap), size),
             outline=WINNER if index == winner else None, dim=index in pruned)


def search_picture(canvas, drafts, count=8, columns=4, size=44, gap=8, left=20, label=None, pruned=(),
                   winner_label="winner"):
    """Drafts in a grid, an arrow, and the winner large: best-of-N at a glance."""
    draw = ImageDraw.Draw(canvas)
    chosen = drafts[:count]
    kept = [index for index in range(count) if index not in pruned]
    winner = max(kept, key=lambda index: chosen[index][1])
    rows = (count + columns - 1) // columns
    top = 70 + (150 - rows * (size + gap) + gap) // 2
    draft_grid(canvas, chosen, (left, top), columns, size, gap, winner=winner, pruned=pruned)
    right = left + columns * (size + gap) - gap
    arrow(draw, right + 10, right + 42, 145)
    tile(canvas, chosen[winner][0], (SIZE - 20 - 110, 90, 110), outline=WINNER)
    caption(draw, (left, 232), label or f"{count} cached drafts")
    caption(draw, (SIZE - 20 - 55, 232), winner_label, fill=WINNER, anchor="ma")


def chart(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], title: str, marker: float):
    """A sketch of what Calibrate reports: how well the cached drafts keep the full ranking (falling) and how much
    the cache saves (rising) as tau grows, with the recommended tau marked. A sketch, so no numbers on the axes."""
    x0, y0, x1, y1 = box
    draw.rectangle(box, fill=PANEL)
    caption(draw, (x0 + 8, y0 + 6), title, fill=TEXT, size=15)
    left, top, right, bottom = x0 + 14, y0 + 30, x1 - 10, y1 - 24
    draw.line((left, bottom, right, bottom), fill=MUTED, width=2)
    draw.line((left, top, left, bottom), fill=MUTED, width=2)
    points = 24
    kept = [(left + (right - left) * i / points, top + 6 + (bottom - top - 12) * (i / points) ** 2.2)
            for i in range(points + 1)]
    saved = [(left + (right - left) * i / points, bottom - 6 - (bottom - top - 20) * (1 - (1 - i / points) ** 2))
             for i in range(points + 1)]
    draw.line(kept, fill=(110, 170, 250), width=3)
    draw.line(saved, fill=(250, 190, 70), width=3)
    x = left + (right - left) * marker
    draw.line((x, top, x, bottom), fill=WINNER, width=3)
    caption(draw, (right, bottom + 4), "tau", size=14, anchor="ra")
    caption(draw, (x, bottom + 4), "pick", fill=WINNER, size=14, anchor="ma")


def chart_legend(draw, xy):
    x, y = xy
    draw.line((x, y + 8, x + 18, y + 8), fill=(110, 170, 250), width=3)
    caption(draw, (x + 24, y), "ranking kept", size=15)
    draw.line((x + 130, y + 8, x + 148, y + 8), fill=(250, 190, 70), width=3)
    caption(draw, (x + 154, y), "compute saved", size=15)


def draw_picture(canvas: Image.Image, picture: str, drafts, family_drafts):
    draw = ImageDraw.Draw(canvas)
    if picture == "search":
        search_picture(canvas, drafts)
    elif picture == "pruned":
        ranked = sorted(range(8), key=lambda index: drafts[index][1])
        search_picture(canvas, drafts, pruned=set(ranked[:4]), label="4 of 8 pruned")
    elif picture == "sixteen":
        search_picture(canvas, drafts, count=16, columns=8, size=20, gap=5, label="16 four-step drafts")
    elif picture == "wide":
        ranked = sorted(range(16), key=lambda index: drafts[index][1])
        search_picture(canvas, drafts, count=16, columns=8, size=20, gap=5, pruned=set(ranked[:12]),
                       label="16 drafts, 12 pruned early")
    elif picture == "upscale":
        search_picture(canvas, drafts, winner_label="winner, 1080p")
    elif picture == "image_to_video":
        tile(canvas, start_image(), (16, 112, 44), outline=MUTED)
        caption(draw, (38, 170), "start", anchor="ma", size=15)
        search_picture(canvas, drafts, columns=4, size=30, gap=6, left=76, label="8 drafts")
    elif picture == "distributed":
        search_picture(canvas, drafts, label="8 drafts on 2 GPUs")
        draw.line((20 + 2 * 52 - 4, 78, 20 + 2 * 52 - 4, 212), fill=MUTED, width=2)
        caption(draw, (20 + 48, 90), "GPU 1", size=15, anchor="mb")
        caption(draw, (20 + 52 + 100, 90), "GPU 2", size=15, anchor="mb")
    elif picture == "calibrate":
        chart(draw, (20, 64, 380, 232), "drafts cached at each tau", marker=0.42)
        chart_legend(draw, (24, 236))
    elif picture == "calibrate_experts":
        chart(draw, (20, 64, 196, 232), "high-noise expert", marker=0.55)
        chart(draw, (204, 64, 380, 232), "low-noise expert", marker=0.38)
        chart_legend(draw, (24, 236))
    elif picture == "calibrate_family":
        for row, prompt in enumerate(FAMILY_PROMPTS):
            draft_grid(canvas, family_drafts[prompt][:8], (20, 70 + row * 32), 8, 24, 4)
        caption(draw, (20, 232), "prompts x seeds")
        chart(draw, (250, 64, 380, 232), "all prompts", marker=0.4)
    else:
        raise ValueError(f"picture {picture!r} is not one of the kinds draw_picture knows; add it there")


def wrapped(draw: ImageDraw.ImageDraw, text: str, size: int, width: int) -> list[str]:
    """`text` in lines no wider than `width` pixels at `size`."""
    for characters in range(len(text), 10, -1):
        lines = textwrap.wrap(text, characters)
        if all(draw.textlength(line, font=font(size)) <= width for line in lines):
            return lines
    return textwrap.wrap(text, 10)


def thumbnail(card: TemplateCard, drafts, family_drafts) -> Image.Image:
    """Top to bottom: a strip in the model family's colour ("start here" on its right for the main workflow), the
    picture, the model, the title and the purpose. Nothing but the strip lies in the top left, where frontend 1.58
    lays its "Node graph" badge over the picture."""
    canvas = Image.new("RGB", (SIZE, SIZE), BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    family = next(name for name in FAMILY_COLOURS if name in card.model or card.model.startswith("Any"))
    draw.rectangle((0, 0, SIZE, 30), fill=FAMILY_COLOURS[family])
    if card.start_here:
        draw.rounded_rectangle((SIZE - 112, 4, SIZE - 8, 26), radius=7, fill=WINNER)
        draw.text((SIZE - 60, 15), "start here", fill=(10, 30, 10), font=font(17), anchor="mm")
    # draw_picture lays its picture out between y = 60 and 256; it is moved up under the strip
    picture = Image.new("RGB", (SIZE, SIZE), BACKGROUND)
    draw_picture(picture, card.picture, drafts, family_drafts)
    canvas.paste(picture.crop((0, 60, SIZE, 256)), (0, 36))
    model_width = draw.textlength(card.model, font=font(20))
    draw.rounded_rectangle((12, 236, 12 + model_width + 16, 263), radius=7, fill=FAMILY_COLOURS[family])
    draw.text((20, 249), card.model, fill=TEXT, font=font(20), anchor="lm")
    draw.text((14, 270), card.title, fill=TEXT, font=font(36), stroke_width=1, stroke_fill=TEXT)
    for index, line in enumerate(wrapped(draw, card.purpose, 22, SIZE - 28)[:2]):
        draw.text((14, 318 + 27 * index), line, fill=MUTED, font=font(22))
    return canvas


def jpeg_bytes(image: Image.Image, card: TemplateCard) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=JPEG_QUALITY, optimize=True, comment=card.comment())
    return buffer.getvalue()


def main() -> None:
    shipped = sorted(path.stem for path in WORKFLOWS.glob("*.json"))
    missing = sorted(set(shipped) - set(TEMPLATE_CARDS))
    if missing:
        sys.exit(f"no template card for {missing}: add each to TEMPLATE_CARDS in {pathlib.Path(__file__).name}")
    drafts = sample_drafts({prompt: SEEDS if prompt == PROMPT else 8 for prompt in FAMILY_PROMPTS})
    for name in shipped:
        data = jpeg_bytes(thumbnail(TEMPLATE_CARDS[name], drafts[PROMPT], drafts), TEMPLATE_CARDS[name])
        if len(data) > MAX_BYTES:
            sys.exit(f"{name}.jpg would be {len(data)} bytes, over {MAX_BYTES}: lower JPEG_QUALITY")
        (WORKFLOWS / f"{name}.jpg").write_bytes(data)
        print(f"workflows/{name}.jpg  {len(data) // 1000} KB")


if __name__ == "__main__":
    main()
