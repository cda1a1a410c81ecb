"""Writes: every commit of the tracker is here, one at a time per process. A run's results go in
with a few executemany statements inside one transaction: either the whole run is stored or
nothing is.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from tracker import quarantine
from tracker.db import upsert
from tracker.models import (
    ENV_COLUMNS,
    Alert,
    AlertDelivery,
    Attempt,
    Case,
    Environment,
    Investigation,
    IssueLink,
    Outbox,
    Quarantine,
    Result,
    Run,
    Runner,
    RunRequest,
    RunSlot,
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
    _add_or_busy(session, run, f"{record.suite} is already running on {record.runner}")
    # the run starts once it holds the lock: an insert that waited for the run before it to
    # commit its end would otherwise start before that run had finished
    run.started_at = record.started_at = max(record.started_at, datetime.now(UTC))
    session.commit()
    return run


def _add_or_busy(session: Session, row: Any, why: str) -> None:
    """Insert a row that a unique index allows once (a running run, an open request): Busy when
    another writer got there first."""
    session.add(row)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Busy(why) from None


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


# The other writes: the push outbox, quarantine, `run now` requests, schedule slots, retention.


def enqueue_push(session: Session, run_ids: list[int]) -> None:
    """Queue runs for the central server (again, if they were sent before)."""
    now = datetime.now(UTC)
    with _WRITE_LOCK:
        for run_id in run_ids:
            session.execute(
                upsert(session, Outbox)
                .values(run_id=run_id, queued_at=now, tries=0, next_try_at=now)
                .on_conflict_do_update(
                    index_elements=["run_id"],
                    set_={"pushed_at": None, "next_try_at": now, "tries": 0, "last_error": None},
                )
            )
        session.commit()


def mark_pushed(session: Session, run_id: int, remote_id: int) -> None:
    with _WRITE_LOCK:
        session.execute(
            update(Outbox)
            .where(Outbox.run_id == run_id)
            .values(pushed_at=datetime.now(UTC), remote_id=remote_id, last_error=None)
        )
        session.commit()


def push_failed(
    session: Session, run_id: int, error: str, wait: Callable[[int], timedelta]
) -> int | None:
    """Count a failed try and set the next one `wait(tries)` from now; the tries, or None when
    the run is no longer queued."""
    with _WRITE_LOCK:
        row = session.get(Outbox, run_id)
        if row is None:
            return None
        row.tries += 1
        row.last_error = error[:500]
        row.next_try_at = datetime.now(UTC) + wait(row.tries)
        session.commit()
        return row.tries


def add_alert(
    session: Session,
    key: str,
    where: tuple[str, str, int | None],
    events: list[dict[str, Any]],
    destinations: list[str],
) -> int | None:
    """Keep an alert (`where`: suite, runner, run id) and queue it for `destinations`, once per
    `key`: a second call with the same key (two schedulers, a retried hook) adds nothing and
    returns None."""
    suite, runner, run_id = where
    now = datetime.now(UTC)
    with _WRITE_LOCK:
        found = session.execute(
            upsert(session, Alert)
            .values(key=key, suite=suite, runner=runner, run_id=run_id, created_at=now,
                    events=events)
            .on_conflict_do_nothing(index_elements=["key"])
            .returning(Alert.id)
        ).first()  # fmt: skip
        if found is None:
            session.rollback()
            return None
        for name in destinations:
            session.add(AlertDelivery(alert_id=found[0], destination=name, next_try_at=now))
        session.commit()
        return found[0]


def claim_delivery(
    session: Session, alert_id: int, destination: str, seen: datetime, lease: timedelta
) -> bool:
    """Take an unsent delivery for one send, by moving its next try from `seen` (what the
    sender read) to `lease` from now: of two senders (the web app's worker and the scheduler,
    two processes) only one sees its update take. A sender that dies leaves it for the lease."""
    with _WRITE_LOCK:
        taken = session.execute(
            update(AlertDelivery)
            .where(
                AlertDelivery.alert_id == alert_id,
                AlertDelivery.destination == destination,
                AlertDelivery.sent_at.is_(None),
                AlertDelivery.next_try_at == seen,
            )
            .values(next_try_at=datetime.now(UTC) + lease)
        ).rowcount
        session.commit()
        return taken == 1


def alert_sent(session: Session, alert_id: int, destination: str) -> None:
    with _WRITE_LOCK:
        session.execute(
            update(AlertDelivery)
            .where(AlertDelivery.alert_id == alert_id, AlertDelivery.destination == destination)
            .values(sent_at=datetime.now(UTC), last_error=None)
        )
        session.commit()


def alert_failed(
    session: Session, alert_id: int, destination: str, error: str, wait: Callable[[int], timedelta]
) -> None:
    """Count a failed try and set the next one `wait(tries)` from now, as `push_failed` does."""
    with _WRITE_LOCK:
        row = session.get(AlertDelivery, (alert_id, destination))
        if row is not None:
            row.tries += 1
            row.last_error = error[:500]
            row.next_try_at = datetime.now(UTC) + wait(row.tries)
            session.commit()


def add_issue_link(session: Session, suite: str, subject: str, url: str) -> None:
    with _WRITE_LOCK:
        session.add(IssueLink(suite=suite, subject=subject, url=url, created_at=datetime.now(UTC)))
        session.commit()


def issue_commented(session: Session, link_id: int) -> None:
    with _WRITE_LOCK:
        session.execute(
            update(IssueLink).where(IssueLink.id == link_id).values(commented_at=datetime.now(UTC))
        )
        session.commit()


def quarantine_test(session: Session, suite_id: int, nodeid: str, reason: str, by: str) -> None:
    with _WRITE_LOCK:
        session.execute(
            upsert(session, Case).on_conflict_do_nothing(),
            [{"suite_id": suite_id, "nodeid": nodeid, "file": file_of(nodeid),
              "kernel": kernel_of(nodeid)}],
        )  # fmt: skip
        test_id = session.execute(
            select(Case.id).where(Case.suite_id == suite_id, Case.nodeid == nodeid)
        ).scalar_one()
        session.execute(
            upsert(session, Quarantine)
            .values(test_id=test_id, reason=reason[:500], since=datetime.now(UTC), by=by[:100])
            .on_conflict_do_update(index_elements=["test_id"], set_={"reason": reason[:500]})
        )
        session.commit()


def release_test(session: Session, suite_id: int, nodeid: str) -> bool:
    """Take a test out of quarantine; whether it was in."""
    with _WRITE_LOCK:
        test_ids = select(Case.id).where(Case.suite_id == suite_id, Case.nodeid == nodeid)
        gone = session.execute(delete(Quarantine).where(Quarantine.test_id.in_(test_ids)))
        session.commit()
        return bool(gone.rowcount)


def queue_request(session: Session, suite: str, runner: str) -> RunRequest:
    """A `run now` request; Busy when one is already queued or started (a partial unique index
    holds this against another web worker queueing one at the same moment)."""
    request = RunRequest(suite=suite, runner=runner, state="queued", requested_at=datetime.now(UTC))
    with _WRITE_LOCK:
        _add_or_busy(session, request, f"{suite} is already running or queued on {runner}")
    return request


def claim_request(session: Session, runner: str, by: str) -> tuple[int, str] | None:
    """The oldest queued request of this runner, taken by whichever scheduler process changes
    its state first: (its id, its suite), or None."""
    with _WRITE_LOCK:
        request = session.execute(
            select(RunRequest)
            .where(RunRequest.state == "queued", RunRequest.runner == runner)
            .order_by(RunRequest.id)
            .limit(1)
        ).scalar()
        if request is None:
            return None
        taken = (request.id, request.suite)
        claimed = session.execute(
            update(RunRequest)
            .where(RunRequest.id == request.id, RunRequest.state == "queued")
            .values(state="started", claimed_by=by, claimed_at=datetime.now(UTC))
        ).rowcount
        session.commit()
    return taken if claimed else None


def end_requests(session: Session, ids: list[int], run_id: int | None = None) -> None:
    with _WRITE_LOCK:
        session.execute(
            update(RunRequest).where(RunRequest.id.in_(ids)).values(state="done", run_id=run_id)
        )
        session.commit()


def claim_slot(session: Session, suite: str, runner: str, slot: datetime, by: str) -> bool:
    """Claim a scheduled firing: the first scheduler process to get here runs it."""
    with _WRITE_LOCK:
        session.add(
            RunSlot(suite=suite, runner=runner, slot_at=slot, claimed_at=datetime.now(UTC),
                    claimed_by=by)
        )  # fmt: skip
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
            return False
    return True


def prune(session: Session, cutoff: datetime) -> tuple[int, int]:
    """Drop tests' results and attempts of runs older than `cutoff`; keep the runs and their
    counts, and the whole of a run still waiting to be pushed. (results, attempts) dropped."""
    unsent = select(Outbox.run_id).where(Outbox.pushed_at.is_(None))
    old = select(Run.id).where(Run.started_at < cutoff, Run.id.not_in(unsent))
    with _WRITE_LOCK:
        attempts = session.execute(delete(Attempt).where(Attempt.run_id.in_(old))).rowcount
        results = session.execute(delete(Result).where(Result.run_id.in_(old))).rowcount
        session.commit()
    return results, attempts
