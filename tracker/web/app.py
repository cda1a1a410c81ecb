"""`create_app`: one FastAPI app for pages, API, badges and uploads, on the configured database."""

from __future__ import annotations

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
from starlette.exceptions import HTTPException

from tracker import __version__
from tracker.analysis.history import UnknownName
from tracker.config import Settings, load_settings
from tracker.db import get_engine
from tracker.queries import NotFound
from tracker.web import api, badges, detail, pages
from tracker.web.badge import unknown_badge
from tracker.web.deps import templates
from tracker.web.guard import WriteGuard
from tracker.web.head import HeadAsGet

STATIC = Path(__file__).parent / "static"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()
    get_engine(settings.database_url)  # migrate before the first request
    app = FastAPI(
        title="Kernel stability tracker", version=__version__, docs_url=None, redoc_url=None
    )
    app.state.settings = settings
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.include_router(pages.router)
    app.include_router(detail.router)
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
        if request.url.path.startswith(("/api/", "/badge/")) or exc.status_code < 400:
            return await http_exception_handler(request, exc)
        return error_page(request, exc.status_code, str(exc.detail))

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
