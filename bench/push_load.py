"""Runners pushing at once to a central `tracker serve --workers 4`, while people read its pages:
every run must be stored exactly once, and no request may fail. Run side by side on SQLite and
PostgreSQL in one call.

    python bench/push_load.py --pg-url postgresql+psycopg://postgres@/push?host=/tmp/pg \
        [--runners 4] [--runs 25] [--tests 2600] [--readers 4] [--workers 4] \
        [--broken] [--seconds S] [--answer-within 10]

Each runner is a process sending `--runs` whole runs (tracker-run/1, gzipped, `--tests` tests
each, from its own store id; with `--seconds`, as many as it can in that time), then sending its
first three again (a lost answer, retried): those must come back as already stored. With
`--broken` every test of every run fails with a ~990-character message of its own (the night
that made pages stop). A page view not answered within `--answer-within` seconds counts as
unanswered. The PostgreSQL database must exist and be empty.
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
from tracker.db import migrate, session_scope
from tracker.models import Run
from tracker.records import AttemptRecord, RunRecord

TOKEN = "bench-token-0123456789abcdef"
READ = ["/", "/suites/transformers", "/suites/transformers/promotion", "/api/v1/suites"]


def template(tests: int, folder: Path, broken: bool = False) -> dict:
    """One real run record, as `tracker show --json` prints it."""
    settings = Settings(database_url=f"sqlite:///{folder / 'runner.db'}")
    nodeids = [f"test/transformers/test_k{i % 40:02d}.py::test_case[{i}]" for i in range(tests)]
    attempts = [AttemptRecord(n, "passed", 0.2, process=i % 16, position=i // 16)
                for i, n in enumerate(nodeids)]  # fmt: skip
    if broken:
        attempts = [
            AttemptRecord(n, "failed", 30.0, process=i % 16, position=i // 16, message=(
                f"AssertionError: Tensor-likes are not close! Mismatched elements: {i} / 4096 "
                f"({i / 40.96:.1f}%) at index ({i % 7}, {i % 13}) (up to {i * 1e-3:.4f} allowed)"
                + f" x={i * 0.37:.5f} y={i * 0.41:.5f}" * 14
            )[:990])
            for i, n in enumerate(nodeids)
        ]  # fmt: skip
    attempts[7] = AttemptRecord(nodeids[7], "failed", 0.2, message="AssertionError: 0.03")
    attempts.append(AttemptRecord(nodeids[7], "passed", 0.2, isolated=True))
    started = datetime.now(UTC) - timedelta(days=60)
    record = RunRecord("transformers", "x", "runner", started, started + timedelta(hours=1),
                       collected=nodeids, attempts=attempts)  # fmt: skip
    with session_scope(settings.database_url) as session:
        return queries.run_detail(session, store.save_run(session, record).id)


def pusher(
    base: str, runner: int, runs: int, doc: dict, until: float
) -> tuple[list[float], list[str], int, int]:
    """One runner's tracker: its runs (until the clock says `until`), then three of them again.
    (latencies, errors, repeats, runs sent)"""
    took, errors, repeats = [], [], 0
    sent_runs = 0
    with httpx.Client(timeout=120) as client:
        for number in [*range(1, runs + 1), 1, 2, 3]:
            if number > 3 and time.time() > until:
                continue
            sent_runs = max(sent_runs, number)
            sent = copy.deepcopy(doc)
            sent["run"]["origin"] = {"store": f"bench-store-{runner}", "run": number}
            sent["run"]["runner"] = f"a2-{runner}"
            start = datetime.fromisoformat(sent["run"]["started_at"]) + timedelta(days=number)
            sent["run"]["started_at"] = start.isoformat()
            sent["run"]["finished_at"] = (start + timedelta(hours=1)).isoformat()
            body = gzip.compress(json.dumps(sent).encode())
            t0 = time.perf_counter()
            try:
                answer = client.post(
                    f"{base}/api/v1/runs",
                    content=body,
                    headers={"Authorization": f"Bearer {TOKEN}", "Content-Encoding": "gzip"},
                )
            except httpx.TimeoutException:
                took.append(float("inf"))
                errors.append("no answer within 120 s")
                continue
            took.append(time.perf_counter() - t0)
            if answer.status_code not in (200, 201):
                errors.append(f"{answer.status_code} {answer.text[:200]}")
            repeats += answer.status_code == 200
    return took, errors, repeats, sent_runs


def reader(
    base: str, stop: threading.Event, took: list[float], errors: list[str], within: float
) -> None:
    with httpx.Client(timeout=within) as client:
        while not stop.is_set():
            for path in READ:
                t0 = time.perf_counter()
                try:
                    answer = client.get(base + path)
                except httpx.TimeoutException:
                    took.append(float("inf"))
                    continue
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


def quantile(values: list[float], q: int) -> float:
    """The q-th percentile (inf where the answer never came)."""
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q / 100))]


def load(url: str, args: argparse.Namespace, doc: dict, folder: Path) -> dict:
    migrate(url)  # before the workers start
    server, base = serve(url, args.workers, folder)
    stop, read_took, read_errors = threading.Event(), [], []
    readers = [threading.Thread(target=reader, args=(base, stop, read_took, read_errors,
                                                     args.answer_within))
               for _ in range(args.readers)]  # fmt: skip
    try:
        for t in readers:
            t.start()
        t0 = time.perf_counter()
        until = time.time() + (args.seconds or 1e9)
        with ProcessPoolExecutor(args.runners) as pool:
            done = list(pool.map(pusher, [base] * args.runners, range(args.runners),
                                 [args.runs] * args.runners, [doc] * args.runners,
                                 [until] * args.runners))  # fmt: skip
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
    push_took = [t for took, *_ in done for t in took]
    return {
        "pushes": len(push_took),
        "wall": wall,
        "push_p50": statistics.median(push_took),
        "push_p95": quantile(push_took, 95),
        "push_errors": sum(len(e) for _, e, *_ in done),
        "repeats_answered_stored": sum(r for *_, r, _ in done),
        "reads": len(read_took),
        "read_p50": statistics.median(read_took),
        "read_p95": quantile(read_took, 95),
        "read_p99": quantile(read_took, 99),
        "unanswered": sum(t == float("inf") for t in read_took),
        "read_errors": len(read_errors),
        "runs_stored": stored,
        "distinct_origins": distinct,
        "expected": sum(sent for *_, sent in done),
        "errors": [e for _, es, *_ in done for e in es][:3] + read_errors[:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg-url", required=True)
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--tests", type=int, default=2600)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--broken", action="store_true", help="every test fails, ~990 chars")
    parser.add_argument("--seconds", type=float, help="push for this long (at most --runs)")
    parser.add_argument("--answer-within", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        doc = template(args.tests, folder, args.broken)
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
        (f"of which unanswered within {args.answer_within:g} s", lambda r: str(r["unanswered"])),
        (
            "read p50 / p95 / p99",
            lambda r: (
                " / ".join(f"{r[k] * 1000:.0f}" for k in ("read_p50", "read_p95", "read_p99"))
                + " ms"
            ),
        ),
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
