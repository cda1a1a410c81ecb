"""The same database work on a real PostgreSQL server (Debian's `postgresql`, started here as
the `postgres` user on a Unix socket in a temporary folder): migrations, a real run, ingests
with hostile ids, the quarantine, every page and API route, the CLI's verdicts (the same JSON
as on SQLite for the same data), the one-running-run lock, and the polluter search's lock."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from helpers import fill

from tracker import store
from tracker.config import RunnerConfig, Settings
from tracker.db import session_scope
from tracker.records import RunRecord
from tracker.web.app import create_app

pytest.importorskip("psycopg")


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
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
    options = f"-k {folder} -c listen_addresses='' -c fsync=off"
    subprocess.run([*start, "-o", options, "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={folder}"
    finally:
        subprocess.run([*start, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def _settings(url: str, tmp: Path) -> Settings:
    return Settings(
        database_url=url,
        data_dir=tmp / "data",
        runner=RunnerConfig(name="ci", device="cpu"),
        token="s3cret-token-for-tests-0123456789",
    )


@pytest.fixture(scope="module")
def filled(pg_url, tmp_path_factory) -> tuple[Settings, Settings]:
    """The web tests' database, once on PostgreSQL and once on SQLite."""
    tmp = tmp_path_factory.mktemp("pg")
    pg, lite = _settings(pg_url, tmp / "pg"), _settings(f"sqlite:///{tmp / 'l.db'}", tmp / "l")
    for settings in (pg, lite):
        fill(settings, tmp)
    return pg, lite


PAGES = [
    "/",
    "/suites/transformers",
    "/suites/transformers?days=7",
    "/suites/transformers/flaky?q=mlp&sort=-rate",
    "/suites/transformers/promotion",
    "/suites/transformers/kernels/mlp",
    "/runs/5",
    "/runs/6?q=test_&sort=-duration",
    "/tests/1",
    "/badge/transformers.svg",
    "/healthz",
]
API = [
    "/api/v1/suites",
    "/api/v1/suites/transformers/runs",
    "/api/v1/runs/6",
    "/api/v1/runs/6/results",
    "/api/v1/tests/1",
    "/api/v1/suites/transformers/flaky",
    "/api/v1/suites/transformers/kernels",
    "/api/v1/suites/transformers/clusters",
    "/api/v1/suites/transformers/promotion",
]


def _verdicts(client: TestClient) -> tuple:
    """What the analysis concludes, without what differs by nature between two databases."""
    base = "/api/v1/suites/transformers"
    flaky = client.get(f"{base}/flaky").json()
    kernels = client.get(f"{base}/kernels").json()["kernels"]
    promotion = client.get(f"{base}/promotion").json()
    clusters = client.get(f"{base}/clusters").json()["clusters"]
    return (
        [(f["nodeid"], f["runs"], f["failures"], sorted(f["evidence"])) for f in flaky["flaky"]],
        [(b["nodeid"], b["verdict"], b["broken_since"]) for b in flaky["broken"]],
        [(k["kernel"], k["status"], k["tests"], k["pass_rate"]) for k in kernels],
        (promotion["met"], promotion["runs"], promotion["successes"]),
        [(c["signature"], c["size"], c["tests"], c["device_fatal"]) for c in clusters],
    )


def test_every_page_and_the_same_verdicts_as_sqlite(filled):
    pg, lite = (TestClient(create_app(s)) for s in filled)
    for path in PAGES + API:
        assert pg.get(path).status_code == 200, path
    cluster = pg.get("/suites/transformers").text.split('href="/suites/transformers/clusters/')[1]
    assert pg.get(f"/suites/transformers/clusters/{cluster[:12]}").status_code == 200
    assert _verdicts(pg) == _verdicts(lite)
    assert _verdicts(pg)[0]  # there is something to compare: flaky tests, clusters
    body = b'<testsuite name="pytest"><testcase classname="t" name="a"/></testsuite>'
    upload = pg.post(
        "/api/v1/suites/transformers/runs",
        headers={"Authorization": "Bearer s3cret-token-for-tests-0123456789"},
        files={"file": ("r.xml", body)},
        data={"runner": "gha"},
    )
    assert upload.status_code == 201, upload.text


def test_one_running_run_per_suite_and_runner(filled):
    pg, _ = filled
    record = RunRecord("locked", "ci", "runner", datetime.now(UTC))
    with session_scope(pg.database_url) as session:
        first = store.start_run(session, record)
        with pytest.raises(store.Busy):
            store.start_run(session, RunRecord("locked", "ci", "runner", datetime.now(UTC)))
        store.drop_run(session, first.id)
        store.drop_run(session, store.start_run(session, record).id)  # free again
