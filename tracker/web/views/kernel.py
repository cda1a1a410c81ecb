"""A kernel of a suite: its tests with rates and verdicts, and the failure clusters they share."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from tracker import queries
from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.web import tables
from tracker.web.deps import SessionDep, SettingsDep
from tracker.web.render import page

router = APIRouter(include_in_schema=False)

COLUMNS = {
    "test": lambda s: s.nodeid,
    "runs": lambda s: s.runs,
    "rate": lambda s: -1.0 if s.pass_rate is None else s.pass_rate,
    "verdict": lambda s: s.verdict,
}


def data(
    session: Session,
    settings: Settings,
    suite: str,
    kernel: str,
    days: int | None,
    q: str | None,
    sort: str | None,
) -> dict[str, Any]:
    scope = Scope(session, settings, suite, days=days)
    row = next((k for k in scope.kernels() if k.kernel == kernel), None)
    if row is None:
        raise queries.NotFound(f"no kernel {kernel!r} in {suite} in the last {scope.days} days")
    stats = [s for s in scope.stats().values() if s.kernel == kernel]
    stats.sort(key=lambda s: s.nodeid)
    names = {s.nodeid for s in stats}
    return {
        "suite": suite,
        "days": scope.days,
        "row": row,
        "tests": tables.sort_filter(stats, q, sort, COLUMNS, lambda s: s.nodeid),
        "ids": {s.nodeid: s.test_id for s in stats},
        "clusters": [c for c in scope.clusters() if c.tests & names],
        "recent": scope.recent([s.test_id for s in stats]),
    }


@router.get("/suites/{suite}/kernels/{kernel}")
def kernel_page(
    request: Request,
    suite: str,
    kernel: str,
    session: SessionDep,
    settings: SettingsDep,
    days: int | None = tables.DaysQ,
    q: str | None = tables.TextQ,
    sort: str | None = tables.SortQ,
) -> Response:
    found = data(session, settings, suite, kernel, days, q, sort)
    return page(request, "kernel.html", found, table="tests")
