"""Reads for the CLI (and later the web): runs and their results in the contract's JSON shape."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from tracker.models import Attempt, Case, Environment, Result, Run, Runner, Suite


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
        "message": run.message,
        "artifacts": run.artifacts,
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


def run_detail(session: Session, run_id: int) -> dict[str, Any]:
    """`{"run": {...}, "results": [...]}`: the shape `tracker run/ingest/show --json` print."""
    row = session.execute(_run_query().where(Run.id == run_id)).first()
    if row is None:
        raise NotFound(f"no run with id {run_id}")
    run = run_dict(*row)
    env = session.get(Environment, row[0].environment_id) if row[0].environment_id else None
    run["environment"] = (
        env.model_dump(exclude={"id", "fingerprint", "details"}) | env.details if env else None
    )
    attempts: dict[int, list[dict[str, Any]]] = {}
    for a in session.execute(
        select(Attempt).where(Attempt.run_id == run_id).order_by(Attempt.test_id, Attempt.number)
    ).scalars():
        attempts.setdefault(a.test_id, []).append(
            {
                "number": a.number,
                "outcome": a.outcome,
                "duration": round(a.duration, 4),
                "isolated": a.isolated,
                "worker": a.worker,
                "message": a.message,
            }
        )
    results = [
        {
            "test_id": case_id,
            "nodeid": nodeid,
            "kernel": kernel,
            "outcome": outcome,
            "duration": round(duration, 4),
            "attempts": attempts.get(case_id, []),
        }
        for case_id, nodeid, kernel, outcome, duration in session.execute(
            select(Case.id, Case.nodeid, Case.kernel, Result.outcome, Result.duration)
            .join(Case, Result.test_id == Case.id)
            .where(Result.run_id == run_id)
            .order_by(Result.id)
        ).all()
    ]
    return {"run": run, "results": results}
