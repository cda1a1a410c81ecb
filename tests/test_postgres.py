"""The same data on PostgreSQL and on SQLite gives the same verdicts (flaky, broken, kernels,
promotion, clusters), and every page and API route answers on PostgreSQL. (Every other test
that uses a database runs on both: see `db_url` in conftest.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from helpers import fill, make_pg_database, settings_for

from tracker.config import Settings
from tracker.web.app import create_app

pytest.importorskip("psycopg")


def _settings(url: str, tmp: Path) -> Settings:
    return settings_for(tmp, url, token="s3cret-token-for-tests-0123456789")


@pytest.fixture(scope="module")
def filled(pg_server, tmp_path_factory) -> tuple[Settings, Settings]:
    """The web tests' database, once on PostgreSQL and once on SQLite."""
    tmp = tmp_path_factory.mktemp("pg")
    pg = _settings(make_pg_database(pg_server), tmp / "pg")
    lite = _settings(f"sqlite:///{tmp / 'l.db'}", tmp / "l")
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
