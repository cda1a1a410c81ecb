"""Investigations that run the suite's tests again: the polluter search behind an
order-dependent failure and the bisect for a broken test's first bad commit. Each holds the
suite's lock (a run row of source `investigation`) so that no nightly run shares its device."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from tracker import alerts, queries, store
from tracker.analysis.report import Scope
from tracker.config import Settings, SuiteConfig
from tracker.db import session_scope
from tracker.models import Investigation
from tracker.records import RunRecord
from tracker.recovery import HOST, INVESTIGATION
from tracker.runner import bisect, polluter
from tracker.runner.execute import job_for, run_folder
from tracker.runner.probe import probe
from tracker.runner.process import end_run

log = logging.getLogger("tracker")


@contextlib.contextmanager
def _investigation(settings: Settings, suite: SuiteConfig) -> Iterator[Path]:
    """The folder of an investigation on this runner, once the probe has found the device fit,
    holding the suite's run lock all along: a nightly run cannot start beside it, and it
    refuses to start beside one (store.Busy). Its run row only holds the lock and is gone
    afterwards."""
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
        yield workdir
    finally:
        end_run(workdir)  # what its probes left behind, and their cgroup
        with session_scope(settings.database_url) as session:
            store.drop_run(session, lock)


def _keep(
    settings: Settings,
    suite: str,
    kind: str,
    test_id: int,
    run_id: int | None,
    started: datetime,
    verdict: str,
    details: dict,
) -> None:
    """Store the investigation, and tell whoever wants to know what it found."""
    with session_scope(settings.database_url) as session:
        kept = store.save_investigation(
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
    alerts.investigated(settings, suite, kept)


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
    with _investigation(settings, suite) as workdir:
        job = job_for(settings, suite, workdir, time.monotonic() + suite.run_timeout)
        result = polluter.search(nodeid, before, polluter.in_processes(job, until), tries)
    details = {**result.as_dict(), "candidates": len(before), "tries": tries}
    _keep(settings, suite.name, "polluter", test_id, source_run, started, result.verdict, details)
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
    with _investigation(settings, suite) as workdir, bisect.worktree(repo) as tree:
        job = job_for(
            settings,
            suite.model_copy(update={"path": tree}),
            workdir,
            time.monotonic() + suite.run_timeout,
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
    _keep(settings, suite.name, "bisect", test_id, None, started, result.verdict, details)
    return result
