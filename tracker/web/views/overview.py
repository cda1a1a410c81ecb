"""The overview: per suite and runner, the verdict, the last run, rates and failing kernels."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from tracker import push, queries
from tracker.analysis.kernels import KERNEL_FAILING
from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.records import status_text
from tracker.schedule import next_runs, overdue
from tracker.web import svg
from tracker.web.deps import SessionDep, SettingsDep
from tracker.web.render import page
from tracker.words import counts_text

router = APIRouter(include_in_schema=False)


def run_square(run: dict[str, Any]) -> dict[str, Any]:
    counts = counts_text(run["counts"])
    status = status_text(run["status"], run["quarantined_failures"])
    return {
        "status": run["status"],
        "href": f"/runs/{run['id']}",
        "title": f"run {run['id']} {status} {run['started_at'][:16]} {counts}",
    }


def data(session: Session, settings: Settings) -> dict[str, Any]:
    upcoming = next_runs(settings)
    now = datetime.now(UTC)
    cards = []
    for suite, runner in queries.suite_runner_pairs(session):
        scope = Scope(session, settings, suite, runner)
        runs = queries.list_runs(session, suite, runner, 30)
        verdict = scope.promotion()
        cards.append(
            {
                "suite": suite,
                "runner": runner,
                "last": runs[0] if runs else None,
                "overdue_days": overdue(runs[0]["started_at"], settings, now) if runs else None,
                "runs": runs,
                "verdict": verdict,
                "days_left": (verdict.earliest - verdict.today).days if verdict.earliest else None,
                "rates": [scope.rates(d) for d in settings.analysis.windows],
                "flaky": len(verdict.unquarantined_flaky),
                "failing_kernels": [
                    k.kernel for k in scope.kernels() if k.status == KERNEL_FAILING
                ],
                "next_run": upcoming.get(suite) if runner == settings.runner.name else None,
            }
        )
    # a runner host's own dashboard says when its runs are not reaching the central one
    unsent = push.waiting(session) if settings.push.url else []
    return {
        "cards": cards,
        "unsent": [o.run_id for o in unsent],
        "unsent_error": unsent[-1].last_error if unsent else None,
        "push_url": settings.push.url,
    }


@router.get("/")
def overview(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    found = data(session, settings)
    strips = [svg.strip([run_square(r) for r in reversed(c["runs"])]) for c in found["cards"]]
    return page(request, "overview.html", found, {"strips": strips})
