"""What the runner side reads: the plan's history, a failing process's order to replay, the
investigations made and the suspects still waiting for one."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from tracker.models import (
    Attempt,
    Case,
    Investigation,
    Run,
    Runner,
    Suite,
)
from tracker.queries.runs import NotFound, _iso
from tracker.records import (
    FAILING,
    PASSED,
    RUN_RUNNING,
    Sample,
)


def recent_attempts(session: Session, suite: str, runner: str, runs: int = 10) -> list[Sample]:
    """Every attempt of the last `runs` runs of the suite on the runner, with when and where it
    ran: what the run plan learns durations and device sharing from."""
    last = (
        select(Run.id)
        .join(Suite, Suite.id == Run.suite_id)
        .join(Runner, Runner.id == Run.runner_id)
        .where(Suite.name == suite, Runner.name == runner, Run.status != RUN_RUNNING)
        .order_by(Run.started_at.desc())
        .limit(runs)
        .subquery()
    )
    rows = session.execute(
        select(
            Attempt.run_id,
            Case.nodeid,
            Attempt.number,
            Attempt.duration,
            Attempt.outcome,
            Attempt.started_at,
            Attempt.worker,
            Run.kernel_cache,
        )
        .join(Case, Case.id == Attempt.test_id)
        .join(Run, Run.id == Attempt.run_id)
        .where(Attempt.run_id.in_(select(last.c.id)))
    ).all()
    return [
        Sample(run, nodeid, n, duration, outcome, started, worker, cache and cache == "warm")
        for run, nodeid, n, duration, outcome, started, worker, cache in rows
    ]


def replay_order(
    session: Session, suite: str, nodeid: str, run_id: int | None = None
) -> tuple[int, int, list[str]]:
    """(run, test id, the tests before it in its process, in order) for the test's latest
    first attempt that failed in a run's process (or in run `run_id`)."""
    query = (
        select(Attempt.run_id, Attempt.test_id, Attempt.process, Attempt.position)
        .join(Case, Case.id == Attempt.test_id)
        .join(Suite, Suite.id == Case.suite_id)
        .where(Suite.name == suite, Case.nodeid == nodeid, Attempt.number == 1)
        .where(Attempt.outcome.in_(FAILING), Attempt.process.is_not(None))
        .order_by(Attempt.run_id.desc())
        .limit(1)
    )
    if run_id is not None:
        query = query.where(Attempt.run_id == run_id)
    row = session.execute(query).first()
    if row is None:
        where = f" in run {run_id}" if run_id is not None else ""
        raise NotFound(f"{nodeid} has no failed first attempt in a process of {suite}{where}")
    run, test_id, process, position = row
    before = session.execute(
        select(Case.nodeid)
        .join(Attempt, Attempt.test_id == Case.id)
        .where(Attempt.run_id == run, Attempt.process == process, Attempt.number == 1)
        .where(Attempt.position < position)
        .order_by(Attempt.position)
    ).scalars()
    return run, test_id, list(before)


def investigations(
    session: Session, test_ids: list[int], kind: str = "polluter"
) -> dict[int, dict[str, Any]]:
    """The latest investigation of a kind ("polluter", "bisect") of each test: its verdict,
    what it found, its evidence, when."""
    if not test_ids:
        return {}
    rows = session.execute(
        select(Investigation)
        .where(Investigation.test_id.in_(set(test_ids)), Investigation.kind == kind)
        .order_by(Investigation.id)
    ).scalars()
    return {
        inv.test_id: {
            **inv.details,
            "verdict": inv.verdict,
            "run_id": inv.run_id,
            "finished_at": _iso(inv.finished_at),
        }
        for inv in rows
    }


def order_suspects(session: Session, run_id: int) -> list[str]:
    """Tests of a run that failed in suite order and passed alone in a fresh process, without a
    polluter search yet: what a night's search budget goes to."""
    rerun = select(Attempt.test_id).where(
        Attempt.run_id == run_id, Attempt.isolated.is_(True), Attempt.outcome == PASSED
    )
    searched = select(Investigation.test_id).where(Investigation.kind == "polluter")
    rows = session.execute(
        select(Case.nodeid)
        .join(Attempt, Attempt.test_id == Case.id)
        .where(Attempt.run_id == run_id, Attempt.number == 1, Attempt.outcome.in_(FAILING))
        .where(Attempt.test_id.in_(rerun), Attempt.test_id.not_in(searched))
        .order_by(Attempt.id)
    ).scalars()
    return list(rows)
