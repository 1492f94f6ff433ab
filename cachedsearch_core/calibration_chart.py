"""The chart of a calibration's table: capture and speed-up against the threshold, drawn with Pillow."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from .audit import ArmResult


CAPTURE_COLOUR = (40, 120, 200)
SPEED_COLOUR = (220, 110, 30)
TARGET_COLOUR = (90, 90, 90)
PICK_COLOUR = (200, 30, 30)
INK = (0, 0, 0)


@dataclasses.dataclass(frozen=True)
class _Frame:
    """The plot area and its scales: the threshold on x, capture on the left axis, speed-up on the right."""

    left: int
    right: int
    top: int
    bottom: int
    taus: tuple[float, ...]
    capture_range: tuple[float, float]
    speed_high: float

    @classmethod
    def of(cls, taus, captures, speedups, width: int, height: int) -> _Frame:
        finite_captures = [c for c in captures if math.isfinite(c)]
        return cls(64, width - 64, 72, height - 56, tuple(taus),
                   (min([0.0, *finite_captures]), max([1.0, *finite_captures])),
                   max(2.0, *[s for s in speedups if math.isfinite(s)]))

    def x(self, tau: float) -> float:
        if len(self.taus) == 1:
            return (self.left + self.right) / 2
        low, high = min(self.taus), max(self.taus)
        return self.left + (tau - low) / (high - low or 1.0) * (self.right - self.left)

    def y_capture(self, value: float) -> float:
        low, high = self.capture_range
        return self.bottom - (value - low) / (high - low) * (self.bottom - self.top)

    def y_speed(self, value: float) -> float:
        return self.bottom - (value - 1.0) / (self.speed_high - 1.0) * (self.bottom - self.top)


def _draw_axes(draw, frame: _Frame, font) -> None:
    """The box, a tick per threshold (a label too close to the previous one is left out; its tick stays) and the
    capture and speed-up ticks."""
    draw.rectangle([frame.left, frame.top, frame.right, frame.bottom], outline=INK)
    labelled_until = -math.inf
    for tau in frame.taus:
        x = frame.x(tau)
        draw.line([x, frame.bottom, x, frame.bottom + 5], fill=INK)
        text = f"{tau:g}"
        text_width = draw.textlength(text, font=font)
        if x - text_width / 2 > labelled_until + 6:
            draw.text((x - text_width / 2, frame.bottom + 7), text, fill=INK, font=font)
            labelled_until = x + text_width / 2
    for tick in (0.0, 0.5, 1.0):
        if frame.capture_range[0] <= tick <= frame.capture_range[1]:
            draw.text((frame.left - 8, frame.y_capture(tick)), f"{tick:.0%}", fill=CAPTURE_COLOUR, font=font,
                      anchor="rm")
    for tick in (1.0, frame.speed_high):
        draw.text((frame.right + 8, frame.y_speed(tick)), f"{tick:.1f}x", fill=SPEED_COLOUR, font=font, anchor="lm")


def _draw_target(draw, frame: _Frame, capture_target: float, font) -> None:
    """The capture target, dashed, and its label on a white patch."""
    target_y = frame.y_capture(capture_target)
    for start in range(frame.left, frame.right, 12):
        draw.line([start, target_y, min(start + 6, frame.right), target_y], fill=TARGET_COLOUR, width=2)
    target = f"target {capture_target:.0%}"
    box = draw.textbbox((frame.right - 6, target_y + 5), target, font=font, anchor="ra")
    draw.rectangle([box[0] - 3, box[1] - 2, box[2] + 3, box[3] + 2], fill="white")
    draw.text((frame.right - 6, target_y + 5), target, fill=TARGET_COLOUR, font=font, anchor="ra")


def _draw_curves(draw, frame: _Frame, captures, speedups, recommended: ArmResult | None) -> None:
    """Capture and speed-up per threshold (a value that is not finite left out), the pick circled."""
    for values, scale, colour in ((captures, frame.y_capture, CAPTURE_COLOUR),
                                  (speedups, frame.y_speed, SPEED_COLOUR)):
        points = [(frame.x(tau), scale(value)) for tau, value in zip(frame.taus, values) if math.isfinite(value)]
        if len(points) > 1:
            draw.line(points, fill=colour, width=3)
        for px, py in points:
            draw.ellipse([px - 4, py - 4, px + 4, py + 4], fill=colour)
    if recommended is not None and math.isfinite(recommended.fidelity.capture_of_means.value):
        px, py = frame.x(recommended.tau), frame.y_capture(recommended.fidelity.capture_of_means.value)
        draw.ellipse([px - 10, py - 10, px + 10, py + 10], outline=PICK_COLOUR, width=3)


def _draw_title_and_legend(draw, title: str, width: int, font) -> None:
    from PIL import ImageFont

    size = 26
    while size > 14 and draw.textlength(title, font=ImageFont.load_default(size=size)) > width - 16:
        size -= 2  # a long engine name and verdict still fit on one line
    draw.text((8, 6), title, fill=INK, font=ImageFont.load_default(size=size))
    legend_x = 8
    for text, colour in (("capture", CAPTURE_COLOUR), ("speed-up in calls", SPEED_COLOUR), ("the pick", PICK_COLOUR)):
        draw.line([legend_x, 50, legend_x + 18, 50], fill=colour, width=3)
        draw.text((legend_x + 24, 50), text, fill=colour, font=font, anchor="lm")
        legend_x += 24 + draw.textlength(text, font=font) + 24


def capture_chart(results: Sequence[ArmResult], recommended: ArmResult | None, capture_target: float,
                  threshold_name: str, width: int = 640, height: int = 400, label: str = "") -> np.ndarray:
    """Capture and speed-up (transformer calls) against the threshold (``threshold_name``, e.g. "tau"), the capture
    target dashed, the pick (``recommended``) circled: an RGB image [height, width, 3] of uint8; ``label`` begins the
    title (e.g. "high-noise expert: "). Its text is large and its ticks few, so it reads on a Preview Image at 100 %
    zoom (the node shows it about half size)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=22)
    captures = [r.fidelity.capture_of_means.value for r in results]
    speedups = [r.call_speedup for r in results]
    frame = _Frame.of([r.tau for r in results], captures, speedups, width, height)
    _draw_axes(draw, frame, font)
    _draw_target(draw, frame, capture_target, font)
    _draw_curves(draw, frame, captures, speedups, recommended)
    title = label + (f"recommended {threshold_name} {recommended.tau:g}" if recommended is not None else
                     f"no {threshold_name} meets the target: cache off")
    _draw_title_and_legend(draw, title, width, font)
    draw.text(((frame.left + frame.right) / 2, height - 6), threshold_name, fill=INK, font=font, anchor="mb")
    return np.array(image, dtype=np.uint8)
