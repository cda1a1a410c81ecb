"""JUnit XML (pytest's --junitxml, pytest-rerunfailures, the files GitHub Actions jobs upload)
-> attempts. Parsed with defusedxml: entity expansion, DTDs and external references are refused.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from tracker.records import ERROR, FAILED, PASSED, SKIPPED, TIMEOUT, XFAILED, AttemptRecord


class JUnitError(ValueError):
    pass


# Earlier attempts of a rerun test, as written by rerun plugins (Surefire-style names).
_RERUN_TAGS = {
    "rerunFailure": FAILED,
    "flakyFailure": FAILED,
    "rerunError": ERROR,
    "flakyError": ERROR,
}


def nodeid_of(case: Element) -> str:
    """Rebuild pytest's nodeid: classname is the module path with dots, then any Test classes."""
    name = case.get("name") or "(unnamed)"
    classname = case.get("classname") or ""
    parts = [p for p in classname.split(".") if p]
    classes: list[str] = []
    while parts and parts[-1][:1].isupper():
        classes.insert(0, parts.pop())
    file = case.get("file")
    if file:
        path = file.replace("\\", "/")
    elif parts:
        path = "/".join(parts) + ".py"
    else:
        return "::".join([*classes, name]) or name
    return "::".join([path, *classes, name])


def _text(el: Element) -> str:
    message = el.get("message") or ""
    body = (el.text or "").strip()
    return f"{message}\n{body}".strip() if body and body != message else message or body


def _attempts_of(case: Element) -> list[AttemptRecord]:
    nodeid = nodeid_of(case)
    try:
        duration = float(case.get("time") or 0.0)
    except ValueError:
        raise JUnitError(
            f"testcase {nodeid!r}: time={case.get('time')!r} is not a number"
        ) from None
    attempts = [
        AttemptRecord(nodeid, outcome, 0.0, el.get("message"), _text(el))
        for el in case
        if (outcome := _RERUN_TAGS.get(el.tag))
    ]
    outcome, message, longrepr = PASSED, None, None
    for el in case:
        if el.tag in ("failure", "error"):
            outcome = FAILED if el.tag == "failure" else ERROR
            message, longrepr = el.get("message"), _text(el)
            if message and message.startswith("Failed: Timeout"):
                outcome = TIMEOUT
            break
        if el.tag == "skipped":
            outcome = XFAILED if el.get("type") == "pytest.xfail" else SKIPPED
            message = el.get("message")
            break
    attempts.append(AttemptRecord(nodeid, outcome, duration, message, longrepr))
    return attempts


def parse_junit(text: str) -> tuple[list[AttemptRecord], datetime | None]:
    """Attempts in file order, and the first suite's timestamp if it has one."""
    try:
        root = SafeET.fromstring(text, forbid_dtd=True)
    except DefusedXmlException as exc:
        raise JUnitError(
            f"refused: the XML uses a forbidden construct ({type(exc).__name__})"
        ) from None
    except ParseError as exc:
        raise JUnitError(f"not well-formed XML ({exc})") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise JUnitError(f"not a JUnit report: the root element is <{root.tag[:50]}>")
    attempts: list[AttemptRecord] = []
    for case in root.iter("testcase"):
        new = _attempts_of(case)
        last = attempts[-1] if attempts else None
        # old pytest writes a second <testcase> for a teardown error of the same test
        if last and last.nodeid == new[0].nodeid and len(new) == 1 and new[0].outcome == ERROR:
            if last.outcome == PASSED:
                last.outcome, last.message, last.longrepr = ERROR, new[0].message, new[0].longrepr
            continue
        attempts.extend(new)
    started = None
    first_suite = root if root.tag == "testsuite" else root.find("testsuite")
    stamp = first_suite.get("timestamp") if first_suite is not None else None
    if stamp:
        try:
            parsed = datetime.fromisoformat(re.sub(r"Z$", "+00:00", stamp))
            started = parsed if parsed.tzinfo else parsed.astimezone().astimezone(UTC)
        except ValueError:
            started = None
    return attempts, started
