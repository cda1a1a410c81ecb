"""One test: its id, its name and its latest runs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, select
from sqlmodel import Session

from tracker.models import (
    Attempt,
    Case,
    Result,
    Run,
    Runner,
    Suite,
)
from tracker.queries.runs import NotFound
from tracker.records import FAILING


def case_info(session: Session, test_id: int) -> dict[str, Any]:
    row = session.execute(
        select(Case.id, Case.nodeid, Case.kernel, Case.file, Suite.name)
        .join(Suite, Suite.id == Case.suite_id)
        .where(Case.id == test_id)
    ).first()
    if row is None:
        raise NotFound(f"no test with id {test_id}")
    return dict(zip(("id", "nodeid", "kernel", "file", "suite"), row, strict=True))


def test_ids(session: Session, suite: str, nodeids: list[str]) -> dict[str, int]:
    """The ids of a suite's tests by node id, for links from lists of names."""
    if not nodeids:
        return {}
    rows = session.execute(
        select(Case.nodeid, Case.id)
        .join(Suite, Suite.id == Case.suite_id)
        .where(Suite.name == suite, Case.nodeid.in_(set(nodeids)))
    ).all()
    return dict(rows)  # type: ignore[arg-type]


def failure_trace(session: Session, run_id: int, test_id: int) -> str | None:
    """The traceback of the test's first failing attempt in a run (pytest's long repr)."""
    return session.execute(
        select(Attempt.longrepr)
        .where(
            Attempt.run_id == run_id,
            Attempt.test_id == test_id,
            Attempt.outcome.in_(sorted(FAILING)),
        )
        .order_by(Attempt.number)
        .limit(1)
    ).scalar()


def case_history(session: Session, test_id: int, limit: int = 100) -> list[dict[str, Any]]:
    """The test's latest runs, oldest first: final outcome, first attempt, duration, commit."""
    rows = session.execute(
        select(
            Run.id,
            Run.started_at,
            Run.commit,
            Runner.name,
            Result.outcome,
            Result.duration,
            Attempt.outcome,
            Attempt.message,
            Attempt.isolated,
            Result.quarantined,
        )
        .join(Result, Result.run_id == Run.id)
        .join(Runner, Runner.id == Run.runner_id)
        .join(
            Attempt,
            and_(Attempt.run_id == Run.id, Attempt.test_id == test_id, Attempt.number == 1),
            isouter=True,
        )
        .where(Result.test_id == test_id)
        .order_by(Run.started_at.desc())
        .limit(limit)
    ).all()
    keys = (
        "run_id",
        "started_at",
        "commit",
        "runner",
        "outcome",
        "duration",
        "first",
        "message",
        "isolated",
        "quarantined",
    )
    return [dict(zip(keys, row, strict=True)) for row in reversed(rows)]
