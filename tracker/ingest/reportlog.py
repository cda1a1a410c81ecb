"""pytest-reportlog JSON lines -> attempts. The runner feeds it line by line while pytest runs; the
ingester feeds it a whole file. Both get the same attempts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tracker.records import (
    CRASHED,
    ERROR,
    FAILED,
    INTERRUPTED,
    PASSED,
    SKIPPED,
    TIMEOUT,
    XFAILED,
    XPASSED,
    AttemptRecord,
)
from tracker.validate import EARLIEST


class ReportLogError(ValueError):
    pass


def _crash_message(longrepr: Any) -> str | None:
    if longrepr is None:
        return None
    if isinstance(longrepr, str):
        lines = [ln for ln in longrepr.splitlines() if ln.strip()]
        errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
        return (errors[0] if errors else lines[0] if lines else longrepr).strip()
    if isinstance(longrepr, list) and len(longrepr) == 3:  # skip: [path, lineno, reason]
        return str(longrepr[2])
    if isinstance(longrepr, dict):
        crash = longrepr.get("reprcrash") or {}
        if isinstance(crash, dict) and crash.get("message"):
            return str(crash["message"])
    return None


def _longrepr_text(longrepr: Any) -> str | None:
    """The traceback as pytest would print it; a shape pytest does not write is kept as its JSON,
    so another tool's (or a hostile) file still says what it says."""
    try:
        return _pytest_longrepr(longrepr)
    except (TypeError, ValueError, AttributeError, KeyError):
        return json.dumps(longrepr, ensure_ascii=False)


def _pytest_longrepr(longrepr: Any) -> str | None:
    if longrepr is None or isinstance(longrepr, str):
        return longrepr
    if isinstance(longrepr, list):
        return ":".join(str(x) for x in longrepr)
    if not isinstance(longrepr, dict):
        return str(longrepr)
    chain = longrepr.get("chain") or [
        [longrepr.get("reprtraceback"), longrepr.get("reprcrash"), None]
    ]
    parts: list[str] = []
    for tb, crash, descr in chain:
        for entry in (tb or {}).get("reprentries", []):
            data = entry.get("data", {}) if isinstance(entry, dict) else {}
            parts.extend(str(line) for line in data.get("lines", []))
            loc = data.get("reprfileloc")
            if isinstance(loc, dict):
                parts.append(f"{loc.get('path')}:{loc.get('lineno')}: {loc.get('message')}")
            parts.append("")
        if not tb and isinstance(crash, dict):
            parts.append(str(crash.get("message")))
        if descr:
            parts.append(str(descr))
    for name, content in longrepr.get("sections") or []:
        if "stderr" in str(name) or "log" in str(name):
            parts.append(f"----- {name} -----\n{content}")
    return "\n".join(parts).strip() or None


def _moment(value: Any) -> datetime | None:
    """A report's epoch seconds; a value no clock gives is no time at all."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        moment = datetime.fromtimestamp(value, UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return moment if moment >= EARLIEST else None  # 0: a placeholder, not a time


def _worker(data: dict[str, Any]) -> str | None:
    """xdist's worker of a report, bounded like any name from a file."""
    worker = data.get("worker_id")
    return worker[:50] if isinstance(worker, str) and worker.isprintable() and worker else None


def _is_timeout(message: str | None) -> bool:
    # pytest-timeout fails the test with "Failed: Timeout (>Ns) from pytest-timeout."
    return bool(message) and message.startswith("Failed: Timeout")


@dataclass
class _Open:
    nodeid: str
    outcome: str | None
    duration: float
    started_at: datetime | None
    message: str | None = None
    longrepr: str | None = None
    wasxfail: bool = False
    worker: str | None = None  # pytest-xdist's worker_id ("gw3"); None: a single process


class ReportLogParser:
    """Folds setup/call/teardown TestReports into one attempt per test execution."""

    def __init__(self) -> None:
        self.attempts: list[AttemptRecord] = []
        self.finished = False  # SessionFinish seen: pytest ended on its own
        self.exitstatus: int | None = None
        self.first_start: datetime | None = None
        self.last_stop: datetime | None = None  # with first_start: the wall span of the file
        self._open: dict[str, _Open] = {}

    def feed_line(self, line: str, lineno: int = 0) -> AttemptRecord | None:
        if not line.strip():
            return None
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReportLogError(f"line {lineno}: not JSON ({exc.msg})") from None
        except RecursionError:
            raise ReportLogError(f"line {lineno}: JSON nested too deep") from None
        if not isinstance(data, dict) or "$report_type" not in data:
            raise ReportLogError(f"line {lineno}: not a pytest-reportlog record")
        return self.feed(data, lineno)

    def feed(self, data: dict[str, Any], lineno: int = 0) -> AttemptRecord | None:
        kind = data["$report_type"]
        if kind == "SessionFinish":
            self.finished = True
            self.exitstatus = data.get("exitstatus")
        elif kind == "CollectReport" and data.get("outcome") == "failed":
            nodeid = str(data.get("nodeid") or "(collection)")
            longrepr = data.get("longrepr")
            text = _longrepr_text(longrepr)
            return self._done(
                _Open(nodeid, ERROR, 0.0, None, _crash_message(longrepr) or text, text)
            )
        elif kind == "TestReport":
            return self._test_report(data, lineno)
        return None

    def _test_report(self, data: dict[str, Any], lineno: int) -> AttemptRecord | None:
        try:
            nodeid, when, outcome = str(data["nodeid"]), data["when"], data["outcome"]
            duration = float(data.get("duration") or 0.0)
        except (KeyError, TypeError, ValueError):
            raise ReportLogError(f"line {lineno}: TestReport without nodeid/when/outcome") from None
        started = _moment(data.get("start"))
        stopped = _moment(data.get("stop"))
        if stopped and (self.last_stop is None or stopped > self.last_stop):
            self.last_stop = stopped
        longrepr = data.get("longrepr")
        cur = self._open.get(nodeid)
        if when == "setup" or cur is None:
            if cur is not None:  # a new setup while one is open: the earlier one never ended
                self._done(cur, INTERRUPTED)
            cur = self._open[nodeid] = _Open(nodeid, None, 0.0, started, worker=_worker(data))
            if started and (self.first_start is None or started < self.first_start):
                self.first_start = started
        cur.duration += duration
        cur.wasxfail = cur.wasxfail or "wasxfail" in data
        failed = outcome in ("failed", "rerun")
        if failed and (cur.outcome is None or cur.outcome in (PASSED, SKIPPED, XFAILED, XPASSED)):
            cur.message, cur.longrepr = _crash_message(longrepr), _longrepr_text(longrepr)
        if when == "setup":
            if failed:
                cur.outcome = ERROR
            elif outcome == "skipped":
                cur.outcome = XFAILED if cur.wasxfail else SKIPPED
                cur.message = _crash_message(longrepr)
        elif when == "call":
            if failed:
                cur.outcome = TIMEOUT if _is_timeout(cur.message) else FAILED
            elif outcome == "skipped":
                cur.outcome = XFAILED if cur.wasxfail else SKIPPED
                cur.message = cur.message or _crash_message(longrepr)
            else:
                cur.outcome = XPASSED if cur.wasxfail else PASSED
        elif (
            when == "teardown"
            and failed
            and cur.outcome in (None, PASSED, SKIPPED, XFAILED, XPASSED)
        ):
            cur.outcome = TIMEOUT if _is_timeout(cur.message) else ERROR
        elif when == "???" and failed:  # pytest-xdist: "worker 'gw0' crashed while running" it
            # (its times are 0; written when the worker was found dead, after every report so far)
            self._ran_until(cur, self.last_stop)
            return self._done(cur, CRASHED)
        # the attempt ends with its teardown, or with a pytest-rerunfailures "rerun" report
        if when == "teardown" or outcome == "rerun":
            return self._done(cur)
        return None

    def _done(self, cur: _Open, outcome: str | None = None) -> AttemptRecord:
        self._open.pop(cur.nodeid, None)
        attempt = AttemptRecord(
            nodeid=cur.nodeid,
            outcome=outcome or cur.outcome or INTERRUPTED,
            duration=cur.duration,
            message=cur.message,
            longrepr=cur.longrepr,
            started_at=cur.started_at,
            worker=cur.worker,
        )
        self.attempts.append(attempt)
        return attempt

    def open_tests(self) -> list[str]:
        """Tests that started and have not ended (yet)."""
        return list(self._open)

    def close_open(
        self, outcome: str = INTERRUPTED, message: str | None = None, until: datetime | None = None
    ) -> None:
        """End the tests that never ended: `interrupted` in an ingested log, `crashed` or
        `timeout` when the runner knows why. `until`: the moment the log ends; a test still
        running then ran at least until it, and kept its worker busy (counted from its setup
        report alone, a cut xdist night showed the worker on its heaviest test 93% idle)."""
        for cur in list(self._open.values()):
            cur.message = message or cur.message
            self._ran_until(cur, until)
            self._done(cur, outcome)

    @staticmethod
    def _ran_until(cur: _Open, until: datetime | None) -> None:
        """A test whose end the log does not give ran at least until `until`."""
        if until and cur.started_at and until > cur.started_at:
            cur.duration = max(cur.duration, (until - cur.started_at).total_seconds())


def parse_reportlog(lines: Iterable[str], max_results: int | None = None) -> ReportLogParser:
    """A whole reportlog, line by line (a file object, or a bounded stream of an upload). A last
    line without its newline is the mark of a writer killed mid-line, and is dropped; anything
    else malformed rejects the file."""
    parser = ReportLogParser()
    pending, lineno = None, 0
    for lineno, line in enumerate(lines, 1):
        if pending is not None:
            parser.feed_line(pending, lineno - 1)
        pending = line
        _check_count(parser, max_results)
    if pending is not None:
        try:
            parser.feed_line(pending, lineno)
        except ReportLogError:
            if pending.endswith("\n"):
                raise
    parser.close_open(INTERRUPTED, "the log ends before this test did", parser.last_stop)
    _check_count(parser, max_results)
    return parser


def _check_count(parser: ReportLogParser, max_results: int | None) -> None:
    if max_results is not None and len(parser.attempts) > max_results:
        raise ReportLogError(f"more than {max_results:,} test results")
