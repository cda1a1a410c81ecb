"""`tracker serve`: the dashboard, API and badges."""

from __future__ import annotations

from typing import Annotated

import typer

from tracker.cli.app import app, state


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8000,
) -> None:
    """Serve the dashboard, the JSON API (/api/v1, docs at /docs) and the badges."""
    import uvicorn

    from tracker.web.app import create_app

    uvicorn.run(create_app(state.settings()), host=host, port=port, log_level="info")
