"""The pages one level down from a suite: a kernel (its tests, rates, flaky and failing tests,
its failure clusters) and a failure cluster (every occurrence, with run, test and message)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from tracker import queries
from tracker.analysis.report import Scope
from tracker.web import tables
from tracker.web.deps import SessionDep, SettingsDep
from tracker.web.pages import render

router = APIRouter(include_in_schema=False)

TEST_COLUMNS = {
    "test": lambda s: s.nodeid,
    "runs": lambda s: s.runs,
    "rate": lambda s: -1.0 if s.pass_rate is None else s.pass_rate,
    "verdict": lambda s: s.verdict,
}


@router.get("/suites/{suite}/kernels/{kernel}", response_class=HTMLResponse)
def kernel_page(
    request: Request,
    suite: str,
    kernel: str,
    session: SessionDep,
    settings: SettingsDep,
    days: int | None = tables.DaysQ,
    q: str | None = tables.TextQ,
    sort: str | None = tables.SortQ,
) -> HTMLResponse:
    scope = Scope(session, settings, suite, days=days)
    row = next((k for k in scope.kernels() if k.kernel == kernel), None)
    if row is None:
        raise queries.NotFound(f"no kernel {kernel!r} in {suite} in the last {scope.days} days")
    stats = [s for s in scope.stats().values() if s.kernel == kernel]
    names = {s.nodeid for s in stats}
    return render(
        request,
        "kernel.html",
        suite=suite,
        row=row,
        tests=tables.sort_filter(
            sorted(stats, key=lambda s: s.nodeid), q, sort, TEST_COLUMNS, lambda s: s.nodeid
        ),
        ids={s.nodeid: s.test_id for s in stats},
        clusters=[c for c in scope.clusters() if c.tests & names],
        days=scope.days,
    )


@router.get("/suites/{suite}/clusters/{key}", response_class=HTMLResponse)
def cluster_page(
    request: Request,
    suite: str,
    key: str,
    session: SessionDep,
    settings: SettingsDep,
    days: int | None = tables.DaysQ,
    q: str | None = tables.TextQ,
) -> HTMLResponse:
    scope = Scope(session, settings, suite, days=days)
    cluster, found = scope.occurrences(key)
    return render(
        request,
        "cluster.html",
        suite=suite,
        cluster=cluster,
        occurrences=tables.sort_filter(found, q, None, {}, lambda o: o.nodeid),
        total=len(found),
        days=scope.days,
    )
