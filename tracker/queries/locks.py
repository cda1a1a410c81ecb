"""Whether a suite is running or waited for on a runner, and the stamp the analysis cache
is keyed by: the reads that decide who may start and what is stale."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlmodel import Session

from tracker.models import (
    Case,
    Quarantine,
    Run,
    Runner,
    RunRequest,
    Suite,
)
from tracker.records import (
    RUN_RUNNING,
)


def running(session: Session, suite: str, runner: str) -> bool:
    """A run of the suite on the runner is running."""
    return (
        session.execute(
            select(Run.id)
            .join(Suite, Suite.id == Run.suite_id)
            .join(Runner, Runner.id == Run.runner_id)
            .where(Suite.name == suite, Runner.name == runner, Run.status == RUN_RUNNING)
            .limit(1)
        ).first()
        is not None
    )


def busy(session: Session, suite: str, runner: str) -> bool:
    """A run of the suite on the runner is running, or a `run now` request waits or runs."""
    waiting = session.execute(
        select(RunRequest.id)
        .where(
            RunRequest.suite == suite,
            RunRequest.runner == runner,
            RunRequest.state.in_(("queued", "started")),
        )
        .limit(1)
    ).first()
    return waiting is not None or running(session, suite, runner)


def state_stamp(session: Session, suite_id: int) -> tuple:
    """Changes whenever a run of the suite is added, starts or ends, or the quarantine changes."""
    runs = session.execute(
        select(
            func.max(Run.id),
            func.count(),
            func.count().filter(Run.status == RUN_RUNNING),
            func.max(Run.finished_at),
        ).where(Run.suite_id == suite_id)
    ).one()
    quarantined = session.execute(
        select(func.count(), func.max(Quarantine.since))
        .join(Case, Case.id == Quarantine.test_id)
        .where(Case.suite_id == suite_id)
    ).one()
    return (*runs, *quarantined)
