"""One gate for every record that enters the store from outside (an ingested file, an upload):
names, ids, numbers and dates are checked or made safe here, once, so that nothing downstream (SQL,
pages, the terminal, a shell a maintainer pastes into) meets a NaN, a year 9999 or a control
character. A record that fails is refused whole, with the reason.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

from tracker.records import ATTEMPT_OUTCOMES, RunRecord, bound_nodeid

MAX_ID = 2**31 - 1  # ids, processes and positions: 32-bit columns on PostgreSQL
MAX_RESULTS = 100_000  # test results in one file; Liger's suite has 2,608
MAX_SECONDS = 366 * 24 * 3600.0  # no test or run lasts longer than a year
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)  # clocks and time zones disagree; a year 9999 is no clock

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
NAME_RULE = "1-100 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
# C0 and C1 controls, and the bidirectional overrides that make text display in another order
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class InvalidRecord(ValueError):
    """What is wrong with a record, in words for the person who sent it."""


def check_name(value: str, what: str) -> str:
    """Suite and runner names appear in URLs, paths and commands: a safe character set."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise InvalidRecord(f"{what} name {value!r:.120} is not valid: use {NAME_RULE}")
    return value


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or (
        f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
    )


def escape_controls(text: str) -> str:
    """Control characters as visible escapes, the way pytest writes them in its own ids."""
    return _UNSAFE.sub(_escape, text)


_TERMINAL_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escape_terminal(text: str) -> str:
    """Text for a terminal: lines and tabs stay; escapes that clear the screen, retitle the
    window or write the clipboard (OSC 52) show as text."""
    return _TERMINAL_UNSAFE.sub(_escape, text)


def clean_text(text: str | None) -> str | None:
    """Failure text keeps its lines and tabs; NUL (no database column should hold it), ESC and
    the bidi overrides that reorder what a page shows become visible escapes."""
    return escape_terminal(text) if text else text


def check_seconds(value: float, what: str) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_SECONDS
    ):
        raise InvalidRecord(f"{what}: {value!r:.40} is not a duration in seconds (0 to a year)")
    return float(value)


def check_time(value: datetime, what: str, now: datetime | None = None) -> datetime:
    if value.tzinfo is None:
        raise InvalidRecord(f"{what}: {value.isoformat()} has no time zone offset")
    latest = (now or datetime.now(UTC)) + FUTURE_SLACK
    # compared without converting: 0001-01-01+05:00 has no UTC equivalent to convert to
    if not EARLIEST <= value <= latest:
        raise InvalidRecord(
            f"{what}: {value.isoformat()} is outside {EARLIEST.year} to a day from now"
        )
    return value


def check_record(record: RunRecord) -> None:
    """Refuse (InvalidRecord) or make safe, in place, a record from outside."""
    check_name(record.suite, "suite")
    check_name(record.runner, "runner")
    for label, value, limit in (("commit", record.commit, 100), ("ref", record.ref, 200)):
        if value is not None and (len(value) > limit or _UNSAFE.search(value)):
            raise InvalidRecord(f"{label} must be up to {limit} printable characters")
    check_time(record.started_at, "the run's start")
    if record.finished_at is not None and record.finished_at < record.started_at:
        raise InvalidRecord(
            f"the run's end {record.finished_at.isoformat()} is before its start "
            f"{record.started_at.isoformat()}"
        )
    record.message = clean_text(record.message)
    if len(record.attempts) > MAX_RESULTS:
        raise InvalidRecord(f"more than {MAX_RESULTS:,} test results")
    record.collected = [bound_nodeid(escape_controls(n)) for n in record.collected]
    for a in record.attempts:
        a.nodeid = bound_nodeid(escape_controls(a.nodeid))
        if a.outcome not in ATTEMPT_OUTCOMES:
            raise InvalidRecord(f"test {a.nodeid[:200]}: unknown outcome {a.outcome!r:.40}")
        a.duration = check_seconds(a.duration, f"test {a.nodeid[:200]}")
        if a.started_at is not None:
            check_time(a.started_at, f"test {a.nodeid[:200]} start")
        a.message, a.longrepr = clean_text(a.message), clean_text(a.longrepr)
        a.worker = escape_controls(a.worker)[:50] if a.worker else a.worker
