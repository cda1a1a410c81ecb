"""PostgreSQL against SQLite on the same year of history, side by side in one call: storing the
runs (the ingest path: `store.save_run`, as the runner and uploads use it) and the pages.

    python bench/postgres.py --pg-url postgresql+psycopg://postgres@/bench?host=/tmp/pg \
        [--nights 365] [--tests 2600] [--repeat 3]

The PostgreSQL database must exist and be empty. The data set is bench/pages.py's: one run a
night of `--tests` tests in 40 kernel files, 0.3% first-attempt failures, half flaky.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from pages import build, paths

from tracker.config import Settings
from tracker.web.app import create_app


def pages(settings: Settings, repeat: int) -> dict[str, tuple[float, float]]:
    client = TestClient(create_app(settings))
    last = client.get("/api/v1/suites/transformers/runs?limit=1").json()["runs"][0]["id"]
    times = {}
    for path in paths(last):
        took = []
        for _ in range(repeat + 1):
            t0 = time.perf_counter()
            assert client.get(path).status_code == 200, path
            took.append(time.perf_counter() - t0)
        times[path.replace(str(last), "{last}")] = (took[0], statistics.median(took[1:]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg-url", required=True)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--tests", type=int, default=2600)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        databases = {
            "SQLite": Settings(database_url=f"sqlite:///{Path(tmp) / 'year.db'}"),
            "PostgreSQL": Settings(database_url=args.pg_url),
        }
        warm = Settings(database_url=f"sqlite:///{Path(tmp) / 'warm.db'}")
        build(warm, 2, 10)
        pages(warm, 1)  # templates compiled and imports done before either is timed
        stored, shown = {}, {}
        for name, settings in databases.items():
            t0 = time.perf_counter()
            build(settings, args.nights, args.tests)
            stored[name] = time.perf_counter() - t0
        for name, settings in databases.items():
            shown[name] = pages(settings, args.repeat)
    results = args.nights * args.tests
    print(f"{args.nights} runs x {args.tests} tests ({results:,} results):\n")
    print("| | SQLite | PostgreSQL | PostgreSQL / SQLite |")
    print("| --- | ---: | ---: | ---: |")
    lite, pg = stored["SQLite"], stored["PostgreSQL"]
    print(
        f"| store the year (per run) | {lite:.0f} s ({lite / args.nights * 1000:.0f} ms) | "
        f"{pg:.0f} s ({pg / args.nights * 1000:.0f} ms) | {pg / lite:.2f} |"
    )
    for path, (cold, warm) in shown["SQLite"].items():
        pg_cold, pg_warm = shown["PostgreSQL"][path]
        print(
            f"| `{path}` first / again | {cold * 1000:.0f} / {warm * 1000:.0f} ms | "
            f"{pg_cold * 1000:.0f} / {pg_warm * 1000:.0f} ms | "
            f"{pg_cold / cold:.2f} / {pg_warm / warm:.2f} |"
        )


if __name__ == "__main__":
    main()
