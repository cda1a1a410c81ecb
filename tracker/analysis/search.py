"""One search box across suites: tests and kernels by name, failure messages, commits. Each
part is capped (the newest first where time matters): a search is for finding, the list pages
and their CSV are for counting."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session

from tracker.models import Attempt, Case, Run, Runner, Suite
from tracker.records import FAILING

LIMIT = 50


def search(
    session: Session,
    text: str,
    suite: str | None = None,
    runner: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    commit: str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    cases = select(Case.id, Case.nodeid, Case.kernel, Suite.name).join(
        Suite, Suite.id == Case.suite_id
    )
    runs = (
        select(Run.id, Run.started_at, Run.status, Run.commit, Suite.name, Runner.name)
        .join(Suite, Suite.id == Run.suite_id)
        .join(Runner, Runner.id == Run.runner_id)
    )
    failures = (
        select(Attempt.run_id, Case.id, Case.nodeid, Suite.name, Run.started_at, Attempt.message)
        .join(Case, Case.id == Attempt.test_id)
        .join(Run, Run.id == Attempt.run_id)
        .join(Suite, Suite.id == Run.suite_id)
        .join(Runner, Runner.id == Run.runner_id)
        .where(Attempt.number == 1, Attempt.outcome.in_(sorted(FAILING)))
        .where(Attempt.message.contains(text, autoescape=True))
    )
    if suite:
        cases = cases.where(Suite.name == suite)
        runs = runs.where(Suite.name == suite)
        failures = failures.where(Suite.name == suite)
    if runner:
        runs = runs.where(Runner.name == runner)
        failures = failures.where(Runner.name == runner)
    if commit:  # a commit's runs: the failures seen on it
        runs = runs.where(Run.commit.startswith(commit, autoescape=True))
        failures = failures.where(Run.commit.startswith(commit, autoescape=True))
    for bound, op in ((since, "__ge__"), (until, "__lt__")):
        if bound is not None:
            runs = runs.where(getattr(Run.started_at, op)(bound))
            failures = failures.where(getattr(Run.started_at, op)(bound))
    tests = session.execute(
        cases.where(Case.nodeid.contains(text, autoescape=True)).order_by(Case.nodeid).limit(LIMIT)
    ).all()
    kernels = session.execute(
        select(Suite.name, Case.kernel, func.count())
        .join(Suite, Suite.id == Case.suite_id)
        .where(Case.kernel.contains(text, autoescape=True))
        .where(*([Suite.name == suite] if suite else []))
        .group_by(Suite.name, Case.kernel)
        .order_by(Case.kernel)
        .limit(LIMIT)
    ).all()
    commits = session.execute(
        runs.where(Run.commit.contains(text, autoescape=True))
        .order_by(Run.started_at.desc())
        .limit(LIMIT)
    ).all()
    messages = session.execute(failures.order_by(Run.started_at.desc()).limit(LIMIT)).all()
    return {
        "tests": [{"test_id": i, "nodeid": n, "kernel": k, "suite": s} for i, n, k, s in tests],
        "kernels": [{"suite": s, "kernel": k, "tests": c} for s, k, c in kernels],
        "runs": [
            {"id": i, "started_at": t, "status": st, "commit": c, "suite": s, "runner": r}
            for i, t, st, c, s, r in commits
        ],
        "failures": [
            {"run_id": r, "test_id": i, "nodeid": n, "suite": s, "started_at": t, "message": m}
            for r, i, n, s, t, m in messages
        ],
    }
