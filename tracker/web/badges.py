"""Badge routes: SVG with an ETag (README proxies revalidate) and shields.io endpoint JSON."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from tracker.analysis.report import Scope
from tracker.web.badge import Badge, Metric, cached, etag, svg
from tracker.web.deps import NOT_FOUND, SessionDep, SettingsDep

router = APIRouter(prefix="/badge", tags=["badges"])


def get_badge(
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    metric: Metric = Metric.status,
    runner: str | None = Query(None, max_length=200),
) -> Badge:
    return cached(Scope(session, settings, suite, runner), metric)


BadgeDep = Annotated[Badge, Depends(get_badge)]


@router.get(
    "/{suite}.svg",
    response_class=Response,
    responses={
        200: {"content": {"image/svg+xml": {}}},
        304: {"description": "unchanged since the ETag sent in If-None-Match"},
        404: {"content": {"image/svg+xml": {}}, "description": "no such suite: a grey badge"},
    },
)
def badge_svg(request: Request, badge: BadgeDep) -> Response:
    body = svg(badge)
    tag = etag(body)
    headers = {"Cache-Control": "no-cache", "ETag": tag}
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="image/svg+xml", headers=headers)


@router.get("/{suite}.json", responses=NOT_FOUND)
def badge_json(badge: BadgeDep) -> dict:
    """shields.io endpoint schema: schemaVersion, label, message, color, cacheSeconds."""
    return badge.shields()
