"""How a page answers: one data dict, drawn by its template, or as JSON with `?format=json`, or
its main table as CSV with `?format=csv` (streamed, with the page's own filters).

Every page is its own API twin, in the way Datasette serves `.json` beside each page: the HTML
and the JSON are made from the same dict, so they cannot disagree. What only the eye needs (the
SVG geometry of a chart, the colours of a strip) is drawn beside the data, never in it."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from fastapi import HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from tracker.analysis.kernels import ICONS
from tracker.web.deps import templates

FORMATS = ("html", "json", "csv")


def render(request: Request, name: str, **context: Any) -> HTMLResponse:
    params = dict(request.query_params)  # for links that keep the view: sort, filter, window
    return templates.TemplateResponse(
        request,
        name,
        {
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
    request: Request,
    name: str,
    data: dict[str, Any],
    view: dict[str, Any] | None = None,
    table: str | None = None,
    rows: Callable[[], Iterable[Any]] | None = None,
) -> Response:
    """`data` as the page `name` (with `view`: what is drawn from it), or as JSON, or its table
    `table` as CSV: `rows` when the page shows a part of it (a run's results, 200 at a time)."""
    wanted = request.query_params.get("format", "html")
    if wanted not in FORMATS or (wanted == "csv" and table is None):
        can = ", ".join(f for f in FORMATS if f != "csv" or table)
        raise HTTPException(400, f"format must be one of {can}, not {wanted[:40]!r}")
    if wanted == "json":
        return JSONResponse(plain(data))
    if wanted == "csv":
        found = rows() if rows else data[table or ""]
        filename = f"{name.removesuffix('.html')}-{table}.csv"
        return StreamingResponse(
            _csv(found),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )
    return render(request, name, **data, **(view or {}))


def _csv(rows: Iterable[Any]) -> Iterator[str]:
    """One line per row, the columns of the first row; a nested value as its JSON. A cell that
    a spreadsheet would run as a formula (=, +, -, @ first) is quoted with a leading '."""
    buffer, writer, columns = io.StringIO(), None, []
    for row in rows:
        flat = plain(row)
        if writer is None:
            columns = list(flat)
            writer = csv.writer(buffer)
            writer.writerow(columns)
        writer.writerow([_cell(flat.get(c)) for c in columns])
        if buffer.tell() > 64_000:
            yield buffer.getvalue()
            buffer.seek(0), buffer.truncate()
    yield buffer.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list):
        value = json.dumps(value, ensure_ascii=False)
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@"):
        return "'" + value
    return value
