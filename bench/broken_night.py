"""The overview after a broken night against after a clean one, same size, in the same call,
and several readers at once after a push (issue 21).

Two databases of 14 nights of `--tests` tests: in one, the last night passed; in the other,
every test of the last night failed with a different ~990-character message (a broken device
or driver). Each overview is asked cold (the analysis cache cleared), first alone, then by
`--readers` threads at once, as people and README badges would right after a push.

    python bench/broken_night.py [--tests 2608] [--readers 8]
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient

from tracker import store
from tracker.analysis.report import cache
from tracker.config import Settings
from tracker.db import migrate, session_scope
from tracker.records import AttemptRecord, RunRecord
from tracker.web.app import create_app


def build(settings: Settings, tests: int, broken: bool) -> None:
    rng = random.Random(5)
    nodeids = [f"test/transformers/test_k{i % 40:02d}.py::test_case[{i}]" for i in range(tests)]
    now = datetime.now(UTC)
    migrate(settings.database_url)
    with session_scope(settings.database_url) as session:
        for night in range(14):
            last = night == 13
            attempts = []
            for n in nodeids:
                if broken and last:
                    words = " ".join(
                        "".join(rng.choices(string.ascii_letters + "/._-", k=rng.randint(3, 14)))
                        for _ in range(90)
                    )
                    attempts.append(AttemptRecord(n, "failed", 0.2, message=words[:990]))
                else:
                    attempts.append(AttemptRecord(n, "passed", 0.2))
            started = now - timedelta(days=14 - night, hours=-1)
            record = RunRecord(
                "transformers", "a2", "runner", started, finished_at=started + timedelta(hours=1),
                commit=f"c{night}", collected=nodeids, attempts=attempts,
            )  # fmt: skip
            store.save_run(session, record)


def timed(client: TestClient) -> float:
    start = time.perf_counter()
    assert client.get("/").status_code == 200
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=2608)
    parser.add_argument("--readers", type=int, default=8)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, broken in (("clean night", False), ("broken night", True)):
            settings = Settings(database_url=f"sqlite:///{Path(tmp) / name[:5]}.db")
            build(settings, args.tests, broken)
            client = TestClient(create_app(settings))
            cache.clear()
            alone = timed(client)
            cache.clear()
            waits: list[float] = []

            def read(client: TestClient = client, waits: list[float] = waits) -> None:
                waits.append(timed(client))

            threads = [threading.Thread(target=read) for _ in range(args.readers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rows.append((name, alone, statistics.median(waits), max(waits)))
    print(f"{args.tests} tests, 14 nights, {args.readers} readers at once after the cache cleared")
    print("| last night | overview alone | readers: median | readers: slowest |")
    print("| --- | ---: | ---: | ---: |")
    for name, alone, median, slowest in rows:
        print(f"| {name} | {alone:.2f} s | {median:.2f} s | {slowest:.2f} s |")
    print(f"broken / clean, alone: {rows[1][1] / rows[0][1]:.1f}x")


if __name__ == "__main__":
    main()
