"""`tracker`: the app and its commands (one module per area)."""

import sys

from sqlalchemy.exc import DBAPIError

from tracker.cli import analysis, report, runs, web  # noqa: F401  (registers the commands)
from tracker.cli.app import EXIT_USAGE, app, err

__all__ = ["app", "main"]


def main() -> None:
    """The `tracker` command: a database or a file that cannot be read or written (a read-only
    file or folder, a full disk) is said in one line with exit 2, not a 200-line traceback."""
    try:
        app()
    except DBAPIError as exc:
        reason = str(exc.orig).splitlines()[0] if exc.orig else type(exc).__name__
        err.print(f"error: the database cannot be used: {reason} (nothing was changed)")
        sys.exit(EXIT_USAGE)
    except OSError as exc:  # a folder that is a file, a full disk, a read-only file system
        err.print(f"error: {exc.strerror or exc}: {exc.filename or ''} (nothing was changed)")
        sys.exit(EXIT_USAGE)
