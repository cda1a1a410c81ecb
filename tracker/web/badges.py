"""Badge routes: SVG with an ETag (README proxies revalidate) and shields.io endpoint JSON."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response

from tracker.analysis.report import Scope
from tracker.web.badge import Metric, cached, etag, svg
from tracker.web.deps import SessionDep, SettingsDep

router = APIRouter(prefix="/badge", tags=["badges"])


@router.get(
    "/{suite}.svg", response_class=Response, responses={200: {"content": {"image/svg+xml": {}}}}
)
def badge_svg(
    request: Request,
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    metric: Metric = Metric.status,
    runner: str | None = Query(None, max_length=200),
) -> Response:
    body = svg(cached(Scope(session, settings, suite, runner), metric))
    tag = etag(body)
    headers = {"Cache-Control": "no-cache", "ETag": tag}
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="image/svg+xml", headers=headers)


@router.get("/{suite}.json")
def badge_json(
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    metric: Metric = Metric.status,
    runner: str | None = Query(None, max_length=200),
) -> dict:
    """shields.io endpoint schema: schemaVersion, label, message, color, cacheSeconds."""
    return cached(Scope(session, settings, suite, runner), metric).shields()
