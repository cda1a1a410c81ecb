"""Running a suite and storing it, the same way from the CLI, the scheduler and `run now`. What
a killed tracker leaves behind is `recovery`'s; polluter searches and bisects, `investigate`'s."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from tracker import alerts, push, queries, store
from tracker.config import Settings, SuiteConfig
from tracker.db import session_scope
from tracker.investigate import search_suspects
from tracker.models import Run
from tracker.records import RunRecord, Sample
from tracker.recovery import HOST, close_interrupted
from tracker.runner.execute import Reporter, execute
from tracker.runner.process import kill_all

log = logging.getLogger("tracker")
HEARTBEAT_S = 10  # a running run's owner writes its heartbeat this often (recovery.LAPSE)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "no results"


def history(settings: Settings, suite: SuiteConfig) -> Callable[[], list[Sample]]:
    """What the runner plans from: its recent attempts of the suite, read when it asks."""

    def read() -> list[Sample]:
        with session_scope(settings.database_url) as session:
            return queries.recent_attempts(session, suite.name, settings.runner.name)

    return read


def run_and_store(
    settings: Settings, suite: SuiteConfig, reporter: Reporter | None = None, why: str = "cli"
) -> Run:
    """One run of `suite`, stored. Raises store.Busy while the suite runs on this runner."""
    url = settings.database_url
    started: dict[str, Run] = {}
    done = threading.Event()

    def beat(run_id: int) -> None:
        while not done.wait(HEARTBEAT_S):
            with session_scope(url) as session:
                store.heartbeat(session, run_id)

    def on_start(record: RunRecord) -> None:
        with session_scope(url) as session:
            started["run"] = store.start_run(session, record, HOST, os.getpid())
        threading.Thread(target=beat, args=(started["run"].id,), daemon=True).start()
        log.info("run %s %s on %s: started (%s)", started["run"].id, suite.name, record.runner, why)

    try:
        record = execute(settings, suite, reporter, on_start, history(settings, suite))
    except BaseException as exc:
        done.set()
        kill_all(final=not isinstance(exc, Exception))  # Ctrl-C or exit: the process ends
        if "run" in started:  # Ctrl-C or a crash of ours: keep what the reportlogs hold
            with session_scope(url) as session:
                close_interrupted(
                    session,
                    session.get(Run, started["run"].id),
                    f"the tracker stopped during the run ({why})",
                )
        raise
    done.set()
    with session_scope(url) as session:
        saved = store.save_run(session, record, started.get("run"))
    log.info(
        "run %s %s on %s: %s (%s) in %.0f s",
        saved.id,
        suite.name,
        record.runner,
        saved.status,
        _counts(saved.counts),
        (saved.finished_at - saved.started_at).total_seconds() if saved.finished_at else 0,
    )
    push.push_after_run(settings, saved.id)
    search_suspects(settings, suite, saved.id)
    alerts.after_run(settings, saved.id)
    return saved
