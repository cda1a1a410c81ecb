"""Page and API times on a year of history, through the ASGI app, side by side with a plain
SQL count of the year's results (the floor of touching the data at all). Each page is asked
once cold, then again: the analysis is cached until the suite's runs or quarantine change.

    python bench/pages.py [--nights 365] [--tests 2600] [--repeat 3]

One run a night of `--tests` tests in 40 kernel files; 0.3% of first attempts fail and half of
those pass on rerun, so the analysis has flaky tests, clusters and broken tests to show.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from tracker import store
from tracker.config import Settings
from tracker.db import migrate, session_scope
from tracker.models import Result
from tracker.records import AttemptRecord, RunRecord
from tracker.web.app import create_app


def build(settings: Settings, nights: int, tests: int) -> None:
    rng = random.Random(3)
    nodeids = [f"test/transformers/test_k{i % 40:02d}.py::test_case[{i}]" for i in range(tests)]
    now = datetime.now(UTC)
    migrate(settings.database_url)
    with session_scope(settings.database_url) as session:
        for night in range(nights):
            attempts = []
            for n in nodeids:
                if rng.random() < 0.003:
                    msg = f"AssertionError: mismatch {rng.random():.3f}"
                    attempts.append(AttemptRecord(n, "failed", 0.2, message=msg))
                    outcome = "passed" if rng.random() < 0.5 else "failed"
                    attempts.append(AttemptRecord(n, outcome, 0.2, isolated=True))
                else:
                    attempts.append(AttemptRecord(n, "passed", 0.2))
            started = now - timedelta(days=nights - night, hours=-1)
            store.save_run(
                session,
                RunRecord(
                    "transformers",
                    "a2-910b4",
                    "runner",
                    started,
                    finished_at=started + timedelta(hours=2),
                    commit=f"c{night // 3}",
                    collected=nodeids,
                    attempts=attempts,
                ),
            )


def paths(last: int) -> list[str]:
    """The pages people open, the last run's among them."""
    return [
        "/",
        "/suites/transformers",
        f"/runs/{last}",
        "/tests/1",
        "/suites/transformers/flaky",
        "/suites/transformers/promotion",
        "/badge/transformers.svg?metric=promotion",
        f"/api/v1/runs/{last}",
        "/suites/transformers/trends",
        "/suites/transformers/trends?days=90",
        "/suites/transformers/grid",
        "/suites/transformers/kernels",
        "/suites/transformers/clusters",
        "/runners/a2-910b4",
        "/search?q=test_case[1234]",
        "/search?q=mismatch 0.5",
        f"/runs/{last}?format=csv",
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--tests", type=int, default=2600)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=f"sqlite:///{Path(tmp) / 'year.db'}")
        t0 = time.perf_counter()
        build(settings, args.nights, args.tests)
        print(f"{args.nights} runs x {args.tests} tests stored in {time.perf_counter() - t0:.0f} s")
        client = TestClient(create_app(settings))
        last = client.get("/api/v1/suites/transformers/runs?limit=1").json()["runs"][0]["id"]
        with session_scope(settings.database_url) as session:
            t0 = time.perf_counter()
            total = session.execute(select(func.count()).select_from(Result)).scalar()
            count_s = time.perf_counter() - t0
        print(f"plain SQL count of all {total:,} results: {count_s * 1000:.0f} ms\n")
        print("| page | first request | / count | again (cached analysis) |")
        print("| --- | ---: | ---: | ---: |")
        for path in paths(last):
            times = []
            for _ in range(args.repeat + 1):
                t0 = time.perf_counter()
                assert client.get(path).status_code == 200, path
                times.append(time.perf_counter() - t0)
            cold, warm = times[0], statistics.median(times[1:])
            print(
                f"| `{path}` | {cold * 1000:.0f} ms | {cold / count_s:.0f}x | "
                f"{warm * 1000:.0f} ms |"
            )


if __name__ == "__main__":
    main()
