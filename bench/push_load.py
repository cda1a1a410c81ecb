"""Runners pushing at once to a central `tracker serve --workers 4`, while people read its pages:
every run must be stored exactly once, and no request may fail. Run side by side on SQLite and
PostgreSQL in one call.

    python bench/push_load.py --pg-url postgresql+psycopg://postgres@/push?host=/tmp/pg \
        [--runners 4] [--runs 25] [--tests 2600] [--readers 4] [--workers 4]

Each runner is a process sending `--runs` whole runs (tracker-run/1, gzipped, `--tests` tests
each, from its own store id), then sending its first three again (a lost answer, retried): those
must come back as already stored. The PostgreSQL database must exist and be empty.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import func, select

from tracker import queries, store
from tracker.config import Settings
from tracker.db import get_engine, session_scope
from tracker.models import Run
from tracker.records import AttemptRecord, RunRecord

TOKEN = "bench-token-0123456789abcdef"
READ = ["/", "/suites/transformers", "/suites/transformers/promotion", "/api/v1/suites"]


def template(tests: int, folder: Path) -> dict:
    """One real run record, as `tracker show --json` prints it."""
    settings = Settings(database_url=f"sqlite:///{folder / 'runner.db'}")
    nodeids = [f"test/transformers/test_k{i % 40:02d}.py::test_case[{i}]" for i in range(tests)]
    attempts = [AttemptRecord(n, "passed", 0.2, process=i % 16, position=i // 16)
                for i, n in enumerate(nodeids)]  # fmt: skip
    attempts[7] = AttemptRecord(nodeids[7], "failed", 0.2, message="AssertionError: 0.03")
    attempts.append(AttemptRecord(nodeids[7], "passed", 0.2, isolated=True))
    started = datetime.now(UTC) - timedelta(days=60)
    record = RunRecord("transformers", "x", "runner", started, started + timedelta(hours=1),
                       collected=nodeids, attempts=attempts)  # fmt: skip
    with session_scope(settings.database_url) as session:
        return queries.run_detail(session, store.save_run(session, record).id)


def pusher(base: str, runner: int, runs: int, doc: dict) -> tuple[list[float], list[str], int]:
    """One runner's tracker: its runs, then three of them again. (latencies, errors, repeats)"""
    took, errors, repeats = [], [], 0
    with httpx.Client(timeout=120) as client:
        for number in [*range(1, runs + 1), 1, 2, 3]:
            sent = copy.deepcopy(doc)
            sent["run"]["origin"] = {"store": f"bench-store-{runner}", "run": number}
            sent["run"]["runner"] = f"a2-{runner}"
            start = datetime.fromisoformat(sent["run"]["started_at"]) + timedelta(days=number)
            sent["run"]["started_at"] = start.isoformat()
            sent["run"]["finished_at"] = (start + timedelta(hours=1)).isoformat()
            body = gzip.compress(json.dumps(sent).encode())
            t0 = time.perf_counter()
            answer = client.post(
                f"{base}/api/v1/runs",
                content=body,
                headers={"Authorization": f"Bearer {TOKEN}", "Content-Encoding": "gzip"},
            )
            took.append(time.perf_counter() - t0)
            if answer.status_code not in (200, 201):
                errors.append(f"{answer.status_code} {answer.text[:200]}")
            repeats += answer.status_code == 200
    return took, errors, repeats


def reader(base: str, stop: threading.Event, took: list[float], errors: list[str]) -> None:
    with httpx.Client(timeout=120) as client:
        while not stop.is_set():
            for path in READ:
                t0 = time.perf_counter()
                answer = client.get(base + path)
                took.append(time.perf_counter() - t0)
                if answer.status_code != 200 and not (
                    answer.status_code == 404 and path != "/"  # before the first run arrives
                ):
                    errors.append(f"{path}: {answer.status_code}")


def serve(url: str, workers: int, folder: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "TRACKER_DATABASE_URL": url, "TRACKER_TOKEN": TOKEN}
    command = [sys.executable, "-m", "tracker.cli", "serve", "--no-scheduler"]
    server = subprocess.Popen(
        [*command, "--workers", str(workers), "--port", str(port)],
        env=env,
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(f"{base}/healthz")
            return server, base
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("the central server did not start")


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


def load(url: str, args: argparse.Namespace, doc: dict, folder: Path) -> dict:
    get_engine(url)  # migrated before the workers start
    server, base = serve(url, args.workers, folder)
    stop, read_took, read_errors = threading.Event(), [], []
    readers = [threading.Thread(target=reader, args=(base, stop, read_took, read_errors))
               for _ in range(args.readers)]  # fmt: skip
    try:
        for t in readers:
            t.start()
        t0 = time.perf_counter()
        with ProcessPoolExecutor(args.runners) as pool:
            done = list(pool.map(pusher, [base] * args.runners, range(args.runners),
                                 [args.runs] * args.runners, [doc] * args.runners))  # fmt: skip
        wall = time.perf_counter() - t0
    finally:
        stop.set()
        for t in readers:
            t.join()
        server.terminate()
        server.wait(timeout=60)
    with session_scope(url) as session:
        stored = session.execute(select(func.count()).select_from(Run)).scalar()
        distinct = session.execute(
            select(func.count()).select_from(
                select(Run.origin, Run.origin_run).distinct().subquery()
            )
        ).scalar()
    push_took = [t for took, _, _ in done for t in took]
    return {
        "pushes": len(push_took),
        "wall": wall,
        "push_p50": statistics.median(push_took),
        "push_p95": p95(push_took),
        "push_errors": sum(len(e) for _, e, _ in done),
        "repeats_answered_stored": sum(r for _, _, r in done),
        "reads": len(read_took),
        "read_p50": statistics.median(read_took),
        "read_p95": p95(read_took),
        "read_errors": len(read_errors),
        "runs_stored": stored,
        "distinct_origins": distinct,
        "expected": args.runners * args.runs,
        "errors": [e for _, es, _ in done for e in es][:3] + read_errors[:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg-url", required=True)
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--tests", type=int, default=2600)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        doc = template(args.tests, folder)
        size = len(gzip.compress(json.dumps(doc).encode()))
        print(f"{args.runners} runners x {args.runs} runs of {args.tests} tests "
              f"({size / 1024:.0f} KB gzipped each), {args.readers} readers, "
              f"{args.workers} web workers\n")  # fmt: skip
        results = {
            "SQLite": load(f"sqlite:///{folder / 'central.db'}", args, doc, folder),
            "PostgreSQL": load(args.pg_url, args, doc, folder),
        }
    rows = [
        ("runs stored / expected", lambda r: f"{r['runs_stored']} / {r['expected']}"),
        ("distinct (store, run)", lambda r: str(r["distinct_origins"])),
        ("repeats answered 'already stored'", lambda r: str(r["repeats_answered_stored"])),
        ("push errors / read errors", lambda r: f"{r['push_errors']} / {r['read_errors']}"),
        ("wall for all pushes", lambda r: f"{r['wall']:.1f} s"),
        ("runs stored per second", lambda r: f"{r['pushes'] / r['wall']:.1f}"),
        ("push p50 / p95", lambda r: f"{r['push_p50'] * 1000:.0f} / {r['push_p95'] * 1000:.0f} ms"),
        ("page reads during the pushes", lambda r: str(r["reads"])),
        ("read p50 / p95", lambda r: f"{r['read_p50'] * 1000:.0f} / {r['read_p95'] * 1000:.0f} ms"),
    ]
    print("| | SQLite | PostgreSQL |")
    print("| --- | ---: | ---: |")
    for label, cell in rows:
        print(f"| {label} | {cell(results['SQLite'])} | {cell(results['PostgreSQL'])} |")
    for name, r in results.items():
        for error in r["errors"]:
            print(f"{name}: {error}")


if __name__ == "__main__":
    main()
