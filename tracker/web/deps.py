"""Dependencies shared by the routers: settings, a database session per request, templates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from pydantic import BaseModel
from sqlmodel import Session

from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.db import PACKAGE_DIR, get_engine
from tracker.validate import MAX_ID
from tracker.web import svg
from tracker.words import (
    moment,
    percent,
    plural,
    seconds,
    short_commit,
    spoken,
    trace_from_error,
)


def templates_dir() -> Path:
    """A wheel ships them as tracker/_templates; a checkout has them at the top."""
    bundled = PACKAGE_DIR / "_templates"
    return bundled if bundled.is_dir() else PACKAGE_DIR.parent / "templates"


def path_segment(value: object) -> str:
    """A name as one URL path segment: `/` and `?` cannot leave it, and `..` cannot climb."""
    text = quote(str(value), safe="")
    return text.replace(".", "%2E") if text in (".", "..") else text


def word_breaks(text: str) -> Markup:
    """A name that may break after its underscores, and only there: `fused_linear_<wbr>...`."""
    return Markup(str(escape(text)).replace("_", "_<wbr>"))


templates = Jinja2Templates(directory=str(templates_dir()))
templates.env.filters.update(
    seg=path_segment,
    seconds=seconds,
    moment=moment,
    short_commit=short_commit,
    trace=trace_from_error,
    wbr=word_breaks,
    percent=percent,
    spoken=spoken,
)
templates.env.globals.update(plural=plural, svg=svg)  # svg: the macros draw with it


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    with Session(get_engine(request.app.state.settings.database_url)) as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]
# ids are 64-bit integers in the database: a larger one is a 422, not a database error
RowId = Annotated[int, PathParam(ge=1, le=MAX_ID)]  # 32-bit columns on PostgreSQL


class Problem(BaseModel):
    """What an error answer holds: FastAPI's `{"detail": ...}`."""

    detail: Any


NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "no such run, test, suite or runner"}
}


SuiteName = Annotated[str, PathParam(min_length=1, max_length=100)]
RunnerQ = Annotated[str | None, Query(max_length=200, description="one runner; default: all")]


def get_scope(
    suite: SuiteName,
    session: SessionDep,
    settings: SettingsDep,
    runner: RunnerQ = None,
    days: Annotated[int | None, Query(ge=1, le=365, description="the window in days")] = None,
) -> Scope:
    """The analysis of a suite (optionally one runner) over a window of days."""
    return Scope(session, settings, suite, runner, days)


ScopeDep = Annotated[Scope, Depends(get_scope)]
