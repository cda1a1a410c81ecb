"""JUnit XML as the world writes it (pytest, pytest-rerunfailures, Surefire, TestNG, jest-junit,
mocha, gotestsum, Catch2, phpunit, bazel, ...) -> attempts. Parsed with defusedxml: entity
expansion, DTDs and external references are refused.

The rules, and why (bench/README.md judges every file of a 118-file corpus by them):
- identity: `file` + classname + name when the testcase has a file; without one, the enclosing
  `<testsuite>` names come first, so equal classname/name pairs in different suites (jest-junit,
  nested phpunit suites) stay different tests. pytest's own suite (named `pytest`) adds nothing and
  its dotted classname is the module path, so pytest ids come out as pytest's nodeids;
- a testcase's outcome is the worst of its result elements (`<skipped/>` then `<error>` is pytest's
  skipped test that errored in teardown: an error); `status="disabled"` or `notrun` without any
  result element is skipped;
- the same test written several times in one file is another tool's retries: each is an attempt,
  in file order (TestNG reports retried attempts as SKIP; Surefire writes rerun elements);
- a testcase without a name is its own test, numbered in its suite;
- an `<error>` or `<failure>` directly under a `<testsuite>` (a class that failed to load) is an
  `error` result of that suite.
"""

from __future__ import annotations

import io
import math
import re
from datetime import UTC, datetime, timedelta
from typing import BinaryIO
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from tracker.records import (
    CRASHED,
    ERROR,
    FAILED,
    PASSED,
    SKIPPED,
    TIMEOUT,
    XFAILED,
    AttemptRecord,
    FileResults,
)
from tracker.validate import EARLIEST


class JUnitError(ValueError):
    pass


# Earlier attempts of a rerun test, as written by rerun plugins (Surefire-style names).
_RERUN_TAGS = {
    "rerunFailure": FAILED,
    "flakyFailure": FAILED,
    "rerunError": ERROR,
    "flakyError": ERROR,
}
_RESULT_TAGS = {"skipped": SKIPPED, "failure": FAILED, "error": ERROR}
_SEVERITY = {PASSED: 0, SKIPPED: 1, XFAILED: 1, FAILED: 2, TIMEOUT: 2, ERROR: 3, CRASHED: 4}
_STATUS = {  # the `status` attribute of tst, gtest and Catch2 files, when no element says more
    "disabled": SKIPPED,
    "notrun": SKIPPED,
    "skipped": SKIPPED,
    "failed": FAILED,
    "errored": ERROR,
}
MAX_SECONDS = 366 * 24 * 3600.0
MAX_DEPTH = 100  # suites in suites: real files nest 3 or 4 deep


def _seconds(value: str | None) -> float | None:
    """A `time` attribute. Tools write garbage here (negative times, epoch seconds): the
    results still count, the duration is unknown."""
    try:
        seconds = float((value or "").replace(",", ""))
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS else None


def _timestamp(value: str | None) -> datetime | None:
    """Suite timestamps in the shapes tools write (`Z`, ` UTC`, a space after `T`, date only).
    Without an offset the time is the writer's local time, taken as this machine's. One in the
    far future is kept, and the file refused for it (`tracker.validate`)."""
    if not value:
        return None
    text = re.sub(r"\s*(Z|UTC)$", "+00:00", value.strip()).replace("T ", "T")
    try:
        parsed = datetime.fromisoformat(text).astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    return parsed if parsed >= EARLIEST else None  # 1970-01-01: a placeholder, not a time


def _pytest_path(classname: str) -> tuple[str | None, list[str]]:
    """pytest's classname is the module path with dots, then any Test classes."""
    parts = [p for p in classname.split(".") if p]
    classes: list[str] = []
    while parts and parts[-1][:1].isupper():
        classes.insert(0, parts.pop())
    return ("/".join(parts) + ".py" if parts else None), classes


def nodeid_of(case: Element, suites: list[str], number: int) -> str:
    name = case.get("name") or f"(testcase {number})"
    classname = case.get("classname") or case.get("class") or ""
    file = case.get("file")
    if file:
        _, classes = _pytest_path(classname)
        return "::".join([file.replace("\\", "/"), *classes, name])
    if suites and suites[-1] == "pytest":
        path, classes = _pytest_path(classname)
        return "::".join([p for p in (path, *classes) if p] + [name])
    scope = [s for s in suites if s != classname]
    if classname and classname != name:
        scope.append(classname)
    return "::".join([*scope, name])


def _text(el: Element) -> str:
    message = el.get("message") or ""
    body = (el.text or "").strip()
    return f"{message}\n{body}".strip() if body and body != message else message or body


_XDIST_CRASH = re.compile(r"worker '[^'\n]*' crashed while running '")


def _outcome_of(el: Element) -> str:
    outcome = _RESULT_TAGS[el.tag]
    if outcome == SKIPPED and el.get("type") == "pytest.xfail":
        return XFAILED
    if outcome == FAILED and (el.get("message") or "").startswith("Failed: Timeout"):
        return TIMEOUT  # pytest-timeout
    if outcome in (FAILED, ERROR) and _XDIST_CRASH.match((el.text or "").strip()):
        return CRASHED  # the xdist worker died in this test
    return outcome


def _attempts_of(case: Element, nodeid: str) -> list[AttemptRecord]:
    """The rerun elements, then the testcase's own result: the worst of its result elements."""
    duration = _seconds(case.get("time")) or 0.0
    attempts = [
        AttemptRecord(nodeid, outcome, 0.0, el.get("message"), _text(el))
        for el in case
        if (outcome := _RERUN_TAGS.get(el.tag))
    ]
    results = [el for el in case if el.tag in _RESULT_TAGS]
    if results:
        worst = max(results, key=lambda el: _SEVERITY[_outcome_of(el)])
        outcome, message, longrepr = _outcome_of(worst), worst.get("message"), _text(worst)
    else:
        outcome = _STATUS.get((case.get("status") or "").lower(), PASSED)
        message = longrepr = None
    attempts.append(AttemptRecord(nodeid, outcome, duration, message, longrepr or None))
    return attempts


class _Reader:
    def __init__(self, max_results: int | None) -> None:
        self.attempts: list[AttemptRecord] = []
        self.spans: list[tuple[datetime, datetime]] = []
        self.max_results = max_results

    def suite_start(self, el: Element) -> None:
        if (start := _timestamp(el.get("timestamp"))) is not None:
            try:
                end = start + timedelta(seconds=_seconds(el.get("time")) or 0.0)
            except OverflowError:  # year 9999: kept, for the validation to refuse
                end = start
            self.spans.append((start, end))

    def suite_error(self, el: Element, suites: list[str]) -> None:
        """An <error> or <failure> of the suite itself (a class that failed to load)."""
        where = "::".join(suites) or "testsuite"
        self.attempts.append(AttemptRecord(where, ERROR, 0.0, el.get("message"), _text(el) or None))

    def case(self, el: Element, suites: list[str], number: int) -> None:
        nodeid = nodeid_of(el, suites, number)
        new = _attempts_of(el, nodeid)
        last = self.attempts[-1] if self.attempts else None
        # old pytest writes a second <testcase> for a teardown error of a test that passed
        if (
            last
            and last.nodeid == nodeid
            and last.outcome == PASSED
            and len(new) == 1
            and new[0].outcome == ERROR
            and "teardown" in (new[0].message or "")
        ):
            last.outcome, last.message, last.longrepr = ERROR, new[0].message, new[0].longrepr
            return
        self.attempts.extend(new)
        if self.max_results is not None and len(self.attempts) > self.max_results:
            raise JUnitError(f"more than {self.max_results:,} test results")


_SUITES = ("testsuite", "testsuites")


def parse_junit(source: BinaryIO | str, max_results: int | None = None) -> FileResults:
    """Attempts in file order, and the wall span the suites' timestamps and times state. The
    file is read as a stream and each testcase is dropped once read, so memory follows the
    results, not the file; the nesting is checked as elements open."""
    if isinstance(source, str):
        source = io.BytesIO(source.encode("utf-8"))
    reader = _Reader(max_results)
    open_: list[Element] = []  # the elements from the root to the current one
    names: list[str] = []  # the names of the enclosing <testsuite>s
    numbers: list[int] = []  # testcases seen so far in each enclosing suite
    try:
        for event, el in SafeET.iterparse(source, ("start", "end"), forbid_dtd=True):
            if event == "start":
                if not open_ and el.tag not in _SUITES:
                    raise JUnitError(f"not a JUnit report: the root element is <{el.tag[:50]}>")
                open_.append(el)
                if el.tag in _SUITES:
                    if len(numbers) > MAX_DEPTH:
                        raise JUnitError(f"testsuites nested more than {MAX_DEPTH} deep")
                    numbers.append(0)
                    names.append(el.get("name") or "" if el.tag == "testsuite" else "")
                    reader.suite_start(el)
                continue
            parent = open_[-2] if len(open_) > 1 else None
            in_suite = parent is not None and parent.tag in _SUITES
            named = [n for n in names if n]
            if el.tag == "testcase" and in_suite:
                numbers[-1] += 1
                reader.case(el, named, numbers[-1])
            elif el.tag in ("error", "failure") and in_suite:
                reader.suite_error(el, named)
            elif el.tag in _SUITES:
                numbers.pop()
                names.pop()
            open_.pop()
            if in_suite and el.tag not in _SUITES:
                parent.remove(el)  # read: let it go
    except DefusedXmlException as exc:
        raise JUnitError(
            f"refused: the XML uses a forbidden construct ({type(exc).__name__})"
        ) from None
    except ParseError as exc:
        raise JUnitError(f"not well-formed XML ({exc})") from None
    if not reader.spans:
        return FileResults(reader.attempts, None, None)
    return FileResults(
        reader.attempts, min(s for s, _ in reader.spans), max(e for _, e in reader.spans)
    )
