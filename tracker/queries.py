"""Reads for the CLI (and later the web): runs and their results in the contract's JSON shape."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, select
from sqlmodel import Session

from tracker.models import (
    Alert,
    AlertDelivery,
    Attempt,
    Case,
    Environment,
    Investigation,
    IssueLink,
    Quarantine,
    Result,
    Run,
    Runner,
    RunRequest,
    StoreMeta,
    Suite,
)
from tracker.records import (
    FAILING,
    FLAKY,
    INTERRUPTED,
    NOT_RUN,
    PASSED,
    RUN_FORMAT,
    RUN_RUNNING,
    UNCONFIRMED,
    Sample,
)


class NotFound(LookupError):
    pass


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _run_query():
    return (
        select(Run, Suite.name, Runner.name)
        .join(Suite, Run.suite_id == Suite.id)
        .join(Runner, Run.runner_id == Runner.id)
    )


def run_dict(run: Run, suite: str, runner: str) -> dict[str, Any]:
    duration = (run.finished_at - run.started_at).total_seconds() if run.finished_at else None
    return {
        "id": run.id,
        "status": run.status,
        "suite": suite,
        "runner": runner,
        "commit": run.commit,
        "ref": run.ref,
        "source": run.source,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration": round(duration, 3) if duration is not None else None,
        "expected": run.expected,
        "counts": run.counts,
        "quarantined_failures": run.quarantined_failures,
        "message": run.message,
        "artifacts": run.artifacts,
        "kernel_cache": run.kernel_cache,
        "host": run.host,
    }


def list_runs(
    session: Session, suite: str | None = None, runner: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    query = _run_query().order_by(Run.started_at.desc(), Run.id.desc()).limit(limit)
    if suite:
        query = query.where(Suite.name == suite)
    if runner:
        query = query.where(Runner.name == runner)
    return [run_dict(*row) for row in session.execute(query).all()]


def latest_run_id(session: Session, suite: str | None = None) -> int:
    runs = list_runs(session, suite=suite, limit=1)
    if not runs:
        raise NotFound("no runs stored yet" + (f" for suite {suite!r}" if suite else ""))
    return runs[0]["id"]


def run_info(session: Session, run_id: int) -> dict[str, Any]:
    """The run with its environment, without its results."""
    row = session.execute(_run_query().where(Run.id == run_id)).first()
    if row is None:
        raise NotFound(f"no run with id {run_id}")
    run = run_dict(*row)
    env = session.get(Environment, row[0].environment_id) if row[0].environment_id else None
    run["environment"] = environment_dict(env)
    # what names the run wherever it is pushed: the store it was made in, and its id there
    origin = row[0].origin
    run["origin"] = {
        "store": origin or store_id(session),
        "run": row[0].origin_run if origin else row[0].id,
        "pushed": origin is not None,  # made by another store, which sent it here
    }
    return run


def environment_dict(env: Environment | None) -> dict[str, Any] | None:
    """What was probed, as the pages and the API show it (None: nobody probed)."""
    return env.model_dump(exclude={"id", "fingerprint", "details"}) | env.details if env else None


def existing_runs(session: Session, run_ids: list[int]) -> set[int]:
    return set(session.execute(select(Run.id).where(Run.id.in_(run_ids))).scalars())


def store_id(session: Session) -> str:
    return session.execute(select(StoreMeta.value).where(StoreMeta.key == "store_id")).scalar_one()


# the run page's sortable columns; suite order by default ("-": descending)
_PROBLEMS_FIRST = case(  # what failed, then what is in doubt, then the rest
    (Result.outcome.in_(sorted(FAILING)), 0),
    (Result.outcome == FLAKY, 1),
    (Result.outcome.in_((UNCONFIRMED, INTERRUPTED, NOT_RUN)), 2),
    else_=3,
)
RESULT_ORDER = {
    "problems": (_PROBLEMS_FIRST, Result.id),
    "test": (Case.nodeid,),
    "-test": (Case.nodeid.desc(),),
    "kernel": (Case.kernel, Result.id),
    "-kernel": (Case.kernel.desc(), Result.id),
    "outcome": (Result.outcome, Result.id),
    "-outcome": (Result.outcome.desc(), Result.id),
    "duration": (Result.duration, Result.id),
    "-duration": (Result.duration.desc(), Result.id),
}


def run_results(
    session: Session,
    run_id: int,
    *,
    outcome: str | None = None,
    kernel: str | None = None,
    text: str | None = None,
    sort: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """One page of the run's results in suite order, with their attempts, and how many results
    match in all: a run of 100,000 tests is read a page at a time."""
    where = [Result.run_id == run_id]
    if outcome:
        where.append(Result.outcome == outcome)
    if kernel:
        where.append(Case.kernel == kernel)
    if text:
        where.append(Case.nodeid.contains(text, autoescape=True))
    total = session.execute(
        select(func.count()).select_from(Result).join(Case, Result.test_id == Case.id).where(*where)
    ).scalar_one()
    rows = session.execute(
        select(
            Case.id, Case.nodeid, Case.kernel, Result.outcome, Result.duration, Result.quarantined
        )
        .join(Case, Result.test_id == Case.id)
        .where(*where)
        .order_by(*RESULT_ORDER.get(sort or "", (Result.id,)))
        .limit(limit)
        .offset(offset)
    ).all()
    attempts: dict[int, list[dict[str, Any]]] = {}
    ids = [row[0] for row in rows]
    for start in range(0, len(ids), 500):  # bounded IN lists
        for a in session.execute(
            select(Attempt)
            .where(Attempt.run_id == run_id, Attempt.test_id.in_(ids[start : start + 500]))
            .order_by(Attempt.test_id, Attempt.number)
        ).scalars():
            attempts.setdefault(a.test_id, []).append(
                {
                    "number": a.number,
                    "outcome": a.outcome,
                    "duration": round(a.duration, 4),
                    "isolated": a.isolated,
                    "process": a.process,
                    "position": a.position,
                    "worker": a.worker,
                    "started_at": _iso(a.started_at),
                    "message": a.message,
                    "longrepr": a.longrepr,
                }
            )
    results = [
        {
            "test_id": case_id,
            "nodeid": nodeid,
            "kernel": kern,
            "outcome": final,
            "duration": round(duration, 4),
            "quarantined": quarantined,
            "attempts": attempts.get(case_id, []),
        }
        for case_id, nodeid, kern, final, duration, quarantined in rows
    ]
    return results, total


def run_detail(
    session: Session, run_id: int, limit: int | None = None, offset: int = 0
) -> dict[str, Any]:
    """`{"format": ..., "run": {...}, "results": [...]}`: the shape `tracker run/ingest/show
    --json` print (all results: the whole record, which `tracker push` sends), and the API's run
    (a page of them, with `total`)."""
    run = run_info(session, run_id)
    results, total = run_results(session, run_id, limit=limit, offset=offset)
    return {"format": RUN_FORMAT, "run": run, "results": results, "total": total}


def run_attempt_times(session: Session, run_id: int) -> list[dict[str, Any]]:
    """Every timed attempt of a run with its slot, in start order: the run page's timeline."""
    rows = session.execute(
        select(
            Attempt.worker,
            Attempt.started_at,
            Attempt.duration,
            Attempt.outcome,
            Attempt.isolated,
            Case.id,
            Case.nodeid,
        )
        .join(Case, Attempt.test_id == Case.id)
        .where(Attempt.run_id == run_id, Attempt.started_at.is_not(None))
        .order_by(Attempt.started_at)
    ).all()
    keys = ("worker", "started_at", "duration", "outcome", "rerun", "test_id", "nodeid")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def run_kernels(session: Session, run_id: int) -> list[str]:
    return list(
        session.execute(
            select(Case.kernel)
            .join(Result, Result.test_id == Case.id)
            .where(Result.run_id == run_id)
            .distinct()
            .order_by(Case.kernel)
        ).scalars()
    )


def suite_runner_pairs(session: Session) -> list[tuple[str, str]]:
    """Every (suite, runner) that has runs: one overview card each."""
    rows = session.execute(
        select(Suite.name, Runner.name)
        .join(Run, Run.suite_id == Suite.id)
        .join(Runner, Run.runner_id == Runner.id)
        .distinct()
        .order_by(Suite.name, Runner.name)
    ).all()
    return [(s, r) for s, r in rows]


def failing_attempts(session: Session, run_id: int) -> list[dict[str, Any]]:
    """The first failing attempt of each failing, erroring, crashed, timed-out or flaky test, with
    its bounded traceback: what the run page groups by cluster."""
    first_fail = (
        select(Attempt.test_id, func.min(Attempt.number).label("number"))
        .where(Attempt.run_id == run_id, Attempt.outcome.in_(sorted(FAILING)))
        .group_by(Attempt.test_id)
        .subquery()
    )
    rows = session.execute(
        select(
            Case.id,
            Case.nodeid,
            Case.kernel,
            Result.outcome,
            Result.quarantined,
            Attempt.outcome,
            Attempt.message,
            Attempt.longrepr,
        )
        .join(first_fail, first_fail.c.test_id == Case.id)
        .join(
            Attempt,
            and_(
                Attempt.run_id == run_id,
                Attempt.test_id == Case.id,
                Attempt.number == first_fail.c.number,
            ),
        )
        .join(Result, and_(Result.run_id == run_id, Result.test_id == Case.id))
        .order_by(Case.nodeid)
    ).all()
    keys = ("test_id", "nodeid", "kernel", "final", "quarantined", "outcome", "message", "longrepr")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def previous_run_id(session: Session, run_id: int) -> int | None:
    """The run of the same suite and runner just before this one."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    return session.execute(
        select(Run.id)
        .where(
            Run.suite_id == run.suite_id,
            Run.runner_id == run.runner_id,
            Run.started_at < run.started_at,
            Run.status != RUN_RUNNING,
        )
        .order_by(Run.started_at.desc())
        .limit(1)
    ).scalar()


def final_outcomes(session: Session, run_id: int) -> dict[str, str]:
    return dict(
        session.execute(
            select(Case.nodeid, Result.outcome)
            .join(Case, Case.id == Result.test_id)
            .where(Result.run_id == run_id)
        ).all()
    )


def case_info(session: Session, test_id: int) -> dict[str, Any]:
    row = session.execute(
        select(Case.id, Case.nodeid, Case.kernel, Case.file, Suite.name)
        .join(Suite, Suite.id == Case.suite_id)
        .where(Case.id == test_id)
    ).first()
    if row is None:
        raise NotFound(f"no test with id {test_id}")
    return dict(zip(("id", "nodeid", "kernel", "file", "suite"), row, strict=True))


def test_ids(session: Session, suite: str, nodeids: list[str]) -> dict[str, int]:
    """The ids of a suite's tests by node id, for links from lists of names."""
    if not nodeids:
        return {}
    rows = session.execute(
        select(Case.nodeid, Case.id)
        .join(Suite, Suite.id == Case.suite_id)
        .where(Suite.name == suite, Case.nodeid.in_(set(nodeids)))
    ).all()
    return dict(rows)  # type: ignore[arg-type]


def case_history(session: Session, test_id: int, limit: int = 100) -> list[dict[str, Any]]:
    """The test's latest runs, oldest first: final outcome, first attempt, duration, commit."""
    rows = session.execute(
        select(
            Run.id,
            Run.started_at,
            Run.commit,
            Runner.name,
            Result.outcome,
            Result.duration,
            Attempt.outcome,
            Attempt.message,
            Attempt.isolated,
            Result.quarantined,
        )
        .join(Result, Result.run_id == Run.id)
        .join(Runner, Runner.id == Run.runner_id)
        .join(
            Attempt,
            and_(Attempt.run_id == Run.id, Attempt.test_id == test_id, Attempt.number == 1),
            isouter=True,
        )
        .where(Result.test_id == test_id)
        .order_by(Run.started_at.desc())
        .limit(limit)
    ).all()
    keys = (
        "run_id",
        "started_at",
        "commit",
        "runner",
        "outcome",
        "duration",
        "first",
        "message",
        "isolated",
        "quarantined",
    )
    return [dict(zip(keys, row, strict=True)) for row in reversed(rows)]


def slowest(session: Session, run_id: int, limit: int = 10) -> list[dict[str, Any]]:
    rows = session.execute(
        select(Case.id, Case.nodeid, Result.duration, Result.outcome)
        .join(Case, Case.id == Result.test_id)
        .where(Result.run_id == run_id)
        .order_by(Result.duration.desc())
        .limit(limit)
    ).all()
    return [dict(zip(("test_id", "nodeid", "duration", "outcome"), r, strict=True)) for r in rows]


def running(session: Session, suite: str, runner: str) -> bool:
    """A run of the suite on the runner is running."""
    return (
        session.execute(
            select(Run.id)
            .join(Suite, Suite.id == Run.suite_id)
            .join(Runner, Runner.id == Run.runner_id)
            .where(Suite.name == suite, Runner.name == runner, Run.status == RUN_RUNNING)
            .limit(1)
        ).first()
        is not None
    )


def busy(session: Session, suite: str, runner: str) -> bool:
    """A run of the suite on the runner is running, or a `run now` request waits or runs."""
    waiting = session.execute(
        select(RunRequest.id)
        .where(
            RunRequest.suite == suite,
            RunRequest.runner == runner,
            RunRequest.state.in_(("queued", "started")),
        )
        .limit(1)
    ).first()
    return waiting is not None or running(session, suite, runner)


def state_stamp(session: Session, suite_id: int) -> tuple:
    """Changes whenever a run of the suite is added, starts or ends, or the quarantine changes."""
    runs = session.execute(
        select(
            func.max(Run.id),
            func.count(),
            func.count().filter(Run.status == RUN_RUNNING),
            func.max(Run.finished_at),
        ).where(Run.suite_id == suite_id)
    ).one()
    quarantined = session.execute(
        select(func.count(), func.max(Quarantine.since))
        .join(Case, Case.id == Quarantine.test_id)
        .where(Case.suite_id == suite_id)
    ).one()
    return (*runs, *quarantined)


def recent_attempts(session: Session, suite: str, runner: str, runs: int = 10) -> list[Sample]:
    """Every attempt of the last `runs` runs of the suite on the runner, with when and where it
    ran: what the run plan learns durations and device sharing from."""
    last = (
        select(Run.id)
        .join(Suite, Suite.id == Run.suite_id)
        .join(Runner, Runner.id == Run.runner_id)
        .where(Suite.name == suite, Runner.name == runner, Run.status != RUN_RUNNING)
        .order_by(Run.started_at.desc())
        .limit(runs)
        .subquery()
    )
    rows = session.execute(
        select(
            Attempt.run_id,
            Case.nodeid,
            Attempt.number,
            Attempt.duration,
            Attempt.outcome,
            Attempt.started_at,
            Attempt.worker,
            Run.kernel_cache,
        )
        .join(Case, Case.id == Attempt.test_id)
        .join(Run, Run.id == Attempt.run_id)
        .where(Attempt.run_id.in_(select(last.c.id)))
    ).all()
    return [
        Sample(run, nodeid, n, duration, outcome, started, worker, cache and cache == "warm")
        for run, nodeid, n, duration, outcome, started, worker, cache in rows
    ]


def replay_order(
    session: Session, suite: str, nodeid: str, run_id: int | None = None
) -> tuple[int, int, list[str]]:
    """(run, test id, the tests before it in its process, in order) for the test's latest
    first attempt that failed in a run's process (or in run `run_id`)."""
    query = (
        select(Attempt.run_id, Attempt.test_id, Attempt.process, Attempt.position)
        .join(Case, Case.id == Attempt.test_id)
        .join(Suite, Suite.id == Case.suite_id)
        .where(Suite.name == suite, Case.nodeid == nodeid, Attempt.number == 1)
        .where(Attempt.outcome.in_(FAILING), Attempt.process.is_not(None))
        .order_by(Attempt.run_id.desc())
        .limit(1)
    )
    if run_id is not None:
        query = query.where(Attempt.run_id == run_id)
    row = session.execute(query).first()
    if row is None:
        where = f" in run {run_id}" if run_id is not None else ""
        raise NotFound(f"{nodeid} has no failed first attempt in a process of {suite}{where}")
    run, test_id, process, position = row
    before = session.execute(
        select(Case.nodeid)
        .join(Attempt, Attempt.test_id == Case.id)
        .where(Attempt.run_id == run, Attempt.process == process, Attempt.number == 1)
        .where(Attempt.position < position)
        .order_by(Attempt.position)
    ).scalars()
    return run, test_id, list(before)


def investigations(
    session: Session, test_ids: list[int], kind: str = "polluter"
) -> dict[int, dict[str, Any]]:
    """The latest investigation of a kind ("polluter", "bisect") of each test: its verdict,
    what it found, its evidence, when."""
    if not test_ids:
        return {}
    rows = session.execute(
        select(Investigation)
        .where(Investigation.test_id.in_(set(test_ids)), Investigation.kind == kind)
        .order_by(Investigation.id)
    ).scalars()
    return {
        inv.test_id: {
            **inv.details,
            "verdict": inv.verdict,
            "run_id": inv.run_id,
            "finished_at": _iso(inv.finished_at),
        }
        for inv in rows
    }


def order_suspects(session: Session, run_id: int) -> list[str]:
    """Tests of a run that failed in suite order and passed alone in a fresh process, without a
    polluter search yet: what a night's search budget goes to."""
    rerun = select(Attempt.test_id).where(
        Attempt.run_id == run_id, Attempt.isolated.is_(True), Attempt.outcome == PASSED
    )
    searched = select(Investigation.test_id).where(Investigation.kind == "polluter")
    rows = session.execute(
        select(Case.nodeid)
        .join(Attempt, Attempt.test_id == Case.id)
        .where(Attempt.run_id == run_id, Attempt.number == 1, Attempt.outcome.in_(FAILING))
        .where(Attempt.test_id.in_(rerun), Attempt.test_id.not_in(searched))
        .order_by(Attempt.id)
    ).scalars()
    return list(rows)


def run_alert(session: Session, run_id: int) -> dict[str, Any] | None:
    """The events worked out when run `run_id` was stored, with where they were sent."""
    alert = session.execute(select(Alert).where(Alert.run_id == run_id)).scalars().first()
    if alert is None:
        return None
    sent = session.execute(
        select(AlertDelivery).where(AlertDelivery.alert_id == alert.id)
    ).scalars()
    return {
        "events": alert.events,
        "deliveries": [
            {"destination": d.destination, "sent_at": _iso(d.sent_at), "tries": d.tries}
            for d in sent
        ],
    }


def unsent_deliveries(
    session: Session, due_by: datetime | None = None
) -> list[tuple[AlertDelivery, Alert]]:
    """Unsent alert deliveries (with `due_by`, only those whose next try is due), oldest first."""
    query = (
        select(AlertDelivery, Alert)
        .join(Alert, Alert.id == AlertDelivery.alert_id)
        .where(AlertDelivery.sent_at.is_(None))
        .order_by(Alert.id, AlertDelivery.destination)
    )
    if due_by is not None:
        query = query.where(AlertDelivery.next_try_at <= due_by)
    return list(session.execute(query).all())


def issue_links(session: Session, suite: str | None = None) -> list[IssueLink]:
    query = select(IssueLink).order_by(IssueLink.id)
    if suite is not None:
        query = query.where(IssueLink.suite == suite)
    return list(session.execute(query).scalars())
