"""Night by night, for the people who would rather look than read: each run's test pass rate,
failing and flaky counts and duration, each kernel's pass rate, and the outcomes of chosen tests
across chosen runs (the tests-by-nights grid, the history strips beside each test).

The run-level figures come from the runs' stored counts (one query, as `rates` does); the
kernel-level ones from one grouped query over the window's results."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session

from tracker.analysis.history import RunRow
from tracker.analysis.rates import FAILED_FIRST
from tracker.models import Case, Environment, Result, Run
from tracker.queries import environment_dict
from tracker.records import FAILING, FLAKY, PASSED, RUN_RUNNING


@dataclass(frozen=True)
class Night:
    """One run, as the trend charts plot it."""

    run_id: int
    started_at: datetime
    commit: str | None
    status: str
    seconds: float | None  # from its start to its end
    passed: int  # tests whose first attempt passed
    ran: int  # tests that passed or failed first
    failing: int  # tests that failed, even on a rerun
    flaky: int  # tests that failed first and passed on a rerun

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.ran if self.ran else None

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "started_at": self.started_at.isoformat(),
                "commit": self.commit, "status": self.status, "seconds": self.seconds,
                "test_pass_rate": self.pass_rate, "passed": self.passed, "ran": self.ran,
                "failing": self.failing, "flaky": self.flaky}  # fmt: skip


def nights(runs: list[RunRow]) -> list[Night]:
    out = []
    for r in runs:
        c = r.counts
        seconds = (r.finished_at - r.started_at).total_seconds() if r.finished_at else None
        out.append(
            Night(
                r.id,
                r.started_at,
                r.commit,
                r.status,
                seconds,
                c.get(PASSED, 0),
                c.get(PASSED, 0) + sum(c.get(o, 0) for o in FAILED_FIRST),
                sum(c.get(o, 0) for o in FAILING),
                c.get(FLAKY, 0),
            )
        )
    return out


def kernel_rates(
    session: Session, suite: int, runner: int | None, since: datetime, until: datetime
) -> dict[str, dict[int, tuple[int, int]]]:
    """kernel -> run id -> (tests whose first attempt passed, tests that passed or failed
    first), over the runs of the window."""
    ran = (PASSED, *FAILED_FIRST)
    query = (
        select(Case.kernel, Result.run_id, Result.outcome, func.count())
        .join(Case, Case.id == Result.test_id)
        .join(Run, Run.id == Result.run_id)
        .where(Run.suite_id == suite, Run.started_at.between(since, until))
        .where(Run.status != RUN_RUNNING, Result.outcome.in_(ran))
        .group_by(Case.kernel, Result.run_id, Result.outcome)
    )
    if runner is not None:
        query = query.where(Run.runner_id == runner)
    out: dict[str, dict[int, tuple[int, int]]] = defaultdict(dict)
    for kernel, run_id, outcome, n in session.execute(query).all():
        passed, total = out[kernel].get(run_id, (0, 0))
        out[kernel][run_id] = (passed + n * (outcome == PASSED), total + n)
    return dict(out)


def outcomes(session: Session, test_ids: list[int], run_ids: list[int]) -> dict[int, dict]:
    """test id -> run id -> (final outcome, quarantined), for the given tests and runs."""
    out: dict[int, dict] = defaultdict(dict)
    for chunk in range(0, len(test_ids), 500):  # bound the IN lists
        query = select(Result.test_id, Result.run_id, Result.outcome, Result.quarantined).where(
            Result.test_id.in_(test_ids[chunk : chunk + 500]), Result.run_id.in_(run_ids)
        )
        for test_id, run_id, outcome, quarantined in session.execute(query).all():
            out[test_id][run_id] = (outcome, quarantined)
    return dict(out)


def environments(session: Session, runner: int, limit: int = 500) -> list[dict[str, Any]]:
    """The runner's environments over time, newest first: each stretch of its recent runs
    (any suite) that ran in one probed environment, with its first and last run."""
    query = (
        select(Run.id, Run.started_at, Environment)
        .outerjoin(Environment, Environment.id == Run.environment_id)
        .where(Run.runner_id == runner)
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
    )
    out: list[dict[str, Any]] = []
    for run_id, started_at, env in session.execute(query).all():
        key = env.id if env else None
        if out and out[-1]["key"] == key:
            out[-1].update(first_run=run_id, first_at=started_at, runs=out[-1]["runs"] + 1)
            continue
        out.append({"key": key, "environment": environment_dict(env), "runs": 1,
                    "first_run": run_id, "first_at": started_at,
                    "last_run": run_id, "last_at": started_at})  # fmt: skip
    return [{k: v for k, v in e.items() if k != "key"} for e in out]
