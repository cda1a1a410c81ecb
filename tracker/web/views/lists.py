"""A suite's kernels and its failure clusters, each a whole list (the suite page shows the top)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tracker.analysis.report import Scope
from tracker.web.deps import ScopeDep
from tracker.web.render import page

router = APIRouter(include_in_schema=False)


@router.get("/suites/{suite}/kernels")
def kernels_page(request: Request, scope: ScopeDep) -> Response:
    found = {**_about(scope), "kernels": scope.kernels()}
    return page(request, "list.html", found, {"what": "kernels"}, "kernels")


@router.get("/suites/{suite}/clusters")
def clusters_page(request: Request, scope: ScopeDep) -> Response:
    cascade = scope.settings.analysis.cascade_min
    found = {**_about(scope), "clusters": scope.clusters(), "cascade_min": cascade}
    return page(request, "list.html", found, {"what": "clusters"}, "clusters")


def _about(scope: Scope) -> dict[str, Any]:
    return {
        "suite": scope.suite,
        "runner": scope.runner,
        "runners": scope.runners(),
        "days": scope.days,
    }
