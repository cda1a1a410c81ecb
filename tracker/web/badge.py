"""README badges: an SVG drawn here (no external service) and the shields.io endpoint JSON."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from xml.sax.saxutils import escape

from tracker.analysis.report import Scope, cache
from tracker.queries import list_runs


class Metric(StrEnum):
    status = "status"
    pass_rate = "pass-rate"
    promotion = "promotion"


GREEN, YELLOW, ORANGE, RED, GREY = "#2da44e", "#d4a72c", "#fb8f44", "#cf222e", "#8c959f"
STATUS_COLORS = {
    "passed": GREEN,
    "flaky": YELLOW,
    "failed": RED,
    "timed_out": ORANGE,
    "infra_error": GREY,
    "interrupted": GREY,
    "running": "#0969da",
}


@dataclass
class Badge:
    label: str
    message: str
    color: str

    def shields(self) -> dict:
        return {
            "schemaVersion": 1,
            "label": self.label,
            "message": self.message,
            "color": self.color,
            "cacheSeconds": 300,
        }


def _width(text: str) -> int:
    # Verdana 11px averages ~6.5 px a character; wide letters get a little more
    return int(sum(7.5 if c in "mwMW%" else 4 if c in "il.:| " else 6.6 for c in text)) + 10


def svg(badge: Badge) -> str:
    lw, mw = _width(badge.label), _width(badge.message)
    label, message = escape(badge.label), escape(badge.message)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{lw + mw}" height="20" role="img" '
        f'aria-label="{label}: {message}"><title>{label}: {message}</title>'
        f'<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" '
        f'stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{lw + mw}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{lw}" height="20" fill="#555"/>'
        f'<rect x="{lw}" width="{mw}" height="20" fill="{badge.color}"/>'
        f'<rect width="{lw + mw}" height="20" fill="url(#s)"/></g>'
        f'<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" '
        f'font-size="11"><text x="{lw / 2}" y="14">{label}</text>'
        f'<text x="{lw + mw / 2}" y="14">{message}</text></g></svg>'
    )


def etag(body: str) -> str:
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:20] + '"'


def cached(scope: Scope, metric: Metric) -> Badge:
    return cache.get(
        scope, ("badge", metric), lambda: make(scope, scope.suite, scope.runner, metric)
    )


def make(scope: Scope, suite: str, runner: str | None, metric: Metric) -> Badge:
    if metric == Metric.status:
        runs = [r for r in list_runs(scope.session, suite, runner, 5) if r["status"] != "running"]
        if not runs:
            return Badge(suite, "no runs", GREY)
        status = runs[0]["status"]
        return Badge(suite, status.replace("_", " "), STATUS_COLORS.get(status, GREY))
    verdict = scope.promotion()
    if metric == Metric.pass_rate:
        if verdict.rate is None:
            return Badge(f"{suite} {verdict.window_days}d", "no runs", GREY)
        rate = verdict.rate
        col = (
            GREEN
            if rate >= scope.settings.promotion.min_success_rate
            else (YELLOW if rate >= 0.8 else RED)
        )
        return Badge(f"{suite} {verdict.window_days}d", f"{rate:.0%} of {verdict.total} runs", col)
    if verdict.met:
        return Badge("promotion", "criterion met", GREEN)
    when = f"earliest {verdict.earliest.isoformat()}" if verdict.earliest else "not met"
    return Badge("promotion", when, YELLOW if verdict.earliest else RED)
