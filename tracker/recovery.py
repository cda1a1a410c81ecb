"""Runs whose owner died: a tracker killed mid-run leaves its run `running` and its run-now
requests claimed. Whoever starts next (a command, `serve`, the scheduler) closes them, keeping
what the run's reportlogs had written."""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select
from sqlmodel import Session

from tracker import queries, store
from tracker.config import Settings
from tracker.db import session_scope
from tracker.models import Run, Runner, RunRequest, Suite
from tracker.records import RUN_INTERRUPTED, RUN_RUNNING, RunRecord
from tracker.runner.artifacts import read_back
from tracker.runner.process import kill_leftovers

log = logging.getLogger("tracker")
HOST = socket.gethostname()
LAPSE = timedelta(minutes=2)  # a heartbeat this old means the run's owner is gone
RECOVER_EVERY_S = 30  # how often `serve` and the scheduler look for runs whose owner died
INVESTIGATION = "investigation"  # the source of a run row that only holds the suite's lock


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _record_from_artifacts(run: Run, suite: str, runner: str, reason: str) -> RunRecord:
    record = RunRecord(
        suite=suite,
        runner=runner,
        source=run.source,
        started_at=run.started_at,
        finished_at=datetime.now(UTC),
        commit=run.commit,
        ref=run.ref,
        status=RUN_INTERRUPTED,
        message=reason,
        artifacts=run.artifacts,
    )
    record.collected, record.attempts = read_back(run.artifacts)
    return record


def close_interrupted(session: Session, run: Run | None, reason: str) -> None:
    if run is None or run.status != RUN_RUNNING:
        return
    if run.source == INVESTIGATION:  # it only held the lock: nothing to keep
        store.drop_run(session, run.id)
        return
    suite = session.execute(select(Suite.name).where(Suite.id == run.suite_id)).scalar_one()
    runner = session.execute(select(Runner.name).where(Runner.id == run.runner_id)).scalar_one()
    record = _record_from_artifacts(run, suite, runner, reason)
    store.save_run(session, record, run)
    log.warning(
        "run %s %s on %s: closed as interrupted (%s); %d results recovered",
        run.id,
        suite,
        runner,
        reason,
        len(record.attempts),
    )


def _owner_gone(run: Run, now: datetime) -> bool:
    """On this host a dead pid says so at once; anywhere, a heartbeat that lapsed does (a run
    from before heartbeats: one older than any run may last)."""
    if run.host == HOST and not _alive(run.pid):
        return True
    last = run.heartbeat_at or run.started_at
    return now - last > (LAPSE if run.heartbeat_at else timedelta(days=2))


def recover(settings: Settings) -> list[int]:
    """Close every `running` run whose tracker is gone, keeping the results its reportlogs
    hold, and kill what it left running on this host."""
    now = datetime.now(UTC)
    closed = []
    with session_scope(settings.database_url) as session:
        for run in session.execute(select(Run).where(Run.status == RUN_RUNNING)).scalars():
            if (run.pid == os.getpid() and run.host == HOST) or not _owner_gone(run, now):
                continue
            if run.host == HOST and run.artifacts:
                kill_leftovers(Path(run.artifacts))
            close_interrupted(
                session,
                run,
                f"the tracker (pid {run.pid} on {run.host}) stopped "
                "during the run; the results it had written are kept",
            )
            closed.append(run.id)
        _end_orphaned_requests(session, now)
    return closed


def _end_orphaned_requests(session: Session, now: datetime) -> None:
    """A `run now` request taken by a scheduler that died stays `started`, and every later
    request would be refused as busy: end it once its claimer is gone (a dead pid here; elsewhere
    no running run of its suite and runner, LAPSE after the claim)."""
    ended: list[int] = []
    for request in session.execute(
        select(RunRequest).where(RunRequest.state == "started")
    ).scalars():
        host, _, pid = (request.claimed_by or "").rpartition(":")
        if host == HOST and pid.isdigit():
            gone = not _alive(int(pid))
        else:
            claimed = request.claimed_at or request.requested_at
            gone = now - claimed > LAPSE and not queries.running(
                session, request.suite, request.runner
            )
        if gone:
            ended.append(request.id)
            who = request.claimed_by or "unknown"
            log.warning("run-now request %s ended: its scheduler (%s) is gone", request.id, who)
    if ended:
        store.end_requests(session, ended)


def keep_recovering(settings: Settings, stop: threading.Event) -> None:
    """`recover` now and every RECOVER_EVERY_S until `stop`: a survivor must not wait for a
    restart to see that another tracker's run died."""
    while True:
        try:
            recover(settings)
        except Exception:  # a locked or unreachable database now is no reason to stop trying
            log.exception("closing stale runs failed")
        if stop.wait(RECOVER_EVERY_S):
            return
