"""How a page answers: one data dict, drawn by its template, or as JSON with `?format=json`.

Every page is its own API twin, in the way Datasette serves `.json` beside each page: the HTML
and the JSON are made from the same dict, so they cannot disagree. What only the eye needs (the
SVG geometry of a chart, the colours of a strip) is drawn beside the data, never in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import HTMLResponse, JSONResponse, Response

from tracker.analysis.kernels import ICONS
from tracker.web import svg
from tracker.web.deps import templates

FORMATS = ("html", "json")


def render(request: Request, name: str, **context: Any) -> HTMLResponse:
    params = dict(request.query_params)  # for links that keep the view: sort, filter, window
    return templates.TemplateResponse(
        request,
        name,
        {
            "svg": svg,
            "icons": ICONS,
            "params": params,
            "tz": request.app.state.settings.timezone,
            **context,
        },
    )


def plain(value: Any) -> Any:
    """The data as JSON values: an analysis object as its own `as_dict` (what the API gives)."""
    if hasattr(value, "as_dict"):
        return plain(value.as_dict())
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    return jsonable_encoder(value)


def page(
    request: Request, name: str, data: dict[str, Any], view: dict[str, Any] | None = None
) -> Response:
    """`data` as the page `name` (with `view`: what is drawn from it), or as JSON."""
    wanted = request.query_params.get("format", "html")
    if wanted not in FORMATS:
        raise HTTPException(400, f"format must be one of {', '.join(FORMATS)}, not {wanted[:40]!r}")
    if wanted == "json":
        return JSONResponse(plain(data))
    return render(request, name, **data, **(view or {}))
