"""Writes. A run's results go in with a few executemany statements inside one transaction: either
the whole run is stored or nothing is.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from tracker import quarantine
from tracker.db import upsert
from tracker.models import (
    ENV_COLUMNS,
    Attempt,
    Case,
    Environment,
    Investigation,
    Result,
    Run,
    Runner,
    Suite,
)
from tracker.records import (
    FAILING,
    FLAKY,
    RUN_RUNNING,
    RunRecord,
    file_of,
    kernel_of,
    summarize,
)

# One writer at a time per process (web threads, the scheduler's thread): SQLite takes one writer
# anyway, and a queue here keeps the others from holding pooled connections while they wait.
_WRITE_LOCK = threading.Lock()
CHUNK = 5_000  # rows per executemany: a 100,000-test run is not built as one list in memory


def _named(session: Session, model: type[Suite] | type[Runner], name: str) -> int:
    """Insert-or-get: two processes storing the first run of a new suite both get its id."""
    session.execute(
        upsert(session, model)
        .values(name=name, created_at=datetime.now(UTC))
        .on_conflict_do_nothing()
    )
    return session.execute(select(model.id).where(model.name == name)).scalar_one()


def _chunks(rows: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    rows = iter(rows)
    while chunk := list(islice(rows, CHUNK)):
        yield chunk


def _environment(session: Session, env: dict[str, Any] | None) -> int | None:
    """Environments are shared by fingerprint: the same device, driver and versions are the same
    input, which the flaky analysis compares across runs. The fingerprint covers everything the
    runner reported, so a run shows exactly its own (with only some columns in it, a push showed
    another runner's host, and the first writer's details stood for every later run)."""
    if not env:
        return None
    key = {k: env.get(k) for k in ENV_COLUMNS}
    key["device_kind"] = key["device_kind"] or "unknown"
    key["device_count"] = key["device_count"] or 0
    details = {k: v for k, v in env.items() if k not in ENV_COLUMNS}
    whole = json.dumps({**key, "details": details}, sort_keys=True, default=str)
    fingerprint = hashlib.sha256(whole.encode()).hexdigest()
    session.execute(
        upsert(session, Environment)
        .values(fingerprint=fingerprint, details=details, **key)
        .on_conflict_do_nothing()
    )
    return session.execute(
        select(Environment.id).where(Environment.fingerprint == fingerprint)
    ).scalar_one()


class Busy(RuntimeError):
    """The suite already has a running run on this runner."""


def start_run(
    session: Session, record: RunRecord, host: str | None = None, pid: int | None = None
) -> Run:
    """A `running` row, visible while the suite runs and closable if the tracker dies. The
    database allows one running run per suite and runner: a second is refused (Busy)."""
    with _WRITE_LOCK:
        return _start_run(session, record, host, pid)


def _start_run(session: Session, record: RunRecord, host: str | None, pid: int | None) -> Run:
    run = Run(
        host=host,
        pid=pid,
        suite_id=_named(session, Suite, record.suite),
        runner_id=_named(session, Runner, record.runner),
        status=RUN_RUNNING,
        source=record.source,
        commit=record.commit,
        ref=record.ref,
        started_at=record.started_at,
        artifacts=record.artifacts,
        kernel_cache=record.kernel_cache,
    )
    session.add(run)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Busy(f"{record.suite} is already running on {record.runner}") from None
    return run


def drop_run(session: Session, run_id: int) -> None:
    """Remove a run row that only held the suite's lock (an investigation's)."""
    with _WRITE_LOCK:
        session.execute(delete(Run).where(Run.id == run_id))
        session.commit()


def save_investigation(session: Session, investigation: Investigation) -> Investigation:
    with _WRITE_LOCK:
        session.add(investigation)
        session.commit()
        session.refresh(investigation)
        return investigation


def heartbeat(session: Session, run_id: int) -> None:
    with _WRITE_LOCK:
        session.execute(
            update(Run)
            .where(Run.id == run_id, Run.status == RUN_RUNNING)
            .values(heartbeat_at=datetime.now(UTC))
        )
        session.commit()


def save_run(session: Session, record: RunRecord, run: Run | None = None) -> Run:
    """Store every result and attempt of the run, and its status and counts."""
    with _WRITE_LOCK:
        try:
            return _save_run(session, record, run)
        except BaseException:
            session.rollback()
            raise


class OriginConflict(ValueError):
    """A push names a stored run's origin but is not that run."""


def _pushed_run(session: Session, origin: str, origin_run: int, record: RunRecord) -> Run | None:
    """The run stored under this origin, if the push is that run again: same suite, runner,
    start and tests. Anything else under a taken origin is a conflict, never dropped in silence
    (whoever pushed an origin first owned it, and the genuine run later got `created: false`)."""
    found = session.execute(
        select(Run).where(Run.origin == origin, Run.origin_run == origin_run)
    ).scalar_one_or_none()
    if found is None:
        return None
    suite, runner = session.get(Suite, found.suite_id), session.get(Runner, found.runner_id)
    tests = session.execute(
        select(func.count()).select_from(Result).where(Result.run_id == found.id)
    ).scalar_one()
    stored = (suite.name, runner.name, found.started_at.replace(tzinfo=None), tests)
    pushed = (
        record.suite,
        record.runner,
        record.started_at.astimezone(UTC).replace(tzinfo=None),
        len(set(record.collected)),
    )
    if stored != pushed:
        differ = [
            name
            for name, a, b in zip(
                ("suite", "runner", "start", "tests"), stored, pushed, strict=True
            )
            if a != b
        ]
        raise OriginConflict(
            f"origin {origin} run {origin_run} is stored as run {found.id} with another "
            f"{', '.join(differ)}: a second push under an origin must be the same run"
        )
    return found


def save_pushed(
    session: Session, record: RunRecord, origin: str, origin_run: int, host: str | None
) -> tuple[Run, bool]:
    """Store a run pushed from another store, once: a push repeated (its answer was lost, or two
    pushers raced) gets the run stored first, and False."""
    with _WRITE_LOCK:
        if found := _pushed_run(session, origin, origin_run, record):
            return found, False
        run = Run(
            suite_id=_named(session, Suite, record.suite),
            runner_id=_named(session, Runner, record.runner),
            status=RUN_RUNNING,
            source=record.source,
            started_at=record.started_at,
            host=host,
            origin=origin,
            origin_run=origin_run,
        )
        try:
            return _save_run(session, record, run), True
        except IntegrityError:  # another worker stored it between the look and the insert
            session.rollback()
            if found := _pushed_run(session, origin, origin_run, record):
                return found, False
            raise
        except BaseException:
            session.rollback()
            raise


def _save_run(session: Session, record: RunRecord, run: Run | None) -> Run:
    quarantined = quarantine.active(session, record.suite)
    finals, status, counts = summarize(record, quarantined)
    suite_id = _named(session, Suite, record.suite)
    if run is None:
        run = Run(
            suite_id=suite_id,
            runner_id=_named(session, Runner, record.runner),
            status=status,
            source=record.source,
            started_at=record.started_at,
        )
    run.status = status
    run.commit, run.ref = record.commit, record.ref
    run.finished_at = record.finished_at
    run.expected = len(record.collected) or len(finals)
    run.counts = dict(sorted(counts.items()))
    run.quarantined_failures = sum(
        1 for n, o in finals.items() if n in quarantined and (o in FAILING or o == FLAKY)
    )
    run.message = record.message
    run.artifacts = record.artifacts
    run.kernel_cache = record.kernel_cache
    run.environment_id = _environment(session, record.environment)
    session.add(run)
    session.flush()

    for chunk in _chunks(
        {"suite_id": suite_id, "nodeid": n, "file": file_of(n), "kernel": kernel_of(n)}
        for n in finals
    ):
        session.execute(upsert(session, Case).on_conflict_do_nothing(), chunk)
    ids = dict(session.execute(select(Case.nodeid, Case.id).where(Case.suite_id == suite_id)).all())
    grouped = record.by_test()
    for chunk in _chunks(
        {
            "run_id": run.id,
            "test_id": ids[nodeid],
            "outcome": outcome,
            "duration": grouped[nodeid][0].duration if grouped[nodeid] else 0.0,
            "attempts": len(grouped[nodeid]),
            "quarantined": nodeid in quarantined,
        }
        for nodeid, outcome in finals.items()
    ):
        session.execute(insert(Result), chunk)
    for chunk in _chunks(
        {
            "run_id": run.id,
            "test_id": ids[nodeid],
            "number": number,
            "outcome": a.outcome,
            "duration": a.duration,
            "isolated": a.isolated,
            "process": a.process,
            "position": a.position,
            "worker": a.worker,
            "started_at": a.started_at,
            "message": a.message,
            "longrepr": a.longrepr,
        }
        for nodeid, attempts in grouped.items()
        for number, a in enumerate(attempts, 1)
    ):
        session.execute(insert(Attempt), chunk)
    session.commit()
    return run
