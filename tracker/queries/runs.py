"""Runs and their results, in the run JSON's shape (`tracker show --json`, the API, push)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, select
from sqlmodel import Session

from tracker.models import (
    Attempt,
    Case,
    Environment,
    Result,
    Run,
    Runner,
    StoreMeta,
    Suite,
)
from tracker.records import (
    FAILING,
    FLAKY,
    INTERRUPTED,
    NOT_RUN,
    RUN_FORMAT,
    RUN_RUNNING,
    UNCONFIRMED,
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
    """What was probed, as the pages and the API show it (None: nobody probed). A device
    environment without `devices_present` was probed when `device_count` counted the machine's
    devices, not the run's: the run's count is unknown (a night on GPU 0 of 2, then one on a
    1-GPU machine, read as "device_count 2 -> 1")."""
    if env is None:
        return None
    out = env.model_dump(exclude={"id", "fingerprint", "details"}) | env.details
    if out["device_kind"] != "cpu" and "devices_present" not in out:
        out["devices_present"], out["device_count"] = out["device_count"], None
    return out


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


def suite_runner_pairs(session: Session, suite: str | None = None) -> list[tuple[str, str]]:
    """Every (suite, runner) that has runs (of `suite` only, when given): one overview card
    each."""
    query = (
        select(Suite.name, Runner.name)
        .join(Run, Run.suite_id == Suite.id)
        .join(Runner, Run.runner_id == Runner.id)
    )
    if suite is not None:
        query = query.where(Suite.name == suite)
    rows = session.execute(query.distinct().order_by(Suite.name, Runner.name)).all()
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


def slowest(session: Session, run_id: int, limit: int = 10) -> list[dict[str, Any]]:
    rows = session.execute(
        select(Case.id, Case.nodeid, Result.duration, Result.outcome)
        .join(Case, Case.id == Result.test_id)
        .where(Result.run_id == run_id)
        .order_by(Result.duration.desc())
        .limit(limit)
    ).all()
    return [dict(zip(("test_id", "nodeid", "duration", "outcome"), r, strict=True)) for r in rows]
