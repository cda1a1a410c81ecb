"""Kernel stability tracker: run a kernel test suite every night, keep every result, and
say which tests are flaky and whether the CI is ready to move upstream.

Exit codes: 0 success (a run that passed, or passed with flaky tests; promotion criterion met);
1 a run that failed, timed out or was interrupted; 2 a usage, configuration or input error
(nothing stored); 3 promotion criterion not met; 4 a run that could not test anything
(infra_error: device missing/busy/unhealthy, checkout or collection failed).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from tracker.config import ConfigError, Settings, load_settings
from tracker.db import migrate
from tracker.validate import escape_terminal

EXIT_FAILED, EXIT_USAGE, EXIT_NOT_MET, EXIT_INFRA = 1, 2, 3, 4

app = typer.Typer(
    help=__doc__,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_show_locals=False,
)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")


class SafeConsole(Console):
    """Test ids, messages and names come from the tested repository and from uploads: every
    piece of text is escaped on its way to the terminal, while Rich's own styling (kept apart
    from the text, in each segment's style) still applies."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None):
        for segment in super().render(renderable, options):
            if segment.control or not segment.text:
                yield segment
            else:
                yield Segment(escape_terminal(segment.text), segment.style)


out = SafeConsole(highlight=False, soft_wrap=True)  # ids and paths stay whole, never folded
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)


# a word to wrap at: a number with its unit ("145.6 s,"), else a run of anything but spaces
_WORD = re.compile(r"\d[\d.,]* (?:s|min|GB)\b[^ ]*|[^ ]+")


def prose(text: Text | str, indent: int = 0) -> None:
    """Sentences, wrapped at spaces to the terminal under an indent (soft-wrapped like the ids,
    an 80-column terminal folded a promotion note mid-word). A word longer than the line, a test
    id in a run's note, stays whole on a line of its own, as ids do everywhere, and a number
    keeps its unit: Rich's wrapping folded such ids mid-id and parted "145.6" from "s"."""
    text = Text(text) if isinstance(text, str) else text
    width = max(out.width - indent, 20)
    for part in text.split("\n", allow_blank=True):
        line: tuple[int, int] | None = None  # the span of `part` on the line so far
        for word in _WORD.finditer(part.plain):
            if line and word.end() - line[0] > width:
                out.print(Text(" " * indent) + part[line[0] : line[1]])
                line = None
            line = (line[0] if line else word.start(), word.end())
        out.print(Text(" " * indent) + (part[line[0] : line[1]] if line else Text()))


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
SuiteOpt = Annotated[
    str | None, typer.Option("--suite", help="Suite name (default: the only suite there is).")
]


class _State:
    config: Path | None = None
    _settings: Settings | None = None

    def settings(self) -> Settings:
        """The settings, loaded once; the database is migrated then, at the command's start
        (`db.migrate`), so that nothing later in the command changes its schema."""
        if self._settings is None:
            try:
                self._settings = load_settings(self.config)
            except ConfigError as exc:
                raise fail(str(exc)) from None
            migrate(self._settings.database_url)
        return self._settings


state = _State()


def suite_name(given: str | None) -> str:
    """`--suite`, or the only suite there is (configured or stored)."""
    if given:
        return given
    from tracker import queries
    from tracker.db import session_scope

    settings = state.settings()
    with session_scope(settings.database_url) as session:
        stored = {suite for suite, _ in queries.suite_runner_pairs(session)}
    known = sorted(stored | {s.name for s in settings.suites})
    if len(known) == 1:
        return known[0]
    raise fail(
        "--suite is needed: "
        + (f"the suites are {', '.join(known)}" if known else "no suite is configured or stored")
    )


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    err.print(Text(f"error: {message}", style="red"))
    return typer.Exit(code)


@app.callback()
def main(
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Config file (default: ./tracker.toml or $TRACKER_CONFIG)."),
    ] = None,
) -> None:
    state.config = config
    state._settings = None
