"""`tracker`: the app and its commands (one module per area)."""

from tracker.cli import analysis, runs, web  # noqa: F401  (registers the commands)
from tracker.cli.app import app

__all__ = ["app"]
