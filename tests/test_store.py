"""The store: schema from migrations equals the models, bulk writes, all-or-nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import func, select, text
from sqlmodel import SQLModel

from tracker import store
from tracker.db import get_engine, migrations_dir, session_scope
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


def test_old_run_limit_cuts_become_interrupted(settings):
    """Databases written before run-limit cuts were `interrupted` get them corrected on start."""
    engine = get_engine(settings.database_url)
    cut = "the run's time limit was reached during this test\n----- last output -----"
    record = RunRecord(
        suite="s",
        runner="r",
        source="runner",
        started_at=datetime(2026, 11, 29, tzinfo=UTC),
        collected=["t.py::slow", "t.py::ok", "t.py::hang"],
        attempts=[
            AttemptRecord("t.py::ok", "passed"),
            AttemptRecord("t.py::hang", "timeout", message="Timeout (>900.0s)"),
            AttemptRecord("t.py::slow", "timeout", message=cut),
        ],
        status="timed_out",
    )
    with session_scope(settings.database_url) as session:
        run_id = store.save_run(session, record).id
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    with engine.begin() as conn:  # as a database of the old version would be
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
    get_engine.cache_clear()
    with session_scope(settings.database_url) as session:
        run = session.get(Run, run_id)
        assert run.counts == {"interrupted": 1, "passed": 1, "timeout": 1}
        assert run.status == "timed_out"
        outcomes = dict(
            session.execute(
                select(Case.nodeid, Result.outcome).join(Result, Result.test_id == Case.id)
            ).all()
        )
        assert outcomes == {
            "t.py::ok": "passed",
            "t.py::hang": "timeout",
            "t.py::slow": "interrupted",
        }
        assert (
            session.execute(
                select(Attempt.outcome).where(Attempt.message.startswith("the run's"))
            ).scalar()
            == "interrupted"
        )
