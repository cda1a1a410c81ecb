"""A runner: its runs of every suite, the environments it ran in over time, and the days of the
window it ran nothing (a nightly runner that is down shows here first)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from tracker import queries
from tracker.analysis import history
from tracker.analysis.promotion import local_day
from tracker.analysis.trends import environments
from tracker.config import Settings
from tracker.web import tables
from tracker.web.deps import SessionDep, SettingsDep
from tracker.web.render import page
from tracker.words import plural

router = APIRouter(include_in_schema=False)


def _span(window: list[date], days: int) -> str:
    """The days the page judged, in words: a runner younger than the window was not judged on
    its 30 days (a runner of one day's runs read "a run every day of the last 30")."""
    if len(window) == days or not window:
        return f"in the last {days} days"
    return f"since its first run on {window[0]:%m-%d} ({plural(len(window), 'day')})"


def data(session: Session, settings: Settings, runner: str, days: int | None) -> dict[str, Any]:
    runner_id = history.runner_id(session, runner)
    days = days or 30
    runs = queries.list_runs(session, None, runner, 500)
    tz = ZoneInfo(settings.timezone)
    ran = {datetime.fromisoformat(r["started_at"]).astimezone(tz).date() for r in runs}
    today = local_day(datetime.now(UTC), tz)
    # a day before the runner's first run is no missed day: it did not exist yet
    window = [today - timedelta(days=i) for i in range(days - 1, -1, -1)]
    window = [d for d in window if ran and d >= min(ran)]
    return {
        "runner": runner,
        "days": days,
        "suites": sorted({s for s, r in queries.suite_runner_pairs(session) if r == runner}),
        "last_run": runs[0] if runs else None,
        "days_without_run": [d for d in window if d not in ran],
        "span": _span(window, days),
        "environments": environments(session, runner_id),
        "runs": runs[:100],
    }


@router.get("/runners/{runner}")
def runner_page(
    request: Request,
    runner: str,
    session: SessionDep,
    settings: SettingsDep,
    days: int | None = tables.DaysQ,
) -> Response:
    return page(request, "runner.html", data(session, settings, runner, days), table="runs")
