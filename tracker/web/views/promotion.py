"""The promotion criterion for a suite (or one runner): the verdict, its parts and per-runner
verdicts, the kernel table in the RFC's format, and the README badges."""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlmodel import Session

from tracker import queries
from tracker.analysis.kernels import markdown
from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.web.deps import SessionDep, SettingsDep, path_segment
from tracker.web.render import page

router = APIRouter(include_in_schema=False)


def data(
    session: Session, settings: Settings, suite: str, runner: str | None, base: str
) -> dict[str, Any]:
    scope = Scope(session, settings, suite, runner)
    verdict = scope.promotion()
    public = settings.public_url.rstrip("/") if settings.public_url else None
    link = f"{public}/suites/{path_segment(suite)}" if public else None
    return {
        "suite": suite,
        "runner": runner,
        "verdict": verdict,
        "per_runner": scope.runner_promotions(),
        "rates": scope.rates(verdict.window_days),
        "runs": Counter(verdict.counts),
        "kernels_md": markdown(scope.kernels(), scope.days, link),
        "badge_md": "\n".join(
            f"![{m}]({base}/badge/{path_segment(suite)}.svg?metric={m})"
            for m in ("status", "runs", "pass-rate", "promotion")
        ),
        "ids": queries.test_ids(session, suite, verdict.unquarantined_flaky),
    }


@router.get("/suites/{suite}/promotion")
def promotion_page(
    request: Request,
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    runner: str | None = Query(None, max_length=200),
) -> Response:
    base = (settings.public_url or str(request.base_url)).rstrip("/")
    return page(request, "promotion.html", data(session, settings, suite, runner, base))
