"""Writes. A run's results go in with a few executemany statements inside one transaction: either
the whole run is stored or nothing is.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from tracker import quarantine
from tracker.models import Attempt, Case, Environment, Result, Run, Runner, Suite
from tracker.records import (
    FAILING,
    FLAKY,
    RUN_RUNNING,
    RunRecord,
    file_of,
    kernel_of,
    summarize,
)

ENV_COLUMNS = (
    "device_kind",
    "device_model",
    "device_count",
    "driver",
    "cann",
    "python",
    "torch",
    "torch_npu",
    "triton",
    "suite_package",
)


def _named(session: Session, model: type[Suite] | type[Runner], name: str) -> int:
    row = session.execute(select(model).where(model.name == name)).scalars().first()
    if row is None:
        row = model(name=name, created_at=datetime.now(UTC))
        session.add(row)
        session.flush()
    return row.id


def _environment(session: Session, env: dict[str, Any] | None) -> int | None:
    """Environments are shared by fingerprint: the same device, driver and versions are the same
    input, which the flaky analysis compares across runs."""
    if not env:
        return None
    key = {k: env.get(k) for k in ENV_COLUMNS}
    key["device_kind"] = key["device_kind"] or "unknown"
    key["device_count"] = key["device_count"] or 0
    fingerprint = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    found = session.execute(
        select(Environment.id).where(Environment.fingerprint == fingerprint)
    ).scalar()
    if found is not None:
        return found
    details = {k: v for k, v in env.items() if k not in ENV_COLUMNS}
    row = Environment(fingerprint=fingerprint, details=details, **key)
    session.add(row)
    session.flush()
    return row.id


class Busy(RuntimeError):
    """The suite already has a running run on this runner."""


def start_run(
    session: Session, record: RunRecord, host: str | None = None, pid: int | None = None
) -> Run:
    """A `running` row, visible while the suite runs and closable if the tracker dies. The
    database allows one running run per suite and runner: a second is refused (Busy)."""
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
    )
    session.add(run)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Busy(f"{record.suite} is already running on {record.runner}") from None
    return run


def save_run(session: Session, record: RunRecord, run: Run | None = None) -> Run:
    """Store every result and attempt of the run, and its status and counts."""
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
    run.environment_id = _environment(session, record.environment)
    session.add(run)
    session.flush()

    if finals:
        session.execute(
            sqlite_insert(Case).on_conflict_do_nothing(),
            [
                {"suite_id": suite_id, "nodeid": n, "file": file_of(n), "kernel": kernel_of(n)}
                for n in finals
            ],
        )
    ids = dict(session.execute(select(Case.nodeid, Case.id).where(Case.suite_id == suite_id)).all())
    grouped = record.by_test()
    result_rows, attempt_rows = [], []
    for nodeid, outcome in finals.items():
        attempts = grouped[nodeid]
        result_rows.append(
            {
                "run_id": run.id,
                "test_id": ids[nodeid],
                "outcome": outcome,
                "duration": attempts[0].duration if attempts else 0.0,
                "attempts": len(attempts),
                "quarantined": nodeid in quarantined,
            }
        )
        attempt_rows.extend(
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
            for number, a in enumerate(attempts, 1)
        )
    if result_rows:
        session.execute(insert(Result), result_rows)
    if attempt_rows:
        session.execute(insert(Attempt), attempt_rows)
    session.commit()
    return run
