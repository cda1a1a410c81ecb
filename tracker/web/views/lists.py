"""A suite's kernels and its failure clusters, each a whole list (the suite page shows the top)."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from tracker.analysis.report import Scope
from tracker.web import tables
from tracker.web.deps import SessionDep, SettingsDep
from tracker.web.render import page

router = APIRouter(include_in_schema=False)


@router.get("/suites/{suite}/kernels")
def kernels_page(
    request: Request,
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    runner: str | None = Query(None, max_length=200),
    days: int | None = tables.DaysQ,
) -> Response:
    scope = Scope(session, settings, suite, runner, days)
    found = {"suite": suite, "runner": runner, "days": scope.days, "kernels": scope.kernels()}
    return page(request, "kernels.html", found, table="kernels")


@router.get("/suites/{suite}/clusters")
def clusters_page(
    request: Request,
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    runner: str | None = Query(None, max_length=200),
    days: int | None = tables.DaysQ,
) -> Response:
    scope = Scope(session, settings, suite, runner, days)
    found = {
        "suite": suite,
        "runner": runner,
        "days": scope.days,
        "clusters": scope.clusters(),
        "cascade_min": settings.analysis.cascade_min,
    }
    return page(request, "clusters.html", found, table="clusters")
