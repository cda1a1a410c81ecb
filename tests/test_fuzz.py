"""The API against its own OpenAPI schema, fuzzed by schemathesis on SQLite and on PostgreSQL:
no 5xx, and every status code, content type and body is the one the schema documents. A fixed
seed and a bounded number of examples keep it repeatable and quick; `bench/hostile.py
--fuzz-minutes` runs it longer."""

from __future__ import annotations

import os

import pytest
from helpers import fill, make_pg_database, settings_for
from hypothesis import HealthCheck, given, seed, settings

from tracker.web.app import create_app

schemathesis = pytest.importorskip("schemathesis")
TOKEN = "fuzz-token-0123456789abcdef"
positive_data_acceptance = schemathesis.checks.positive_data_acceptance
EXAMPLES = int(os.environ.get("TRACKER_FUZZ_EXAMPLES", "25"))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def app(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    url = None  # SQLite
    if request.param == "postgresql":  # 32-bit columns, NUL in text: what SQLite lets pass
        url = make_pg_database(request.getfixturevalue("pg_server"))
    config = settings_for(tmp, url, token=TOKEN)
    fill(config, tmp)
    return create_app(config)


def test_api_keeps_to_its_schema(app):
    # schemathesis' own pytest integration needs pytest internals that pytest 9 dropped: the
    # operations are walked here, each with Hypothesis given its strategy
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10

    for operation in operations:

        @seed(20261130)
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case):
            # with the token, so that writes are fuzzed past the gate too; an upload's file is
            # judged beyond what a schema can say, so a "schema-valid" one may well be a 400
            case.call_and_validate(
                headers={"Authorization": f"Bearer {TOKEN}"},
                excluded_checks=[positive_data_acceptance] if case.method == "POST" else [],
            )

        check()
