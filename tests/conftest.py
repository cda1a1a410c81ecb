"""Shared fixtures: a temporary database and data folder per test, and a helper that runs a
fixture suite through the real runner (real pytest subprocesses) and stores it."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import SUITES, make_pg_database, settings_for

from tracker import queries, store
from tracker.config import Settings, SuiteConfig
from tracker.db import get_engine, migrate, session_scope
from tracker.runner.execute import execute
from tracker.service import history


@pytest.fixture(scope="session", autouse=True)
def lean_pytest_subprocesses() -> Iterator[None]:
    """Every pytest the tests start (fixture suites, the example suite, bisect repositories,
    through the tracker or not) leaves out the dev environment's plugins that none of them
    uses: schemathesis and hypothesis load on entry points and cost ~1.6 s of CPU in each
    process, anyio 0.25 s (a one-test suite here: 2.3 s with them, 0.3 s without); this suite
    starts hundreds. Set in the test process, never in xdist's controller, so that its workers
    keep them."""
    lean = "-p no:schemathesis -p no:hypothesispytest -p no:anyio"
    old = os.environ.get("PYTEST_ADDOPTS")
    os.environ["PYTEST_ADDOPTS"] = f"{old or ''} {lean}".strip()
    yield
    if old is None:
        os.environ.pop("PYTEST_ADDOPTS", None)
    else:
        os.environ["PYTEST_ADDOPTS"] = old


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A real PostgreSQL server for the session (Debian's `postgresql`; `.ci/run` installs it),
    started as the `postgres` user on a Unix socket in a temporary folder, with a migrated
    template database that each test's database is copied from. Yields the socket folder."""
    pytest.importorskip("psycopg")
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("no PostgreSQL server installed here (.ci/run installs Debian's postgresql)")
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    folder = Path(tempfile.mkdtemp(prefix="tracker-pg-"))
    if as_postgres:
        shutil.chown(folder, "postgres")
    data = folder / "data"
    subprocess.run(
        [*as_postgres, initdb, "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    start = [*as_postgres, pg_ctl, "-D", str(data), "-l", str(folder / "log"), "-w"]
    options = f"-k {folder} -c listen_addresses='' -c fsync=off -c max_connections=300"
    subprocess.run([*start, "-o", options, "start"], check=True, capture_output=True)
    try:
        # migrated; a template must have no connections
        migrate(make_pg_database(str(folder), template=None)).dispose()
        yield str(folder)
    finally:
        subprocess.run([*start, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def new_pg_database(pg_server: str) -> Iterator:
    """Makes fresh, migrated databases on the session's server (a template copy: ~0.1 s)."""
    urls: list[str] = []

    def make() -> str:
        urls.append(make_pg_database(pg_server))
        return urls[-1]

    yield make
    for url in urls:
        get_engine(url).dispose()  # each engine keeps a pool of connections open


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test on a database runs on SQLite and on PostgreSQL, except the runner side's
    (marked `sqlite_only`): a runner host keeps its own SQLite file, only the central store that
    runners push to is meant to be on PostgreSQL."""
    if "db_url" in metafunc.fixturenames and not metafunc.definition.get_closest_marker(
        "sqlite_only"
    ):
        databases = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]
        metafunc.parametrize("db_url", databases, indirect=True)


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The test's database: SQLite, or a fresh PostgreSQL database."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return f"sqlite:///{tmp_path / 'tracker.db'}"
    return request.getfixturevalue("new_pg_database")()


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return settings_for(tmp_path, db_url)


@pytest.fixture
def run_suite(settings: Settings, tmp_path: Path):
    """Run files of a fixture suite, store the run, return `tracker show --json`'s shape."""

    def run(*args: str, suite: str = "realities", suite_path: Path | None = None, **options):
        state = tmp_path / "state"
        state.mkdir(exist_ok=True)
        config = SuiteConfig(
            name=suite,
            path=suite_path or SUITES / suite,
            python=sys.executable,
            args=list(args) or ["."],
            env={"FIXTURE_STATE": str(state), **options.pop("env", {})},
            **{"test_timeout": 1, "run_timeout": 120, "reruns": 1, **options},
        )
        record = execute(settings, config, read_history=history(settings, config))
        with session_scope(settings.database_url) as session:
            saved = store.save_run(session, record)
            return queries.run_detail(session, saved.id)

    return run
