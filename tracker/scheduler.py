"""The nightly scheduler: one APScheduler job per configured suite (on this runner) from its cron,
in the configured time zone, kept in the database so that a run missed while the host was down
still starts on boot (within `misfire_grace_seconds`, coalesced to one run).

Three locks keep runs from piling up: APScheduler's `max_instances=1` within a process; a
`run_slot` row per firing, claimed by the first scheduler process that gets to it (two schedulers
on one database make one run per slot); and the database's one-running-run-per-suite-and-runner
index, which also holds against `tracker run` and `run now`.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from tracker import push, store
from tracker.config import Settings, SuiteConfig, cron_trigger
from tracker.db import get_engine, session_scope
from tracker.models import Attempt, Outbox, Result, Run, RunRequest, RunSlot
from tracker.service import HOST, RECOVER_EVERY_S, log, recover, run_and_store

_settings: Settings | None = None  # the jobs run in the process that started the scheduler


def job_id(suite: str, runner: str) -> str:
    return f"run:{suite}:{runner}"


def trigger(suite: SuiteConfig, tz: str) -> CronTrigger:
    return cron_trigger(suite.schedule, tz)


def latest_slot(suite: SuiteConfig, tz: str, now: datetime, grace: int) -> datetime | None:
    """The newest firing time of the suite's cron at or before `now` (within the grace)."""
    cron = trigger(suite, tz)
    slot, t = None, now - timedelta(seconds=grace)
    while (nxt := cron.get_next_fire_time(slot, t)) is not None and nxt <= now:
        slot, t = nxt, nxt + timedelta(microseconds=1)
    return slot


def claim_slot(settings: Settings, suite: str, slot: datetime) -> bool:
    with session_scope(settings.database_url) as session:
        session.add(
            RunSlot(
                suite=suite,
                runner=settings.runner.name,
                slot_at=slot,
                claimed_at=datetime.now(UTC),
                claimed_by=f"{HOST}:{os.getpid()}",
            )
        )
        try:
            session.commit()
        except IntegrityError:
            return False
    return True


def scheduled_run(suite_name: str) -> None:
    """The job: claim this firing's slot, then run the suite."""
    settings = _settings
    assert settings is not None, "the scheduler sets the settings before it starts"
    suite = settings.suite(suite_name)
    now = datetime.now(UTC)
    slot = latest_slot(suite, settings.timezone, now, settings.scheduler.misfire_grace_seconds)
    if slot is None or not claim_slot(settings, suite_name, slot):
        log.info("%s: slot %s taken by another scheduler, skipped", suite_name, slot)
        return
    try:
        run_and_store(settings, suite, why=f"scheduled {slot.isoformat()}")
    except store.Busy as exc:
        log.warning("%s: not started: %s", suite_name, exc)


def poll_requests() -> None:
    """Start the oldest queued `run now` request, if any."""
    settings = _settings
    assert settings is not None
    with session_scope(settings.database_url) as session:
        request = session.execute(
            select(RunRequest)
            .where(RunRequest.state == "queued", RunRequest.runner == settings.runner.name)
            .order_by(RunRequest.id)
            .limit(1)
        ).scalar()
        if request is None:
            return
        request_id, suite_name = request.id, request.suite
        # claimed by whichever scheduler process changes its state first
        claimed = session.execute(
            update(RunRequest)
            .where(RunRequest.id == request_id, RunRequest.state == "queued")
            .values(
                state="started", claimed_by=f"{HOST}:{os.getpid()}", claimed_at=datetime.now(UTC)
            )
        ).rowcount
        session.commit()
    if not claimed:
        return
    run_id = None
    try:
        run_id = run_and_store(settings, settings.suite(suite_name), why=f"request {request_id}").id
    except store.Busy as exc:
        log.warning("request %s: not started: %s", request_id, exc)
    finally:
        with session_scope(settings.database_url) as session:
            session.execute(
                update(RunRequest)
                .where(RunRequest.id == request_id)
                .values(state="done", run_id=run_id)
            )
            session.commit()


def prune() -> None:
    """Drop tests' results and attempts of runs older than the retention; keep runs and counts,
    and the whole of a run still waiting to be pushed."""
    settings = _settings
    assert settings is not None
    days = settings.scheduler.retention_days
    if not days:
        return
    cutoff = datetime.now(UTC) - timedelta(days=days)
    unsent = select(Outbox.run_id).where(Outbox.pushed_at.is_(None))  # kept until pushed
    with session_scope(settings.database_url) as session:
        old = select(Run.id).where(Run.started_at < cutoff, Run.id.not_in(unsent))
        attempts = session.execute(delete(Attempt).where(Attempt.run_id.in_(old))).rowcount
        results = session.execute(delete(Result).where(Result.run_id.in_(old))).rowcount
        session.commit()
    if results:
        log.info("pruned %d results and %d attempts older than %d days", results, attempts, days)


def build(
    settings: Settings, scheduler_cls: type[BaseScheduler] = BackgroundScheduler
) -> BaseScheduler:
    """A started-but-paused scheduler holding one job per scheduled suite; `resume()` runs it.

    A stored job whose cron is unchanged is kept as it is, so its next run time (perhaps in the
    past, if the host was down) survives the restart and fires once within the grace."""
    global _settings
    _settings = settings
    get_engine(settings.database_url)
    recover(settings)
    scheduler = scheduler_cls(
        jobstores={
            "default": SQLAlchemyJobStore(engine=get_engine(settings.database_url)),
            "local": MemoryJobStore(),
        },
        timezone=ZoneInfo(settings.timezone),
        job_defaults={
            "coalesce": True,
            "max_instances": 1,
            "misfire_grace_time": settings.scheduler.misfire_grace_seconds,
        },
    )
    scheduler.start(paused=True)
    wanted = {}
    for suite in settings.suites:
        if suite.schedule:
            wanted[job_id(suite.name, settings.runner.name)] = suite
    for job in scheduler.get_jobs(jobstore="default"):
        if (
            job.id.startswith("run:")
            and job.id.endswith(f":{settings.runner.name}")
            and job.id not in wanted
        ):
            job.remove()  # a suite no longer scheduled here
    for jid, suite in wanted.items():
        cron = trigger(suite, settings.timezone)
        existing = scheduler.get_job(jid, jobstore="default")
        if existing is not None and str(existing.trigger) == str(cron):
            continue
        scheduler.add_job(
            scheduled_run,
            cron,
            id=jid,
            name=f"{suite.name} nightly",
            args=[suite.name],
            jobstore="default",
            replace_existing=True,
        )
    scheduler.add_job(
        poll_requests,
        "interval",
        seconds=settings.scheduler.poll_seconds,
        id="poll-requests",
        jobstore="local",
        replace_existing=True,
    )
    scheduler.add_job(
        recover,
        "interval",
        seconds=RECOVER_EVERY_S,
        args=[settings],
        id="recover",
        jobstore="local",
        replace_existing=True,
    )
    if settings.push.url:
        scheduler.add_job(
            push.send,
            "interval",
            seconds=RECOVER_EVERY_S,
            args=[settings, True],
            id="push",
            jobstore="local",
            replace_existing=True,
        )
    scheduler.add_job(
        prune,
        "interval",
        hours=6,
        id="prune",
        jobstore="local",
        replace_existing=True,
        next_run_time=datetime.now(UTC),
    )
    return scheduler


def next_runs(settings: Settings) -> dict[str, datetime | None]:
    """The next firing of each scheduled suite, as the stored job says (or the cron, if none)."""
    tz = ZoneInfo(settings.timezone)
    now = datetime.now(tz)
    out: dict[str, datetime | None] = {}
    jobs = SQLAlchemyJobStore(engine=get_engine(settings.database_url))
    for suite in settings.suites:
        if not suite.schedule:
            continue
        try:
            job = jobs.lookup_job(job_id(suite.name, settings.runner.name))
        except (OperationalError, ProgrammingError):  # no scheduler ever started on this database
            job = None
        out[suite.name] = (
            job.next_run_time
            if job
            else trigger(suite, settings.timezone).get_next_fire_time(None, now)
        )
    return out


logging.getLogger("apscheduler").setLevel(logging.WARNING)
