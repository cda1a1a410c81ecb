"""One search box across suites: a test, a kernel, a failure message or a commit, with filters
by suite, runner and date range."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from tracker import queries
from tracker.analysis.search import search
from tracker.web.deps import SessionDep, SettingsDep
from tracker.web.render import page

router = APIRouter(include_in_schema=False)


@router.get("/search")
def search_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    q: str = Query("", max_length=200),
    suite: str | None = Query(None, max_length=200),
    runner: str | None = Query(None, max_length=200),
    since: date | None = Query(None, description="first day (the configured time zone)"),
    until: date | None = Query(None, description="last day, included"),
    commit: str | None = Query(None, max_length=100, pattern=r"^[\w.:/-]*$"),
) -> Response:
    tz = ZoneInfo(settings.timezone)
    start = datetime.combine(since, time(), tz) if since else None
    end = datetime.combine(until + timedelta(days=1), time(), tz) if until else None
    text = q.strip()
    pairs = queries.suite_runner_pairs(session)
    found: dict[str, Any] = {
        "q": text,
        "suite": suite,
        "runner": runner,
        "since": since,
        "until": until,
        "commit": commit,
        "suites": sorted({s for s, _ in pairs}),
        "runners": sorted({r for _, r in pairs}),
        **(search(session, text, suite, runner, start, end, commit) if text else {}),
    }
    return page(request, "search.html", found, table="failures")
