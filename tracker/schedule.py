"""What the schedule says, without running anything: each suite's job id, cron trigger, latest
slot and next run. The pages and the API read these; only `scheduler` (which imports the runner)
acts on them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy.exc import OperationalError, ProgrammingError

from tracker.config import Settings, SuiteConfig, cron_trigger
from tracker.db import get_engine


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


def slot_before(suite: SuiteConfig, tz: str, until: datetime) -> datetime | None:
    """The suite's newest firing at or before `until`, looked for in a window that doubles from
    10 minutes up to 16 days: a cron walks forward only, and walking 8 days of a test's
    every-3-seconds cron (230,000 firings) took 8 s of CPU at each check of each scheduler."""
    window = timedelta(minutes=10)
    while window <= timedelta(days=16):
        slot = latest_slot(suite, tz, until, int(window.total_seconds()))
        if slot is not None:
            return slot
        window *= 2
    return None


def overdue(last_started: str | None, settings: Settings, now: datetime) -> int | None:
    """Whole days since `last_started` (a run's ISO time) when that is longer than
    `missed_after_hours` (at least 1): the runner has missed a night. None while it is not
    overdue, or never ran."""
    if last_started is None:
        return None
    age = now - datetime.fromisoformat(last_started)
    if age < timedelta(hours=settings.scheduler.missed_after_hours):
        return None
    return max(1, age.days)


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
