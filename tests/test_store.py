"""The store: schema from migrations equals the models, bulk writes, all-or-nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import func, select, text
from sqlmodel import SQLModel, create_engine

from tracker import store
from tracker.db import HEAD, at_head, get_engine, migrate, migrations_dir, session_scope
from tracker.models import Attempt, Case, Investigation, Result, Run
from tracker.records import AttemptRecord, RunRecord


def test_migrations_match_the_models(settings):
    engine = get_engine(settings.database_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert diff == []


@pytest.mark.sqlite_only
def test_only_the_explicit_step_migrates(tmp_path):
    """An engine (what every page's session uses) never changes the schema; `migrate`, at a
    command's or the web app's start, does."""
    from sqlalchemy import inspect

    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert inspect(get_engine(url)).get_table_names() == []
    migrate(url)
    assert {"alembic_version", "run", "attempt"} <= set(inspect(get_engine(url)).get_table_names())


def test_a_database_at_the_newest_schema_is_known_without_alembic(tmp_path):
    """`migrate` skips Alembic when the database is at `HEAD`: a new migration must move it."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert not at_head(get_engine(url))
    assert at_head(migrate(url))
    with get_engine(url).begin() as conn:  # a database one migration behind
        conn.execute(text("UPDATE alembic_version SET version_num = '0010'"))
    assert not at_head(get_engine(url))


@pytest.mark.sqlite_only  # pragmas
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
        d = big_run(10)
        d.environment = {**env, "hostname": "x"}
        ids = [store.save_run(session, r).environment_id for r in (a, b, c, d)]
    # the same environment, all of it, is one row; a run never shows another's host
    assert ids[0] == ids[3] and len({ids[0], ids[1], ids[2]}) == 3


def test_an_environment_probed_before_device_count_meant_the_runs_devices(settings):
    """`device_count` once counted the machine's devices: a night on GPU 0 of 2, then one on a
    1-GPU machine, must not read as "device_count 2 -> 1" (both used one GPU)."""
    from tracker import queries
    from tracker.analysis.changes import environment_diff

    old = {"device_kind": "cuda", "device_model": "NVIDIA H200", "device_count": 2}
    new = {**old, "device_count": 1, "devices_present": 1}
    with session_scope(settings.database_url) as session:
        ids = []
        for env in (old, new):
            run = big_run(10)
            run.environment = env
            ids.append(store.save_run(session, run).id)
        before, now = (queries.run_info(session, i)["environment"] for i in ids)
    assert (before["device_count"], before["devices_present"]) == (None, 2)
    assert environment_diff(before, now) == [("device_count", None, 1)]  # unknown, not 2


def test_old_databases_are_corrected_on_upgrade(tmp_path):
    """A database of the version before: run-limit cuts stored as `timeout` become `interrupted`,
    and results since a test's quarantine began are marked quarantined."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    old = create_engine(url)
    with old.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        for sql in (
            "INSERT INTO suite VALUES (1, 's', '2026-11-01 00:00:00')",
            "INSERT INTO runner VALUES (1, 'r', '2026-11-01 00:00:00')",
            "INSERT INTO run (id, suite_id, runner_id, status, source, started_at, expected,"
            " counts) VALUES (1, 1, 1, 'timed_out', 'runner', '2026-11-29 00:00:00', 3,"
            ' \'{"passed": 1, "timeout": 2}\')',
            "INSERT INTO test_case VALUES (1, 1, 't.py::ok', 't.py', 't'),"
            " (2, 1, 't.py::hang', 't.py', 't'), (3, 1, 't.py::slow', 't.py', 't')",
            "INSERT INTO result (id, run_id, test_id, outcome, duration, attempts) VALUES"
            " (1, 1, 1, 'passed', 0, 1), (2, 1, 2, 'timeout', 0, 1), (3, 1, 3, 'timeout', 0, 1)",
            "INSERT INTO attempt (run_id, test_id, number, outcome, duration, isolated, message)"
            " VALUES (1, 1, 1, 'passed', 0, 0, NULL),"
            " (1, 2, 1, 'timeout', 0, 0, 'Failed: Timeout (>900.0s) from pytest-timeout.'),"
            " (1, 3, 1, 'timeout', 0, 0, 'the run''s time limit was reached during this test')",
            "INSERT INTO quarantine (test_id, reason, since, by) VALUES"
            " (2, 'hangs', '2026-11-28 00:00:00', 'me')",
        ):
            conn.execute(text(sql))
    old.dispose()
    migrate(url)
    with session_scope(url) as session:
        run = session.get(Run, 1)
        assert run.counts == {"interrupted": 1, "passed": 1, "timeout": 1}
        assert run.status == "timed_out" and run.quarantined_failures == 1
        rows = session.execute(
            select(Case.nodeid, Result.outcome, Result.quarantined).join(
                Result, Result.test_id == Case.id
            )
        ).all()
        assert sorted(rows) == [
            ("t.py::hang", "timeout", True),
            ("t.py::ok", "passed", False),
            ("t.py::slow", "interrupted", False),
        ]
        assert session.execute(select(Attempt.outcome).where(Attempt.test_id == 3)).scalar() == (
            "interrupted"
        )


def test_polluters_that_never_failed_again_lose_the_blame_on_upgrade(tmp_path):
    """A search stored as "polluters" whose set then passed every try (0/N) is not confirmed."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    old = create_engine(url)
    details = {
        1: {"culprits": ["a", "b"], "evidence": ["fails after a + b: 0/2", "passes alone: 2/2"]},
        2: {"culprits": ["c"], "evidence": ["fails after c: 1/3", "passes alone: 3/3"]},
    }
    with old.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0010")
        conn.execute(text("INSERT INTO suite VALUES (1, 's', '2026-11-01 00:00:00')"))
        conn.execute(text("INSERT INTO test_case VALUES (1, 1, 't.py::v', 't.py', 't')"))
        for i, d in details.items():
            conn.execute(
                text(
                    "INSERT INTO investigation (id, test_id, kind, started_at, finished_at,"
                    " verdict, details) VALUES (:i, 1, 'polluter', '2026-11-30 00:00:00',"
                    " '2026-11-30 00:00:00', 'polluters', :d)"
                ),
                {"i": i, "d": json.dumps(d)},
            )
    old.dispose()
    migrate(url)
    with session_scope(url) as session:
        rows = {i.id: i for i in session.execute(select(Investigation)).scalars()}
    assert rows[1].verdict == "not confirmed"
    assert (rows[1].details["culprits"], rows[1].details["suspects"]) == ([], ["a", "b"])
    assert (rows[2].verdict, rows[2].details) == ("polluters", details[2])


def test_one_running_run_per_suite_and_runner(settings):
    record = RunRecord("locked", "ci", "runner", datetime.now(UTC))
    with session_scope(settings.database_url) as session:
        first = store.start_run(session, record)
        with pytest.raises(store.Busy):
            store.start_run(session, RunRecord("locked", "ci", "runner", datetime.now(UTC)))
        store.drop_run(session, first.id)
        store.drop_run(session, store.start_run(session, record).id)  # free again
