"""A failure cluster of a suite: every occurrence, with its run, test and message."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.web import tables
from tracker.web.deps import SessionDep, SettingsDep
from tracker.web.render import page

router = APIRouter(include_in_schema=False)


def data(
    session: Session, settings: Settings, suite: str, key: str, days: int | None, q: str | None
) -> dict[str, Any]:
    scope = Scope(session, settings, suite, days=days)
    cluster, found = scope.occurrences(key)
    return {
        "suite": suite,
        "days": scope.days,
        "cluster": cluster,
        "occurrences": tables.sort_filter(found, q, None, {}, lambda o: o.nodeid),
        "total": len(found),
    }


@router.get("/suites/{suite}/clusters/{key}")
def cluster_page(
    request: Request,
    suite: str,
    key: str,
    session: SessionDep,
    settings: SettingsDep,
    days: int | None = tables.DaysQ,
    q: str | None = tables.TextQ,
) -> Response:
    return page(request, "cluster.html", data(session, settings, suite, key, days, q))
