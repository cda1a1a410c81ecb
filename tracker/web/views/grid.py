"""Tests by nights, as PyTorch HUD shows them: a row for each test that failed or flaked in the
window, grouped by kernel; a column for each run with its commit; each cell the test's outcome
in that run, linked to it. New failures, ones that come and go, and nights that broke many
kernels at once show at a glance."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tracker.analysis.report import Scope
from tracker.web import svg
from tracker.web.deps import ScopeDep
from tracker.web.render import page

router = APIRouter(include_in_schema=False)
MAX_RUNS, MAX_TESTS = 40, 300  # columns and rows shown; the rest is said, not drawn


def data(scope: Scope) -> dict[str, Any]:
    every = scope.nights()
    nights = every[-MAX_RUNS:]
    troubled = [s for s in scope.stats().values() if s.failures]
    troubled.sort(key=lambda s: (s.kernel, -s.failures, s.nodeid))
    shown = troubled[:MAX_TESTS]
    cells = scope.outcomes([s.test_id for s in shown], [n.run_id for n in nights])
    kernels: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in shown:
        row = cells.get(s.test_id, {})
        kernels[s.kernel].append(
            {
                "test_id": s.test_id,
                "nodeid": s.nodeid,
                "verdict": s.verdict,
                "failures": s.failures,
                "runs": s.runs,
                "outcomes": [row.get(n.run_id, (None, False))[0] for n in nights],
            }
        )
    return {
        "suite": scope.suite,
        "runner": scope.runner,
        "runners": scope.runners(),
        "days": scope.days,
        "runs": [
            {"id": n.run_id, "started_at": n.started_at, "commit": n.commit, "status": n.status}
            for n in nights
        ],
        "kernels": [
            {"kernel": k, "tests": rows}
            for k, rows in sorted(kernels.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        ],
        "tests_left_out": len(troubled) - len(shown),
        "runs_left_out": len(every) - len(nights),
    }


def rows(found: dict[str, Any]) -> list[dict[str, Any]]:
    """The grid as one line per test, a column per run (the CSV)."""
    out = []
    for k in found["kernels"]:
        for t in k["tests"]:
            line = {"kernel": k["kernel"], "nodeid": t["nodeid"], "verdict": t["verdict"]}
            for run, outcome in zip(found["runs"], t["outcomes"], strict=True):
                line[f"run {run['id']}"] = outcome or ""
            out.append(line)
    return out


@router.get("/suites/{suite}/grid")
def grid_page(request: Request, scope: ScopeDep) -> Response:
    found = data(scope)
    links = {
        t["test_id"]: [
            f"/runs/{run['id']}?q={quote(t['nodeid'][-200:], safe='')}" for run in found["runs"]
        ]
        for k in found["kernels"]
        for t in k["tests"]
    }
    labels = svg.run_labels([(run["id"], run["started_at"]) for run in found["runs"]])
    view = {"links": links, "labels": labels}
    return page(request, "grid.html", found, view, "grid", lambda: rows(found))
