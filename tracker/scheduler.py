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

from tracker import alerts, push, store
from tracker.config import Settings
from tracker.db import get_engine, migrate, session_scope
from tracker.recovery import HOST, RECOVER_EVERY_S, recover
from tracker.schedule import job_id, latest_slot, next_runs, trigger
from tracker.service import log, run_and_store

__all__ = ["build", "job_id", "latest_slot", "next_runs", "trigger"]

_settings: Settings | None = None  # the jobs run in the process that started the scheduler


def claim_slot(settings: Settings, suite: str, slot: datetime) -> bool:
    with session_scope(settings.database_url) as session:
        return store.claim_slot(session, suite, settings.runner.name, slot, _me())


def _me() -> str:
    return f"{HOST}:{os.getpid()}"


def _configured() -> Settings:
    """The settings of the process that started the scheduler: the jobs are stored by name and
    suite only, so they find their settings here."""
    if _settings is None:
        raise RuntimeError("a scheduler job runs only in the process that started the scheduler")
    return _settings


def scheduled_run(suite_name: str) -> None:
    """The job: claim this firing's slot, then run the suite."""
    settings = _configured()
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
    settings = _configured()
    with session_scope(settings.database_url) as session:
        claimed = store.claim_request(session, settings.runner.name, _me())
    if claimed is None:
        return
    request_id, suite_name = claimed
    run_id = None
    try:
        run_id = run_and_store(settings, settings.suite(suite_name), why=f"request {request_id}").id
    except store.Busy as exc:
        log.warning("request %s: not started: %s", request_id, exc)
    finally:
        with session_scope(settings.database_url) as session:
            store.end_requests(session, [request_id], run_id)


def prune() -> None:
    """Drop tests' results and attempts of runs older than the retention; keep runs and counts,
    and the whole of a run still waiting to be pushed."""
    settings = _configured()
    days = settings.scheduler.retention_days
    if not days:
        return
    cutoff = datetime.now(UTC) - timedelta(days=days)
    with session_scope(settings.database_url) as session:
        results, attempts = store.prune(session, cutoff)
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
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # its every firing is not news
    migrate(settings.database_url)
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
    periodic = [
        ("poll-requests", poll_requests, [], settings.scheduler.poll_seconds),
        ("recover", recover, [settings], RECOVER_EVERY_S),
        ("alerts", alerts.tick, [settings], RECOVER_EVERY_S),
    ]
    if settings.push.url:
        periodic.append(("push", push.send, [settings, True], RECOVER_EVERY_S))
    for jid, func, args, seconds in periodic:
        scheduler.add_job(
            func,
            "interval",
            seconds=seconds,
            args=args,
            id=jid,
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
