"""Running a suite and storing it, the same way from the CLI, the scheduler and `run now`; and
closing runs that a killed tracker left `running`, with what their reportlogs had written."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select
from sqlmodel import Session

from tracker import push, queries, store
from tracker.analysis.report import Scope
from tracker.config import Settings, SuiteConfig
from tracker.db import session_scope
from tracker.models import Investigation, Run, Runner, RunRequest, Suite
from tracker.records import RUN_INTERRUPTED, RUN_RUNNING, RunRecord, Sample
from tracker.runner import bisect, polluter
from tracker.runner.artifacts import read_back
from tracker.runner.execute import Reporter, execute, job_for, run_folder
from tracker.runner.probe import probe
from tracker.runner.process import end_run, kill_all, kill_leftovers

log = logging.getLogger("tracker")
HOST = socket.gethostname()
HEARTBEAT_S = 10  # a running run's owner writes its heartbeat this often
LAPSE = timedelta(minutes=2)  # ... so a heartbeat this old means the owner is gone
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
    return saved


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


@contextlib.contextmanager
def _investigation(settings: Settings, suite: SuiteConfig) -> Iterator[tuple[Path, dict]]:
    """The folder and the probed environment of an investigation on this runner, holding the
    suite's run lock all along: a nightly run cannot start beside it, and it refuses to start
    beside one (store.Busy). Its run row only holds the lock and is gone afterwards."""
    found = probe(suite, settings.runner)
    if found.problem:
        raise store.Busy(f"the device is not usable: {found.problem}")
    started = datetime.now(UTC)
    workdir = run_folder(settings, "investigations", suite.name, started)
    record = RunRecord(
        suite=suite.name,
        runner=settings.runner.name,
        source=INVESTIGATION,
        started_at=started,
        artifacts=str(workdir),
    )
    with session_scope(settings.database_url) as session:
        lock = store.start_run(session, record, HOST, os.getpid()).id
    try:
        yield workdir, found.env
    finally:
        end_run(workdir)  # what its probes left behind, and their cgroup
        with session_scope(settings.database_url) as session:
            store.drop_run(session, lock)


def _keep(
    settings: Settings,
    kind: str,
    test_id: int,
    run_id: int | None,
    started: datetime,
    verdict: str,
    details: dict,
) -> None:
    with session_scope(settings.database_url) as session:
        store.save_investigation(
            session,
            Investigation(
                test_id=test_id,
                kind=kind,
                run_id=run_id,
                started_at=started,
                finished_at=datetime.now(UTC),
                verdict=verdict,
                details=details,
            ),
        )


def find_polluter(
    settings: Settings,
    suite: SuiteConfig,
    nodeid: str,
    run_id: int | None = None,
    until: float | None = None,
) -> polluter.Search:
    """Replay the process order of the test's failing run and search for its polluter, in
    fresh pytest processes on this runner. Stored with its evidence."""
    with session_scope(settings.database_url) as session:
        source_run, test_id, before = queries.replay_order(session, suite.name, nodeid, run_id)
    started, tries = datetime.now(UTC), settings.analysis.polluter_tries
    with _investigation(settings, suite) as (workdir, env):
        job = job_for(settings, suite, workdir, time.monotonic() + suite.run_timeout, env)
        result = polluter.search(nodeid, before, polluter.in_processes(job, until), tries)
    details = {**result.as_dict(), "candidates": len(before), "tries": tries}
    _keep(settings, "polluter", test_id, source_run, started, result.verdict, details)
    log.info("polluter search for %s: %s %s", nodeid, result.verdict, result.culprits)
    return result


def search_suspects(settings: Settings, suite: SuiteConfig, run_id: int) -> int:
    """After a run: polluter searches for its new order-dependent suspects, within the nightly
    budget (`analysis.polluter_budget_minutes`; 0 is off). Returns how many were searched."""
    minutes = settings.analysis.polluter_budget_minutes
    if not minutes:
        return 0
    until = time.monotonic() + 60 * minutes
    with session_scope(settings.database_url) as session:
        suspects = queries.order_suspects(session, run_id)
    done = 0
    for nodeid in suspects:
        try:
            find_polluter(settings, suite, nodeid, run_id, until)
        except polluter.OutOfTime:
            log.info("polluter budget spent after %d of %d suspects", done, len(suspects))
            break
        except (queries.NotFound, store.Busy) as exc:
            log.warning("polluter search for %s skipped: %s", nodeid, exc)
            continue
        except Exception:  # the run is stored: a failed search must not fail the night
            log.exception("polluter search for %s failed", nodeid)
            break
        done += 1
    return done


def find_first_bad(
    settings: Settings,
    suite: SuiteConfig,
    nodeid: str,
    good: str | None = None,
    bad: str | None = None,
) -> bisect.Bisect:
    """Bisect the commits between the test's last good and a bad commit (by default what the
    analysis says: last good, broken since), in a scratch worktree of the suite's checkout.
    Stored with every step."""
    with session_scope(settings.database_url) as session:
        test_id = queries.test_ids(session, suite.name, [nodeid]).get(nodeid)
        if test_id is None:
            raise queries.NotFound(f"{suite.name} has never recorded {nodeid}")
        stats = Scope(session, settings, suite.name).stats().get(test_id)
    good = good or (stats.last_good if stats else None)
    bad = bad or (stats.broken_since if stats else None)
    if not good or not bad:
        raise bisect.BisectError(
            f"{nodeid} is not broken since a commit in the window: give --good and --bad"
        )
    repo = Path(suite.path)
    good, commits = bisect.commit_range(repo, good, bad)
    if not commits:
        raise bisect.BisectError(f"no commit after {good[:12]} up to {bad}: nothing to bisect")
    started, tries = datetime.now(UTC), settings.analysis.polluter_tries
    with _investigation(settings, suite) as (workdir, env), bisect.worktree(repo) as tree:
        job = job_for(
            settings,
            suite.model_copy(update={"path": tree}),
            workdir,
            time.monotonic() + suite.run_timeout,
            env,
        )
        verdict_of = bisect.in_processes(job, tree, nodeid, tries)
        ends = [verdict_of(good), verdict_of(commits[-1])]  # both ends first, as git bisect
        bisect.check_ends(*ends)
        suspects, steps = bisect.bisect(commits, verdict_of)
        steps = [*ends, *steps]
    result = bisect.Bisect(nodeid, bisect.NO_RANGE, steps=steps)
    if len(suspects) == 1:
        result.verdict, result.first_bad = bisect.FOUND, suspects[0]
        result.subject = bisect.subject(repo, suspects[0])
    elif suspects:
        result.verdict, result.candidates = bisect.RANGE, suspects
    details = {**result.as_dict(), "good": good, "bad": bad, "tries": tries}
    _keep(settings, "bisect", test_id, None, started, result.verdict, details)
    return result


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
