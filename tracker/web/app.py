"""`create_app`: one FastAPI app for pages, API, badges and uploads, on the configured database."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import text

from tracker import __version__
from tracker.analysis.history import UnknownName
from tracker.config import Settings, load_settings
from tracker.db import get_engine
from tracker.queries import NotFound
from tracker.web import api, badges, pages
from tracker.web.deps import templates
from tracker.web.guard import WriteGuard

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
    app.include_router(api.router)
    app.include_router(badges.router)
    app.add_middleware(WriteGuard, settings=settings)

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

    @app.exception_handler(NotFound)
    @app.exception_handler(UnknownName)
    def not_found(request: Request, exc: LookupError):
        if request.url.path.startswith(("/api/", "/badge/")):
            return JSONResponse({"detail": str(exc)}, status_code=404)
        return templates.TemplateResponse(
            request, "error.html", {"message": str(exc)}, status_code=404
        )

    return app
