"""A suite's flaky tests with their evidence, its broken ones, and the deselect lines that
isolate the quarantined ones."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from tracker import quarantine, queries
from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.web import tables
from tracker.web.deps import SessionDep, SettingsDep
from tracker.web.render import page

router = APIRouter(include_in_schema=False)

COLUMNS = {
    "test": lambda f: f.nodeid,
    "failed": lambda f: (f.failures, f.runs),
    "rate": lambda f: f.failure_interval[0],
    "flips": lambda f: f.flip_rate,
}


def data(
    session: Session,
    settings: Settings,
    suite: str,
    days: int | None,
    q: str | None,
    sort: str | None,
) -> dict[str, Any]:
    scope = Scope(session, settings, suite, days=days)
    everything = scope.flaky()
    flaky = tables.sort_filter(everything, q, sort, COLUMNS, lambda f: f.nodeid)
    broken = scope.broken()
    ids = [f.test_id for f in [*flaky, *broken]]
    return {
        "suite": suite,
        "days": scope.days,
        "q": q,
        "flaky": flaky,
        "in_window": len(everything),
        "runners": scope.runners(),
        "broken": broken,
        "deselect": "\n".join(quarantine.deselect_lines(quarantine.active(session, suite))),
        "recent": scope.recent([f.test_id for f in flaky]),
        "polluters": queries.investigations(session, ids),
        "bisected": queries.investigations(session, ids, "bisect"),
    }


@router.get("/suites/{suite}/flaky")
def flaky_page(
    request: Request,
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    days: int | None = tables.DaysQ,
    q: str | None = tables.TextQ,
    sort: str | None = tables.SortQ,
) -> Response:
    return page(request, "flaky.html", data(session, settings, suite, days, q, sort), table="flaky")
