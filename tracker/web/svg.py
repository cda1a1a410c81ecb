"""Geometry for the server-drawn SVG (the templates' macros draw it): no JavaScript, no CDN."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracker.records import natural_order
from tracker.words import seconds

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
    "unconfirmed": "#8c959f",
    "running": "#0969da",
    "skipped": "#afb8c1",
    "xfailed": "#afb8c1",
    "xpassed": "#57ab5a",
    "not_run": "#d0d7de",
}


# what each outcome looks like without colour: the grid's cells and the strips carry it
SYMBOLS = {
    "passed": "✓",
    "flaky": "≈",
    "failed": "✗",
    "error": "E",
    "crashed": "C",
    "timeout": "T",
    "interrupted": "–",
    "unconfirmed": "?",
    "skipped": "s",
    "xfailed": "x",
    "xpassed": "X",
    "not_run": "·",
}


CHAR = 6  # px: about a character of the charts' 10 px labels


def nice_top(value: float, unit: float = 1.0) -> float:
    """The axis top people read at a glance: 1, 2, 4, 5 or 10 times a power of ten (in
    `unit`s: 60 gives whole minutes) at or above `value`; its half is as round."""
    if value <= 0:
        return unit
    v = value / unit
    k = 10 ** math.floor(math.log10(v))
    return unit * k * next(m for m in (1, 2, 4, 5, 10) if m * k >= v * (1 - 1e-9))


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


def one_a_day(starts: Sequence[datetime]) -> bool:
    """Whether no two runs share a day: a chart's runs are then labelled by day."""
    return len({at.date() for at in starts}) == len(starts)


def run_labels(runs: Sequence[tuple[int, datetime]]) -> list[str]:
    """Each run's label on a chart's x axis: its day, or its number where runs share a day (11
    runs of one day, each labelled "12-02", read as one night drawn 11 times)."""
    if one_a_day([at for _, at in runs]):
        return [f"{at:%m-%d}" for _, at in runs]
    return [f"run {run_id}" for run_id, _ in runs]


def line_chart(
    points: list[tuple[str, float | None]],
    width: int = 640,
    height: int = 140,
    y_max: float | None = None,
    y_format: Callable[[float], str] = "{:.0f}".format,
    unit: float = 1.0,
) -> dict[str, Any]:
    """A polyline over labelled points (None leaves a gap); y from 0 to y_max, else to a round
    top (`nice_top` in `unit`s). The first x label starts at its point and the last ends there,
    so neither is cut at the edge."""
    pad_l, pad_r, pad_t, pad_b = 64, 24, 10, 22
    values = [v for _, v in points if v is not None]
    top = y_max if y_max is not None else nice_top(max(values, default=0.0), unit)
    n = len(points)
    inner_w, inner_h = width - pad_l - pad_r, height - pad_t - pad_b
    step = inner_w / max(1, n - 1)
    at = [
        None
        if v is None
        else (
            round(pad_l + i * step if n > 1 else pad_l + inner_w / 2, 1),
            round(pad_t + inner_h * (1 - min(v, top) / top), 1),
        )
        for i, (_, v) in enumerate(points)
    ]
    dots = [
        {"x": xy[0], "y": xy[1], "title": f"{label}: {y_format(v)}"}
        for (label, v), xy in zip(points, at, strict=True)
        if xy is not None and v is not None
    ]
    shown = [i for i in range(n) if n <= 8 or i % max(1, n // 6) == 0 or i == n - 1]
    # the last label ends at its point: the one before needs its whole width and half its own
    gap = 1.5 * max((len(label) for label, _ in points), default=0) * CHAR + 4
    if len(shown) > 2 and (shown[-1] - shown[-2]) * step < gap:
        shown.pop(-2)  # the last label would run into the one before
    labels = [
        {
            "x": round(pad_l + i * step if n > 1 else pad_l + inner_w / 2, 1),
            "text": points[i][0],
            "anchor": "end" if i == n - 1 and n > 1 else "start" if i == 0 and n > 1 else "middle",
        }
        for i in shown
    ]
    return {
        "width": width,
        "height": height,
        "polylines": _polylines(at),
        "dots": dots,
        "labels": labels,
        "y_top": y_format(top),
        "y_mid": y_format(top / 2),
        "pad_l": pad_l,
        "pad_t": pad_t,
        "base_y": height - pad_b,
        "mid_y": pad_t + inner_h / 2,
    }


def timeline(
    attempts: list[dict[str, Any]], marked: set[int], width: int = 760, row: int = 16
) -> dict[str, Any] | None:
    """Each slot's work over the run, one row per slot: its busy time as merged grey bars, and
    the `marked` attempts (by id(), the run's longest) over them in their outcome's colour,
    linked, with a title. Merging keeps the drawing small for a run of 100,000 tests.
    Each attempt: worker, offset (s from the run's start), duration, outcome, rerun, ids."""
    if not attempts:
        return None
    pad_l, pad_r, axis = 64, 28, 16
    end = max(a["offset"] + a["duration"] for a in attempts) or 1.0
    scale = (width - pad_l - pad_r) / end
    slots: dict[str, dict[str, Any]] = {}
    for a in attempts:
        slot = slots.setdefault(
            a["worker"] or "main", {"busy": [], "marks": [], "work": 0.0, "reruns": True}
        )
        slot["work"] += a["duration"]
        slot["reruns"] = slot["reruns"] and bool(a["rerun"])
        x0, x1 = pad_l + a["offset"] * scale, pad_l + (a["offset"] + a["duration"]) * scale
        bars = slot["busy"]
        if bars and x0 - bars[-1][1] < 1.0:  # touching at this scale: one bar
            bars[-1][1] = max(bars[-1][1], x1)
        else:
            bars.append([x0, x1])
        if id(a) in marked:
            title = (
                f"{a['nodeid']}: {a['outcome']}, {seconds(a['duration'])} "
                f"from {seconds(a['offset'])}"
            )
            slot["marks"].append(
                {
                    "x": round(x0, 1),
                    "w": round(max(1.0, x1 - x0), 1),
                    "color": color(a["outcome"]),
                    "title": title + (" (rerun)" if a["rerun"] else ""),
                    "href": f"/tests/{a['test_id']}",
                }
            )
    rows = [
        {
            "name": name,
            "y": i * row,
            "busy": [(round(x0, 1), round(max(0.5, x1 - x0), 1)) for x0, x1 in slot["busy"]],
            "marks": slot["marks"],
            "idle": 1 - min(1.0, slot["work"] / end),
            "reruns": slot["reruns"],  # only reruns: the process beside the tests, idle by design
        }
        for i, (name, slot) in enumerate(sorted(slots.items(), key=lambda kv: natural_order(kv[0])))
    ]
    ticks = [
        {"x": round(pad_l + f * end * scale, 1), "text": f"{f * end:.0f} s"} for f in (0, 0.5, 1)
    ]
    height = len(rows) * row + axis
    return {
        "width": width,
        "height": height,
        "rows": rows,
        "row": row,
        "pad_l": pad_l,
        "ticks": ticks,
        "axis_y": height - 4,
    }


def sparkline(values: list[float | None], width: int = 120, height: int = 24) -> dict[str, Any]:
    """A kernel's pass rate over the window, in a table cell: 0 to 1, no axes (the cell beside
    it says the number)."""
    n = len(values)
    step = (width - 4) / max(1, n - 1)
    at = [
        None
        if v is None
        else (round(2 + i * step if n > 1 else width / 2, 1), round(2 + (height - 4) * (1 - v), 1))
        for i, v in enumerate(values)
    ]
    return {"width": width, "height": height, "polylines": _polylines(at)}


def _polylines(at: list[tuple[float, float] | None]) -> list[str]:
    """SVG polyline points through `at`, in order; a None leaves a gap."""
    lines: list[list[str]] = [[]]
    for xy in at:
        if xy is None:
            lines.append([])
        else:
            lines[-1].append(f"{xy[0]},{xy[1]}")
    return [" ".join(line) for line in lines if line]
