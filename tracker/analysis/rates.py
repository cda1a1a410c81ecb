"""The two rates, by their names (docs/design.md, "Rates, by their names"); never one for the other.

- green runs: the share of runs that `passed`, which is what promotion counts (a `flaky` run is no
  green run: upstream CI has no reruns); interrupted runs are left out;
- test pass rate: first attempts that passed over tests that ran (passed or failed first;
  skipped, xfailed, xpassed, interrupted and not-run tests are neither).

Both come from the runs' stored counts (a `flaky` final outcome failed first), so they cost one
query and survive the retention of old results.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta, tzinfo

from tracker.analysis.history import RunRow
from tracker.records import FAILING, FLAKY, PASSED, RUN_INTERRUPTED, RUN_PASSED

FAILED_FIRST = (*sorted(FAILING), FLAKY)


@dataclass(frozen=True)
class Day:
    """One local day's runs: how many counted (interrupted ones do not) and how many passed."""

    day: date
    runs: int
    green: int

    @property
    def green_rate(self) -> float | None:
        return self.green / self.runs if self.runs else None

    def as_dict(self) -> dict:
        return {"day": self.day.isoformat(), "runs": self.runs, "green_runs": self.green,
                "green_rate": self.green_rate}  # fmt: skip


def daily(runs: Iterable[RunRow], first: date, days: int, tz: tzinfo) -> list[Day]:
    """Green runs day by day, `days` local days from `first`; a day without runs says so (0
    runs, no rate) instead of looking like a red one."""
    counted: dict[date, list[str]] = {}
    for r in runs:
        if r.status != RUN_INTERRUPTED:
            counted.setdefault(r.started_at.astimezone(tz).date(), []).append(r.status)
    out = []
    for i in range(days):
        day = first + timedelta(days=i)
        statuses = counted.get(day, [])
        out.append(Day(day, len(statuses), statuses.count(RUN_PASSED)))
    return out


@dataclass(frozen=True)
class Rates:
    days: int
    green: int = 0  # runs that passed
    runs: int = 0  # runs counted
    passed: int = 0  # first attempts that passed
    ran: int = 0  # first attempts that passed or failed

    @property
    def green_runs(self) -> float | None:
        return self.green / self.runs if self.runs else None

    @property
    def test_pass_rate(self) -> float | None:
        return self.passed / self.ran if self.ran else None


def rates(runs: Iterable[RunRow], days: int) -> Rates:
    counted = [r for r in runs if r.status != RUN_INTERRUPTED]
    passed = sum(r.counts.get(PASSED, 0) for r in counted)
    failed = sum(r.counts.get(o, 0) for r in counted for o in FAILED_FIRST)
    return Rates(
        days=days,
        green=sum(r.status == RUN_PASSED for r in counted),
        runs=len(counted),
        passed=passed,
        ran=passed + failed,
    )
