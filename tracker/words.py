"""Numbers as people read them, on the pages and in the terminal: durations, moments, counts."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo


def seconds(value: float | None) -> str:
    """A duration a person reads: 0.04 s, 12.3 s, 4 min 12 s, 8 min, 1 h 3 min, 2 h."""
    if value is None:
        return "–"
    if value < 10:
        return f"{value:.2f} s" if value < 1 else f"{value:.1f} s"
    if value < 60:
        return f"{value:.0f} s"
    if value < 3600:
        rest = int(value % 60)
        return f"{int(value // 60)} min" + (f" {rest} s" if rest else "")
    rest = int(value % 3600 // 60)
    return f"{int(value // 3600)} h" + (f" {rest} min" if rest else "")


def moment(value: str | datetime | None, tz: str = "UTC") -> str:
    """A stored time as a person reads it: to the minute, in the configured time zone, which
    it names (`2026-11-30 22:00 +08:00`, or `UTC`)."""
    if not value:
        return "–"
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    local = (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(ZoneInfo(tz))
    zone = "UTC" if tz == "UTC" else local.strftime("%z")
    return f"{local:%Y-%m-%d %H:%M} " + (zone if len(zone) != 5 else f"{zone[:3]}:{zone[3:]}")


def plural(n: int, word: str) -> str:
    """`1 run`, `2,608 runs`, `17 pytest processes`."""
    if n == 1:
        return f"{n:,} {word}"
    return f"{n:,} {word}{'es' if word.endswith(('s', 'x', 'sh', 'ch')) else 's'}"


def spoken(name: str) -> str:
    """A stored name as people read it: `timed out`, `not run`, `same input`."""
    return name.replace("_", " ")


def counts_text(counts: dict[str, int]) -> str:
    """`1,667 passed, 483 not run`: a run's outcome counts (zeros left out)."""
    return ", ".join(f"{n:,} {spoken(k)}" for k, n in counts.items() if n)


def short_commit(value: str | None) -> str:
    """A commit at a fixed short form: 12 hex characters, after a `content:` prefix too."""
    if not value:
        return "–"
    prefix, _, digest = value.rpartition(":")
    return f"{prefix}:{digest[:12]}" if prefix else value[:12]


def trace_from_error(text: str, before: int = 12) -> str:
    """A traceback from a little before its first `E ` line: pytest prints the whole test
    function first (decorators, parametrize lists), and the error was the 105th line."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("E ")), 0)
    start = max(0, first - before)
    head = [f"… {plural(start, 'line')} above, in the full log"] if start else []
    return "\n".join([*head, *lines[start:]])


def percent(x: float, digits: int = 1) -> str:
    """x as a percentage that never rounds a shortfall up to 100% or a share above zero down to
    0%: 2,139 of 2,140 results passed is 99.95%, which `.1%` printed as 100.0% on a night with
    a failure. Up to two more digits, then `>99.99%` / `<0.01%`; float noise (an interval's
    bound of 3e-17) is the number it stands for."""
    if abs(x) < 1e-9 or abs(1 - x) < 1e-9:
        return f"{100 * round(x):.{digits}f}%"
    for d in range(digits, digits + 3):
        if round(100 * x, d) not in (0, 100):
            return f"{100 * x:.{d}f}%"
    step = 10.0 ** -(digits + 2)
    return f"<{step:.{digits + 2}f}%" if x < 0.5 else f">{100 - step:.{digits + 2}f}%"
