"""Geometry for the server-drawn SVG (the templates' macros draw it): no JavaScript, no CDN."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COLORS = {
    "passed": "#2da44e",
    "flaky": "#d4a72c",
    "failed": "#cf222e",
    "error": "#a40e26",
    "crashed": "#6e0b1f",
    "timeout": "#bc4c00",
    "timed_out": "#bc4c00",
    "infra_error": "#6e7781",
    "interrupted": "#8c959f",
    "running": "#0969da",
    "skipped": "#afb8c1",
    "xfailed": "#afb8c1",
    "xpassed": "#57ab5a",
    "not_run": "#d0d7de",
}


def color(status: str | None) -> str:
    return COLORS.get(status or "", "#d0d7de")


@dataclass
class Square:
    x: int
    color: str
    href: str | None
    title: str


def strip(items: list[dict[str, Any]], size: int = 12, gap: int = 3) -> dict[str, Any]:
    """One square per run (or per result), oldest left: {status, href, title} each."""
    squares = [
        Square(i * (size + gap), color(it.get("status")), it.get("href"), it.get("title", ""))
        for i, it in enumerate(items)
    ]
    return {"squares": squares, "size": size, "width": max(1, len(items) * (size + gap) - gap)}


def line_chart(
    points: list[tuple[str, float | None]],
    width: int = 640,
    height: int = 140,
    y_max: float | None = None,
    y_format: str = "{:.0f}",
) -> dict[str, Any]:
    """A polyline over labelled points (None leaves a gap); y from 0 to y_max."""
    pad_l, pad_r, pad_t, pad_b = 64, 24, 10, 22
    values = [v for _, v in points if v is not None]
    top = y_max if y_max is not None else (max(values) if values else 1.0) or 1.0
    n = len(points)
    inner_w, inner_h = width - pad_l - pad_r, height - pad_t - pad_b
    step = inner_w / max(1, n - 1)
    segments: list[list[tuple[float, float]]] = [[]]
    dots = []
    for i, (label, v) in enumerate(points):
        if v is None:
            if segments[-1]:
                segments.append([])
            continue
        x = pad_l + i * step if n > 1 else pad_l + inner_w / 2
        y = pad_t + inner_h * (1 - min(v, top) / top)
        segments[-1].append((round(x, 1), round(y, 1)))
        dots.append({"x": round(x, 1), "y": round(y, 1), "title": f"{label}: {y_format.format(v)}"})
    labels = [
        {"x": round(pad_l + i * step, 1), "text": label}
        for i, (label, _) in enumerate(points)
        if n <= 8 or i % max(1, n // 6) == 0 or i == n - 1
    ]
    return {
        "width": width,
        "height": height,
        "polylines": [" ".join(f"{x},{y}" for x, y in seg) for seg in segments if seg],
        "dots": dots,
        "labels": labels,
        "y_top": y_format.format(top),
        "y_mid": y_format.format(top / 2),
        "pad_l": pad_l,
        "pad_t": pad_t,
        "base_y": height - pad_b,
        "mid_y": pad_t + inner_h / 2,
    }
