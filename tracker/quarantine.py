"""Quarantine: tests whose failures no longer fail a run. They keep running and being recorded;
`tracker flaky --format deselect` exports them for CI systems that must skip them."""

from __future__ import annotations

import difflib
import shlex
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from tracker import store
from tracker.models import Case, Quarantine, Result, Suite
from tracker.validate import escape_controls


class QuarantineError(ValueError):
    pass


def active(session: Session, suite: str) -> set[str]:
    """Quarantined nodeids of a suite (empty for a suite not stored yet)."""
    return set(
        session.execute(
            select(Case.nodeid)
            .join(Quarantine, Quarantine.test_id == Case.id)
            .join(Suite, Suite.id == Case.suite_id)
            .where(Suite.name == suite)
        ).scalars()
    )


def deselect_lines(nodeids: set[str] | list[str]) -> list[str]:
    """One `--deselect` option per line, the id quoted for a shell and for pytest's own
    `addopts` (both split with shell rules): an id cannot end the line or add an option."""
    return [f"--deselect {shlex.quote(escape_controls(n))}" for n in sorted(nodeids)]


def _suite(session: Session, suite: str) -> int:
    found = session.execute(select(Suite.id).where(Suite.name == suite)).scalar()
    if found is None:
        raise QuarantineError(f"no suite {suite!r} in the database")
    return found


def _never_recorded(session: Session, suite_id: int, suite: str, nodeid: str) -> str | None:
    """Why an id is suspicious: this suite never recorded a result for it (a typo, or a test of
    another suite), with the recorded ids that look most like it."""
    seen = session.execute(
        select(Result.id)
        .join(Case, Case.id == Result.test_id)
        .where(Case.suite_id == suite_id, Case.nodeid == nodeid)
        .limit(1)
    ).first()
    if seen:
        return None
    known = session.execute(select(Case.nodeid).where(Case.suite_id == suite_id)).scalars().all()
    close = difflib.get_close_matches(nodeid, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"suite {suite!r} has never recorded {nodeid!r}{hint} (--force adds it anyway)"


def add(
    session: Session, suite: str, nodeid: str, reason: str, by: str, force: bool = False
) -> None:
    """Quarantine a test. One this suite never recorded is refused unless forced (e.g. from a
    hand-kept deselect list, before the first run)."""
    if not nodeid.strip() or "::" not in nodeid:
        raise QuarantineError(f"{nodeid!r} is not a pytest node id (path::name)")
    sid = _suite(session, suite)
    if not force and (why := _never_recorded(session, sid, suite, nodeid)):
        raise QuarantineError(why)
    store.quarantine_test(session, sid, nodeid, reason, by)


def remove(session: Session, suite: str, nodeid: str) -> bool:
    return store.release_test(session, _suite(session, suite), nodeid)


def listing(session: Session, suite: str) -> list[dict[str, Any]]:
    sid = _suite(session, suite)
    rows = session.execute(
        select(Case.nodeid, Case.kernel, Quarantine.reason, Quarantine.since, Quarantine.by)
        .join(Quarantine, Quarantine.test_id == Case.id)
        .where(Case.suite_id == sid)
        .order_by(Case.nodeid)
    ).all()
    return [
        {"nodeid": n, "kernel": k, "reason": r, "since": s.isoformat(), "by": b}
        for n, k, r, s, b in rows
    ]
