"""The store: schema from migrations equals the models, bulk writes, all-or-nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, select, text
from sqlmodel import SQLModel

from tracker import store
from tracker.db import get_engine, session_scope
from tracker.models import Attempt, Case, Result, Run
from tracker.records import AttemptRecord, RunRecord


def test_migrations_match_the_models(settings):
    engine = get_engine(settings.database_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert diff == []


def test_sqlite_pragmas(settings):
    with get_engine(settings.database_url).connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000


def big_run(n: int, suite: str = "big") -> RunRecord:
    nodeids = [f"test/transformers/test_k{i % 40}.py::test_case[{i}]" for i in range(n)]
    attempts = [
        AttemptRecord(nid, "passed", 0.01, process=0, position=i) for i, nid in enumerate(nodeids)
    ]
    attempts[5].outcome = "failed"
    attempts.append(AttemptRecord(nodeids[5], "passed", 0.01, isolated=True))
    return RunRecord(
        suite=suite,
        runner="r",
        source="runner",
        started_at=datetime.now(UTC),
        collected=nodeids,
        attempts=attempts,
    )


def test_ten_thousand_results(settings):
    with session_scope(settings.database_url) as session:
        run = store.save_run(session, big_run(10_000))
        assert run.status == "flaky"
        assert run.counts == {"flaky": 1, "passed": 9_999}
        assert session.execute(select(func.count()).select_from(Result)).scalar() == 10_000
        assert session.execute(select(func.count()).select_from(Attempt)).scalar() == 10_001
        kernels = session.execute(select(func.count(func.distinct(Case.kernel)))).scalar()
        assert kernels == 40
        # a second run of the same suite reuses the test rows
        store.save_run(session, big_run(10_000))
        assert session.execute(select(func.count()).select_from(Case)).scalar() == 10_000


def test_a_failing_write_stores_nothing(settings):
    record = big_run(100)
    record.attempts[50].nodeid = None  # breaks in the middle of building rows
    with session_scope(settings.database_url) as session, pytest.raises(AttributeError):
        store.save_run(session, record)
    with session_scope(settings.database_url) as session:
        assert session.execute(select(func.count()).select_from(Run)).scalar() == 0
        assert session.execute(select(func.count()).select_from(Result)).scalar() == 0


def test_environment_is_shared_by_fingerprint(settings):
    env = {"device_kind": "npu", "device_model": "910B4", "device_count": 8, "torch": "2.6.0"}
    with session_scope(settings.database_url) as session:
        a = big_run(10)
        a.environment = {**env, "hostname": "x"}
        b = big_run(10)
        b.environment = {**env, "hostname": "y"}
        c = big_run(10)
        c.environment = {**env, "torch": "2.7.0"}
        ids = [store.save_run(session, r).environment_id for r in (a, b, c)]
    assert ids[0] == ids[1] != ids[2]
