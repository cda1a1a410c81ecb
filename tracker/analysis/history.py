"""The analysis's SQL: what happened to each test in each run of a window, read in one query per
question; the judging is done in Python on these rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, select
from sqlmodel import Session

from tracker.models import Attempt, Case, Quarantine, Result, Run, Runner, Suite
from tracker.records import FAILING, PASSED, RUN_RUNNING, SKIPPED, UNCONFIRMED


class UnknownName(LookupError):
    pass


@dataclass(frozen=True)
class Observation:
    """One test in one run: its final outcome and its first attempt (in suite order)."""

    run_id: int
    started_at: datetime
    commit: str | None
    runner_id: int
    environment_id: int | None
    test_id: int
    nodeid: str
    kernel: str
    final: str
    first: str
    message: str | None


@dataclass(frozen=True)
class RunRow:
    id: int
    started_at: datetime
    status: str
    commit: str | None
    runner_id: int
    counts: dict[str, int]
    finished_at: datetime | None = None


def suite_id(session: Session, name: str) -> int:
    found = session.execute(select(Suite.id).where(Suite.name == name)).scalar()
    if found is None:
        known = ", ".join(session.execute(select(Suite.name).order_by(Suite.name)).scalars())
        raise UnknownName(f"no suite {name!r} in the database (known: {known or 'none'})")
    return found


def runner_id(session: Session, name: str | None) -> int | None:
    if name is None:
        return None
    found = session.execute(select(Runner.id).where(Runner.name == name)).scalar()
    if found is None:
        raise UnknownName(f"no runner {name!r} in the database")
    return found


def runs(
    session: Session, suite: int, runner: int | None, since: datetime, until: datetime
) -> list[RunRow]:
    query = (
        select(
            Run.id,
            Run.started_at,
            Run.status,
            Run.commit,
            Run.runner_id,
            Run.counts,
            Run.finished_at,
        )
        .where(Run.suite_id == suite, Run.started_at.between(since, until))
        .where(Run.status != RUN_RUNNING)
        .order_by(Run.started_at, Run.id)
    )
    if runner is not None:
        query = query.where(Run.runner_id == runner)
    return [RunRow(*row) for row in session.execute(query).all()]


def observations(
    session: Session, suite: int, runner: int | None, since: datetime, until: datetime
) -> list[Observation]:
    """Every test of every finished run in the window, oldest run first."""
    query = (
        select(
            Run.id,
            Run.started_at,
            Run.commit,
            Run.runner_id,
            Run.environment_id,
            Case.id,
            Case.nodeid,
            Case.kernel,
            Result.outcome,
            Attempt.outcome,
            Attempt.message,
        )
        .join(Result, Result.run_id == Run.id)
        .join(Case, Case.id == Result.test_id)
        .join(
            Attempt,
            and_(
                Attempt.run_id == Result.run_id,
                Attempt.test_id == Result.test_id,
                Attempt.number == 1,
            ),
            isouter=True,
        )
        .where(Run.suite_id == suite, Run.started_at.between(since, until))
        .where(Run.status != RUN_RUNNING)
        .order_by(Run.started_at, Run.id)
    )
    if runner is not None:
        query = query.where(Run.runner_id == runner)
    return [
        Observation(*row[:9], _first(row[9], row[8]), row[10]) for row in session.execute(query)
    ]


def _first(first: str | None, final: str) -> str:
    """The first attempt is the evidence (reruns are the tracker's help), except a skip that a
    retry followed (TestNG reports its retried attempts as SKIP) and an unconfirmed one (a
    timeout beside tests that filled its device): the attempt that ran alone decides."""
    if first is None or (first in (SKIPPED, UNCONFIRMED) and final in (PASSED, *FAILING)):
        return final
    return first


@dataclass(frozen=True)
class AttemptRow:
    run_id: int
    test_id: int
    number: int
    outcome: str
    isolated: bool
    process: int | None
    position: int | None


def attempts_of(session: Session, pairs: set[tuple[int, int]]) -> list[AttemptRow]:
    """All attempts of the given (run, test) pairs: the evidence behind rerun-flaky verdicts."""
    if not pairs:
        return []
    run_ids = {r for r, _ in pairs}
    rows = session.execute(
        select(
            Attempt.run_id,
            Attempt.test_id,
            Attempt.number,
            Attempt.outcome,
            Attempt.isolated,
            Attempt.process,
            Attempt.position,
        )
        .where(Attempt.run_id.in_(run_ids))
        .where(Attempt.test_id.in_({t for _, t in pairs}))
        .order_by(Attempt.run_id, Attempt.test_id, Attempt.number)
    ).all()
    return [AttemptRow(*r) for r in rows if (r[0], r[1]) in pairs]


def ran_before(
    session: Session, run: int, process: int, position: int, limit: int = 20
) -> list[str]:
    """The tests that ran before `position` in the same pytest process, nearest first: where a
    human (or a bisect) looks for the test that polluted the state."""
    return list(
        session.execute(
            select(Case.nodeid)
            .join(Attempt, Attempt.test_id == Case.id)
            .where(Attempt.run_id == run, Attempt.process == process, Attempt.position < position)
            .order_by(Attempt.position.desc())
            .limit(limit)
        ).scalars()
    )


def quarantined(session: Session, suite: int) -> dict[int, Quarantine]:
    rows = session.execute(
        select(Quarantine).join(Case, Case.id == Quarantine.test_id).where(Case.suite_id == suite)
    ).scalars()
    return {q.test_id: q for q in rows}
