"""The chart of a calibration's table: capture and speed-up against the threshold, drawn with Pillow."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .audit import ArmResult


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
    left, right, top, bottom = 64, width - 64, 72, height - 56
    taus = [r.tau for r in results]
    captures = [r.fidelity.capture_of_means.value for r in results]
    speedups = [r.call_speedup for r in results]
    tau_low, tau_high = min(taus), max(taus)
    span = tau_high - tau_low or 1.0
    finite_captures = [c for c in captures if math.isfinite(c)]
    capture_low = min([0.0, *finite_captures])
    capture_high = max([1.0, *finite_captures])
    speed_high = max(2.0, *[s for s in speedups if math.isfinite(s)])

    def x(tau):
        return left + (tau - tau_low) / span * (right - left) if len(taus) > 1 else (left + right) / 2

    def y_capture(value):
        return bottom - (value - capture_low) / (capture_high - capture_low) * (bottom - top)

    def y_speed(value):
        return bottom - (value - 1.0) / (speed_high - 1.0) * (bottom - top)

    capture_colour, speed_colour, target_colour = (40, 120, 200), (220, 110, 30), (90, 90, 90)
    draw.rectangle([left, top, right, bottom], outline=(0, 0, 0))
    labelled_until = -math.inf  # a tau label too close to the previous one is left out (its tick stays)
    for tau in taus:
        draw.line([x(tau), bottom, x(tau), bottom + 5], fill=(0, 0, 0))
        text = f"{tau:g}"
        text_width = draw.textlength(text, font=font)
        if x(tau) - text_width / 2 > labelled_until + 6:
            draw.text((x(tau) - text_width / 2, bottom + 7), text, fill=(0, 0, 0), font=font)
            labelled_until = x(tau) + text_width / 2
    for tick in (0.0, 0.5, 1.0):
        if capture_low <= tick <= capture_high:
            draw.text((left - 8, y_capture(tick)), f"{tick:.0%}", fill=capture_colour, font=font, anchor="rm")
    for tick in (1.0, speed_high):
        draw.text((right + 8, y_speed(tick)), f"{tick:.1f}x", fill=speed_colour, font=font, anchor="lm")
    target_y = y_capture(capture_target)
    for start in range(left, right, 12):
        draw.line([start, target_y, min(start + 6, right), target_y], fill=target_colour, width=2)
    target = f"target {capture_target:.0%}"
    box = draw.textbbox((right - 6, target_y + 5), target, font=font, anchor="ra")
    draw.rectangle([box[0] - 3, box[1] - 2, box[2] + 3, box[3] + 2], fill="white")
    draw.text((right - 6, target_y + 5), target, fill=target_colour, font=font, anchor="ra")
    for values, scale, colour in ((captures, y_capture, capture_colour), (speedups, y_speed, speed_colour)):
        points = [(x(tau), scale(value)) for tau, value in zip(taus, values) if math.isfinite(value)]
        if len(points) > 1:
            draw.line(points, fill=colour, width=3)
        for px, py in points:
            draw.ellipse([px - 4, py - 4, px + 4, py + 4], fill=colour)
    picked = recommended
    if picked is not None and math.isfinite(picked.fidelity.capture_of_means.value):
        px, py = x(picked.tau), y_capture(picked.fidelity.capture_of_means.value)
        draw.ellipse([px - 10, py - 10, px + 10, py + 10], outline=(200, 30, 30), width=3)
    name = threshold_name
    title = label + (f"recommended {name} {picked.tau:g}" if picked is not None else
                     f"no {name} meets the target: cache off")
    size = 26
    while size > 14 and draw.textlength(title, font=ImageFont.load_default(size=size)) > width - 16:
        size -= 2  # a long engine name and verdict still fit on one line
    draw.text((8, 6), title, fill=(0, 0, 0), font=ImageFont.load_default(size=size))
    legend_x = 8
    for text, colour in (("capture", capture_colour), ("speed-up in calls", speed_colour),
                         ("the pick", (200, 30, 30))):
        draw.line([legend_x, 50, legend_x + 18, 50], fill=colour, width=3)
        draw.text((legend_x + 24, 50), text, fill=colour, font=font, anchor="lm")
        legend_x += 24 + draw.textlength(text, font=font) + 24
    draw.text(((left + right) / 2, height - 6), name, fill=(0, 0, 0), font=font, anchor="mb")
    return np.array(image, dtype=np.uint8)
