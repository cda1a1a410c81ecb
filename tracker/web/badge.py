"""README badges: an SVG drawn here (no external service) and the shields.io endpoint JSON."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from xml.sax.saxutils import escape

from fastapi.responses import JSONResponse, Response

from tracker.analysis.report import Scope, cache
from tracker.queries import list_runs
from tracker.records import RUN_RUNNING
from tracker.schedule import overdue
from tracker.words import percent, plural, spoken


class Metric(StrEnum):
    """`runs`: green runs (what promotion counts); `pass-rate`: the test pass rate. Until this
    version `pass-rate` drew green runs under that name; `green-runs` is kept as another name
    for `runs`."""

    status = "status"
    runs = "runs"
    green_runs = "green-runs"
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


def unknown_badge(path: str, why: str, message: str = "unknown", status: int = 404) -> Response:
    """A grey badge that names the problem ("unknown", "invalid metric"), with its status, as
    shields draws one: a README still shows an image, never a broken one."""
    name = path.rsplit("/", 1)[-1]
    suite, _, kind = name.rpartition(".")
    badge = Badge(suite[:60] or "suite", message[:60], GREY)
    if kind == "json":
        return JSONResponse(badge.shields() | {"detail": why}, status_code=status)
    headers = {"Cache-Control": "no-cache"}
    return Response(svg(badge), status_code=status, media_type="image/svg+xml", headers=headers)


def etag(body: str) -> str:
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:20] + '"'


def cached(scope: Scope, metric: Metric) -> Badge:
    """The status badge says first when the runner has missed nights: that turns with the clock,
    not with the stored state the cache is keyed by, so it is read anew each time (one query)."""
    if metric == Metric.status:
        latest = list_runs(scope.session, scope.suite, scope.runner, 1)
        days = overdue(latest[0]["started_at"], scope.settings, scope.now) if latest else None
        if days:
            return Badge(scope.suite, f"no run for {plural(days, 'day')}", RED)
    return cache.get(
        scope, ("badge", metric), lambda: make(scope, scope.suite, scope.runner, metric)
    )


def make(scope: Scope, suite: str, runner: str | None, metric: Metric) -> Badge:
    if metric == Metric.status:
        runs = [r for r in list_runs(scope.session, suite, runner, 5) if r["status"] != RUN_RUNNING]
        if not runs:
            return Badge(suite, "no runs", GREY)
        status = runs[0]["status"]
        return Badge(suite, spoken(status), STATUS_COLORS.get(status, GREY))
    if metric in (Metric.runs, Metric.green_runs, Metric.pass_rate):
        return _rate_badge(scope, metric)
    verdict = scope.promotion()
    if verdict.met:
        return Badge("promotion", "criterion met", GREEN)
    green = f"{verdict.successes}/{verdict.total} runs green"
    return Badge("promotion", f"not met: {green}", RED)


def _rate_badge(scope: Scope, metric: Metric) -> Badge:
    days = scope.settings.promotion.window_days
    r = scope.rates(days)
    if metric == Metric.pass_rate:
        label, rate, detail = f"passed results {days}d", r.test_pass_rate, f"{r.ran:,} results"
    else:
        label, rate, detail = f"green runs {days}d", r.green_runs, f"{r.runs} runs"
    if rate is None:
        return Badge(label, "no runs", GREY)
    target = scope.settings.promotion.min_success_rate
    color = GREEN if rate >= target else (YELLOW if rate >= 0.8 else RED)
    return Badge(label, f"{percent(rate, 0)} of {detail}", color)  # 2,607 of 2,608: 99.96%
