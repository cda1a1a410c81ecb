"""`tracker serve` (web, and by default the scheduler in the same process); `tracker scheduler`."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Annotated

import typer

from tracker.cli.app import app, fail, out, state


def _logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _can_listen(host: str, port: int) -> None:
    """A busy port is a usage error (exit 2), said in one line; uvicorn would exit 3, which
    means "promotion not met" here."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="0: a free port, named in the log.")
    ] = 8000,
    with_scheduler: Annotated[
        bool,
        typer.Option(
            "--scheduler/--no-scheduler", help="Run the nightly scheduler in this process too."
        ),
    ] = True,
    workers: Annotated[
        int,
        typer.Option("--workers", min=1, max=64, help="Web worker processes (best on PostgreSQL)."),
    ] = 1,
) -> None:
    """Serve the dashboard, the API and badges.

    The JSON API is under /api/v1, its docs at /docs. With --workers, the
    scheduler (if on) runs once, in the process that supervises the workers."""
    import uvicorn

    from tracker.recovery import keep_recovering
    from tracker.web.app import create_app

    _logging()
    settings = state.settings()
    _can_listen(host, port)
    stop = threading.Event()
    threading.Thread(target=keep_recovering, args=(settings, stop), daemon=True).start()
    scheduler = None
    if with_scheduler:
        from tracker.scheduler import build

        scheduler = build(settings)
        scheduler.resume()
    try:
        if workers == 1:
            uvicorn.run(create_app(settings), host=host, port=port, log_level="info")
        else:  # each worker builds its app from the same config: the file and TRACKER_* vars
            if state.config is not None:
                os.environ["TRACKER_CONFIG"] = str(state.config.resolve())
            uvicorn.run(
                "tracker.web.app:create_app",
                factory=True,
                workers=workers,
                host=host,
                port=port,
                log_level="info",
            )
    finally:
        stop.set()
        if scheduler is not None:
            scheduler.shutdown(wait=False)


@app.command()
def scheduler() -> None:
    """Run the nightly scheduler alone.

    No web server; until SIGTERM or Ctrl-C."""
    from tracker.scheduler import build, next_runs

    _logging()
    settings = state.settings()
    sched = build(settings)
    sched.resume()
    for suite, when in next_runs(settings).items():
        out.print(f"{suite}: next run {when.isoformat() if when else 'never'}")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    sched.shutdown(wait=False)
