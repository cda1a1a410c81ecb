"""The large tables sort and filter through query parameters, so they work without JavaScript
(and a link keeps the view): `?q=` keeps the rows whose test id holds the text, `?sort=` orders
by a column, `-` in front for descending; `?days=` picks the window."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Query

TextQ = Query(None, max_length=200, description="keep the rows whose test id holds this text")
SortQ = Query(None, max_length=40, pattern=r"^-?[a-z_]+$", description="column; '-' descends")
DaysQ = Query(None, ge=1, le=365, description="the window in days")


def sort_filter(
    rows: list[Any],
    text: str | None,
    sort: str | None,
    columns: dict[str, Callable[[Any], Any]],
    nodeid: Callable[[Any], str],
) -> list[Any]:
    """Rows holding `text` in their test id, ordered by `sort` (unknown: as they came)."""
    if text:
        rows = [r for r in rows if text.lower() in nodeid(r).lower()]
    key = columns.get((sort or "").lstrip("-"))
    if key is not None:
        rows = sorted(rows, key=key, reverse=(sort or "").startswith("-"))
    return rows
