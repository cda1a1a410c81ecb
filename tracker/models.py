"""Tables. Timestamps are stored in UTC (aware datetimes); days are computed by the analysis.

A `Case` is one test (one nodeid of one suite); a `Result` is its final outcome in one run; each
`Attempt` is one execution of it in that run (number 1 in suite order, then isolated reruns).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, ForeignKey, Index, Integer, UniqueConstraint, text
from sqlmodel import Field, SQLModel

MESSAGE_MAX = 1_000  # one-line failure message kept per attempt
LONGREPR_MAX = 16_000  # traceback text kept per attempt (head and tail)
NODEID_MAX = 1_000


def _fk(target: str, *, nullable: bool = False, index: bool = True) -> Any:
    return Field(
        default=None,
        sa_column=Column(
            Integer, ForeignKey(target, ondelete="CASCADE"), nullable=nullable, index=index
        ),
    )


def _unique_where(name: str, *columns: str, where: str) -> Index:
    """A partial unique index, the same on SQLite and PostgreSQL: the locks are rows."""
    return Index(
        name, *columns, unique=True, sqlite_where=text(where), postgresql_where=text(where)
    )


class Suite(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, max_length=200)
    created_at: datetime


class Runner(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, max_length=200)
    created_at: datetime


# an environment's facts kept in columns of their own (the rest go in `details`)
ENV_COLUMNS = (
    "device_kind",
    "device_model",
    "device_count",
    "driver",
    "cann",
    "python",
    "torch",
    "torch_npu",
    "triton",
    "suite_package",
)


class Environment(SQLModel, table=True):
    """What the suite ran on; runs with the same fingerprint count as the same input."""

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(unique=True, max_length=64)
    device_kind: str = Field(max_length=16)
    device_model: str | None = None
    device_count: int = 0
    driver: str | None = None
    cann: str | None = None
    python: str | None = None
    torch: str | None = None
    torch_npu: str | None = None
    triton: str | None = None
    suite_package: str | None = None
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Run(SQLModel, table=True):
    __table_args__ = (
        Index("ix_run_suite_runner_started", "suite_id", "runner_id", "started_at"),
        Index("ix_run_suite_started", "suite_id", "started_at"),
        # the lock: at most one running run per suite and runner, across processes and hosts
        _unique_where("ux_run_one_running", "suite_id", "runner_id", where="status = 'running'"),
        # a pushed run is stored once: its store's id and its id there
        Index("ux_run_origin", "origin", "origin_run", unique=True),
    )

    id: int | None = Field(default=None, primary_key=True)
    suite_id: int = _fk("suite.id", index=False)
    runner_id: int = _fk("runner.id")
    environment_id: int | None = Field(
        default=None, sa_column=Column(Integer, ForeignKey("environment.id"), nullable=True)
    )
    status: str = Field(max_length=16, index=True)
    source: str = Field(max_length=16)  # "runner" (our own execution) or "ingest"
    commit: str | None = Field(default=None, max_length=100)
    ref: str | None = Field(default=None, max_length=200)
    started_at: datetime
    finished_at: datetime | None = None
    expected: int = 0  # tests collected
    # failing or flaky tests that were quarantined when the run was stored: they did not decide
    # its status, and "passed" must not hide them
    quarantined_failures: int = 0
    counts: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    message: str | None = None  # why the run is infra_error / timed_out / interrupted
    artifacts: str | None = None  # folder with the run's reportlogs and pytest output
    host: str | None = Field(default=None, max_length=200)  # who runs it: a dead pid there
    pid: int | None = None  # means the run was interrupted
    heartbeat_at: datetime | None = None  # written while it runs: a lapse means its owner died
    # a run pushed by a runner's tracker: that store's id (StoreMeta) and the run's id there
    origin: str | None = Field(default=None, max_length=64)
    origin_run: int | None = None
    # "warm" or "cold": the compiled-kernel cache a run of ours started with (None: unknown)
    kernel_cache: str | None = Field(default=None, max_length=8)


class Case(SQLModel, table=True):
    __tablename__ = "test_case"
    __table_args__ = (UniqueConstraint("suite_id", "nodeid"),)

    id: int | None = Field(default=None, primary_key=True)
    suite_id: int = _fk("suite.id", index=False)
    nodeid: str = Field(max_length=NODEID_MAX + 20)
    file: str
    kernel: str = Field(index=True)


class Result(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("run_id", "test_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = _fk("run.id", index=False)
    test_id: int = _fk("test_case.id")
    outcome: str = Field(max_length=16)
    duration: float = 0.0  # of the first attempt: reruns are extra, not the test's cost
    attempts: int = 1
    quarantined: bool = False  # when the run was stored: its outcome did not decide the status


class Attempt(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("run_id", "test_id", "number"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = _fk("run.id", index=False)
    test_id: int = _fk("test_case.id")
    number: int  # 1: in suite order; 2..: reruns
    outcome: str = Field(max_length=16)
    duration: float = 0.0
    isolated: bool = False  # ran alone in a fresh process
    process: int | None = None  # which pytest process of the run (order-dependence evidence)
    position: int | None = None  # its place in that process
    worker: str | None = Field(default=None, max_length=50)
    started_at: datetime | None = None
    message: str | None = None
    longrepr: str | None = None


class Quarantine(SQLModel, table=True):
    """A test whose failures no longer fail a run; it keeps running and being recorded."""

    __table_args__ = (UniqueConstraint("test_id"),)

    id: int | None = Field(default=None, primary_key=True)
    test_id: int = _fk("test_case.id", index=False)
    reason: str = Field(max_length=500)
    since: datetime
    by: str = Field(max_length=100)  # a person, or "rule:<name>"


class Investigation(SQLModel, table=True):
    """A root-cause search on the device, kept with its evidence: a polluter search for an
    order-dependent test. Its probes are not runs and count in no rate."""

    id: int | None = Field(default=None, primary_key=True)
    test_id: int = _fk("test_case.id")
    kind: str = Field(max_length=16)  # "polluter"
    run_id: int | None = None  # the run whose process order was replayed
    started_at: datetime
    finished_at: datetime
    verdict: str = Field(max_length=32)
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class RunSlot(SQLModel, table=True):
    """A scheduled firing, claimed by the first scheduler process that gets to it: two schedulers
    on one database make one run per slot."""

    __tablename__ = "run_slot"
    __table_args__ = (UniqueConstraint("suite", "runner", "slot_at"),)

    id: int | None = Field(default=None, primary_key=True)
    suite: str = Field(max_length=200)
    runner: str = Field(max_length=200)
    slot_at: datetime
    claimed_at: datetime
    claimed_by: str = Field(max_length=200)  # host:pid


class RunRequest(SQLModel, table=True):
    """`run now` asked over HTTP; the scheduler process picks it up."""

    __tablename__ = "run_request"
    __table_args__ = (
        # one waiting or started request per suite and runner, however many web workers take
        # `run now` at the same moment
        _unique_where(
            "ux_request_one_open", "suite", "runner", where="state IN ('queued', 'started')"
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    suite: str = Field(max_length=200, index=True)
    runner: str = Field(max_length=200)
    state: str = Field(max_length=16)  # queued, started, done
    requested_at: datetime
    run_id: int | None = None
    # the scheduler process that took it (host:pid), and when: if it dies, recovery ends the
    # request, which would otherwise refuse every later `run now` as busy
    claimed_by: str | None = Field(default=None, max_length=200)
    claimed_at: datetime | None = None


class StoreMeta(SQLModel, table=True):
    """Facts about this database: `store_id`, a UUID made with it, names the runs it pushes, so
    that a central server never stores one twice, even from two stores on one host or a store
    made anew (whose run ids start again at 1)."""

    __tablename__ = "store_meta"

    key: str = Field(primary_key=True, max_length=50)
    value: str = Field(max_length=200)


class Outbox(SQLModel, table=True):
    """A run waiting to be pushed to the central server, and how its pushes went."""

    run_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True),
    )
    queued_at: datetime
    tries: int = 0
    next_try_at: datetime  # backoff: not sent again before this
    last_error: str | None = Field(default=None, max_length=500)
    pushed_at: datetime | None = None
    remote_id: int | None = None  # the run's id on the central server


class Alert(SQLModel, table=True):
    """What changed, worked out once: after a stored run (its `run_id`), or a missed night.
    `key` names the event ("run:12", "missed:suite:runner:2026-12-01"), so it is made once however
    often it is looked for. The run page, the API and every destination read these `events`."""

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(unique=True, max_length=600)
    suite: str = Field(max_length=200)
    runner: str = Field(max_length=200)
    run_id: int | None = _fk("run.id", nullable=True)
    created_at: datetime
    events: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))


class AlertDelivery(SQLModel, table=True):
    """One alert to one configured destination: the alerts' outbox, as `Outbox` is the runs'."""

    __tablename__ = "alert_delivery"

    alert_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("alert.id", ondelete="CASCADE"), primary_key=True),
    )
    destination: str = Field(primary_key=True, max_length=100)
    tries: int = 0
    next_try_at: datetime
    last_error: str | None = Field(default=None, max_length=500)
    sent_at: datetime | None = None


class IssueLink(SQLModel, table=True):
    """An issue filed upstream from a report (`tracker report --file-issue`): its subject (a
    test's nodeid, "kernel:NAME" or "promotion") and where it lives."""

    __tablename__ = "issue_link"

    id: int | None = Field(default=None, primary_key=True)
    suite: str = Field(max_length=200)
    subject: str = Field(max_length=1_100)
    url: str = Field(max_length=500)
    created_at: datetime
    commented_at: datetime | None = None  # the healthy streak's comment, once
