"""Time to store one run of 10,000 results (and attempts) through `store.save_run`, against the
same rows written with plain sqlite3 executemany into the same schema, side by side.

    python bench/store_bulk.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tracker import store
from tracker.db import migrate, session_scope
from tracker.records import AttemptRecord, RunRecord

N = 10_000


def record() -> RunRecord:
    nodeids = [f"test/transformers/test_k{i % 40}.py::test_case[{i}-bf16]" for i in range(N)]
    attempts = [
        AttemptRecord(
            n,
            "passed" if i % 50 else "failed",
            0.01,
            message=None if i % 50 else "x",
            process=0,
            position=i,
        )
        for i, n in enumerate(nodeids)
    ]
    return RunRecord(
        "bench", "r", "runner", datetime.now(UTC), collected=nodeids, attempts=attempts
    )


def tracker_store(db: Path) -> float:
    rec = record()
    migrate(f"sqlite:///{db}")
    with session_scope(f"sqlite:///{db}") as session:
        t0 = time.perf_counter()
        store.save_run(session, rec)
        return time.perf_counter() - t0


def raw_sqlite(db: Path) -> float:
    """The floor: the same three inserts, no ORM, no outcome logic."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    now = datetime.now(UTC).isoformat()
    t0 = time.perf_counter()
    with conn:
        cur = conn.execute(
            "INSERT INTO run (suite_id, runner_id, status, source, started_at, expected, counts) "
            "VALUES (1, 1, 'failed', 'runner', ?, ?, '{}')",
            (now, N),
        )
        run_id = cur.lastrowid
        conn.executemany(
            "INSERT OR IGNORE INTO test_case (suite_id, nodeid, file, kernel) VALUES (1, ?, ?, ?)",
            [(f"t{i}.py::x[{i}]", f"t{i}.py", "k") for i in range(N)],
        )
        ids = conn.execute("SELECT id FROM test_case WHERE suite_id = 1").fetchall()
        conn.executemany(
            "INSERT INTO result (run_id, test_id, outcome, duration, attempts) "
            "VALUES (?, ?, ?, ?, 1)",
            [(run_id, i, "passed", 0.01) for (i,) in ids],
        )
        conn.executemany(
            "INSERT INTO attempt (run_id, test_id, number, outcome, duration, isolated) "
            "VALUES (?, ?, 1, 'passed', 0.01, 0)",
            [(run_id, i) for (i,) in ids],
        )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ours, raw = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            ours.append(tracker_store(Path(tmp) / "a.db"))
            # raw writes into a migrated schema with suite/runner rows present
            tracker_store(Path(tmp) / "b.db")
            raw.append(raw_sqlite(Path(tmp) / "b.db"))
    a, b = statistics.median(ours), statistics.median(raw)
    print(f"10,000 results + attempts, median of {args.repeat}:")
    print(f"  store.save_run   {a * 1000:.0f} ms")
    print(f"  raw sqlite3      {b * 1000:.0f} ms")
    print(f"  ratio            {a / b:.2f}x")


if __name__ == "__main__":
    main()
