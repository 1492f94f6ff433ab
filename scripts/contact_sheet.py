"""The demo's contact sheet: one row of frames per draft (seed, score, skipped calls; the winner marked) and a
last row with the delivered full-compute video."""

from __future__ import annotations

import dataclasses

import numpy as np
from PIL import Image, ImageDraw, ImageFont

PADDING, LABEL_WIDTH, HEADER_HEIGHT = 8, 300, 56
BACKGROUND, WINNER_BACKGROUND, DELIVERED_BACKGROUND = (250, 250, 248), (214, 240, 214), (222, 230, 250)
TEXT, WINNER_TEXT = (20, 20, 20), (0, 110, 0)


@dataclasses.dataclass
class SheetRow:
    frames: list[np.ndarray]  # uint8 [H, W, 3], one per video frame
    lines: list[str]  # label text, first line in bold colour if highlighted
    kind: str = "draft"  # "draft", "winner" or "delivered"


def _font(size: int):
    return ImageFont.load_default(size=size)


def row_height(frame_height: int) -> int:
    return frame_height + 2 * PADDING


def sheet_size(rows: int, frames: int, frame_width: int, frame_height: int) -> tuple[int, int]:
    width = LABEL_WIDTH + frames * (frame_width + PADDING) + PADDING
    return width, HEADER_HEIGHT + rows * row_height(frame_height)


def contact_sheet(title: str, subtitle: str, rows: list[SheetRow]) -> Image.Image:
    frame_height, frame_width = rows[0].frames[0].shape[:2]
    frames = max(len(row.frames) for row in rows)
    sheet = Image.new("RGB", sheet_size(len(rows), frames, frame_width, frame_height), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    draw.text((PADDING, 8), title, fill=TEXT, font=_font(18))
    draw.text((PADDING, 32), subtitle, fill=TEXT, font=_font(13))
    for index, row in enumerate(rows):
        top = HEADER_HEIGHT + index * row_height(frame_height)
        fill = {"winner": WINNER_BACKGROUND, "delivered": DELIVERED_BACKGROUND}.get(row.kind, BACKGROUND)
        draw.rectangle((0, top, sheet.width, top + row_height(frame_height) - 1), fill=fill)
        draw.line((0, top, sheet.width, top), fill=(200, 200, 200))
        for line_index, line in enumerate(row.lines):
            colour = WINNER_TEXT if row.kind == "winner" and line_index == 0 else TEXT
            draw.text((PADDING, top + PADDING + 18 * line_index), line, fill=colour, font=_font(14))
        for frame_index, frame in enumerate(row.frames):
            sheet.paste(Image.fromarray(frame), (LABEL_WIDTH + frame_index * (frame_width + PADDING), top + PADDING))
    return sheet
