"""`create_app`: one FastAPI app for pages, API, badges and uploads, on the configured database."""

from __future__ import annotations

import errno
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exception_handlers import (
    http_exception_handler,
    request_validation_exception_handler,
)
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Route

from tracker import __version__
from tracker.analysis.history import UnknownName
from tracker.config import Settings, load_settings
from tracker.db import get_engine, migrate
from tracker.queries import NotFound
from tracker.web import api, badges, views
from tracker.web.badge import unknown_badge
from tracker.web.deps import templates
from tracker.web.guard import WriteGuard
from tracker.web.head import HeadAsGet

STATIC = Path(__file__).parent / "static"
STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO}
STORAGE_FAULTS = (
    "database or disk is full",
    "No space left on device",
    "disk I/O error",
    "readonly database",
    "Read-only file system",
    "database is locked",
    "Permission denied",
    "Disk quota exceeded",
)
log = logging.getLogger("tracker")


def allowed(routes: list[BaseRoute], path: str) -> set[str]:
    """The methods some route answers at `path`. Starlette's 405 names only the one route it
    tried, and FastAPI's included routers hide their siblings: GET and POST of one path are two
    routes."""
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, Route) and route.path_regex.fullmatch(path):
            methods |= route.methods or set()
        elif router := getattr(route, "original_router", None):  # included, without a prefix
            methods |= allowed(router.routes, path)
    return methods


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()
    migrate(settings.database_url)  # the one step that may change the schema: before any request
    # what each uploaded or pushed run changed is worked out here, one run at a time, after the
    # answer: eight uploads at once each analysing two windows on the request threads left page
    # views waiting past a minute on a loaded 2-core machine
    after_runs = ThreadPoolExecutor(max_workers=1, thread_name_prefix="alerts")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        after_runs.shutdown(wait=True)

    app = FastAPI(
        title="Kernel stability tracker",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.after_runs = after_runs
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    for router in views.routers:
        app.include_router(router)
    app.include_router(api.router)
    app.include_router(badges.router)
    app.add_middleware(WriteGuard, settings=settings)
    app.add_middleware(HeadAsGet)

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        # Swagger UI from our own static folder: runners often have no internet access
        return get_swagger_ui_html(
            openapi_url=app.openapi_url,
            title=f"{app.title} API",
            swagger_js_url="/static/vendor/swagger-ui-bundle-5.35.0.js",
            swagger_css_url="/static/vendor/swagger-ui-5.35.0.css",
            swagger_favicon_url="/static/favicon.svg",
        )

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        with get_engine(settings.database_url).connect() as conn:
            conn.execute(text("SELECT 1"))
        return {"status": "ok", "version": __version__}

    def error_page(request: Request, status: int, message: str) -> Response:
        title = {404: "Not found", 422: "Not a valid address"}.get(status, f"Error {status}")
        return templates.TemplateResponse(
            request,
            "error.html",
            {"title": title, "message": message, "tz": settings.timezone},
            status_code=status,
        )

    @app.exception_handler(NotFound)
    @app.exception_handler(UnknownName)
    def not_found(request: Request, exc: LookupError) -> Response:
        path = request.url.path
        if path.startswith("/badge/"):  # a README shows an image, never a broken one
            return unknown_badge(path, str(exc))
        if path.startswith("/api/"):
            return JSONResponse({"detail": str(exc)}, status_code=404)
        return error_page(request, 404, str(exc))

    # pages answer people with a page; the API keeps FastAPI's JSON
    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 405:
            methods = allowed(app.router.routes, request.url.path) | {"OPTIONS"}
            methods |= {"HEAD"} if "GET" in methods else set()  # HeadAsGet answers it
            headers = {"Allow": ", ".join(sorted(methods))}
            if request.method == "OPTIONS":
                return Response(status_code=204, headers=headers)
            exc = HTTPException(405, exc.detail, headers=headers)
        if request.url.path.startswith(("/api/", "/badge/")) or exc.status_code < 400:
            return await http_exception_handler(request, exc)
        return error_page(request, exc.status_code, str(exc.detail))

    @app.exception_handler(OperationalError)
    @app.exception_handler(OSError)
    def unavailable(request: Request, exc: Exception) -> Response:
        """A full disk, a read-only or locked database, a database server gone: the write was
        rolled back and nothing is stored, so say so with a 503 that a runner's outbox retries,
        never a bare 500."""
        if isinstance(exc, OSError) and exc.errno not in STORAGE_ERRNOS:
            raise exc
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0][:500]
        log.warning(
            "%s %s: 503, storage not available: %s", request.method, request.url.path, reason
        )
        # named by its kind only: a database server's own message can name its host and user
        known = next(
            (k for k in STORAGE_FAULTS if k.lower() in reason.lower()), "see the server log"
        )
        message = f"storage is not available ({known}); nothing was stored, try again later"
        if request.url.path.startswith(("/api/", "/badge/")):
            return JSONResponse({"detail": message}, status_code=503, headers={"Retry-After": "60"})
        return error_page(request, 503, message)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        path = request.url.path
        if path.startswith("/badge/") and path.endswith(".svg"):
            names = ", ".join(str(e["loc"][-1]) for e in exc.errors())
            return unknown_badge(path, str(exc.errors()), f"invalid {names}", 422)
        if path.startswith(("/api/", "/badge/")):
            return await request_validation_exception_handler(request, exc)
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in exc.errors()
        )
        return error_page(request, 422, where)

    return app
