"""A suite: its verdict, rates, day trend, kernels, flaky tests, clusters, runners and runs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlmodel import Session

from tracker import queries
from tracker.analysis.changes import compare_runners
from tracker.analysis.flaky import HISTORY_RUNS
from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.records import RUN_INFRA, RUN_RUNNING
from tracker.web import svg
from tracker.web.deps import SessionDep, SettingsDep
from tracker.web.render import page
from tracker.words import seconds

router = APIRouter(include_in_schema=False)


def data(session: Session, settings: Settings, suite: str, window: int | None) -> dict[str, Any]:
    scope = Scope(session, settings, suite, days=window)
    days = window or 30  # the trend: the chosen window, else a month
    recent = queries.list_runs(session, suite, None, 50)
    last = next((r for r in recent if r["status"] not in (RUN_RUNNING, RUN_INFRA)), None)
    runners = scope.runners()
    return {
        "suite": suite,
        "days": scope.days,
        "trend_days": days,
        "verdict": Scope(session, settings, suite).promotion(),  # the criterion's own window
        "rates": [scope.rates(d) for d in sorted({*settings.analysis.windows, days})],
        "daily": scope.daily(days),
        "kernels": scope.kernels(),
        "flaky": scope.flaky()[:10],
        "runners": runners,
        "comparison": compare_runners(session, settings, suite, runners, window),
        "history_runs": HISTORY_RUNS,
        "clusters": scope.clusters()[:10],
        "cascade_min": settings.analysis.cascade_min,
        "runs": recent,
        "slowest": queries.slowest(session, last["id"]) if last else [],
    }


@router.get("/suites/{suite}")
def suite_page(
    request: Request,
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    window: int | None = Query(None, alias="days", ge=1, le=365),
) -> Response:
    found = data(session, settings, suite, window)
    trend = [
        (d.day.strftime("%m-%d"), None if d.green_rate is None else 100 * d.green_rate)
        for d in found["daily"]
    ]
    durations = [
        (r["started_at"][5:16].replace("T", " "), r["duration"])
        for r in reversed(found["runs"][:30])
    ]
    return page(
        request,
        "suite.html",
        found,
        {
            "trend": svg.line_chart(trend, y_max=100, y_format="{:.0f}%".format),
            "duration_chart": svg.line_chart(durations, y_format=seconds),
        },
    )
