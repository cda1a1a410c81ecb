"""Attack a real `tracker serve` and the CLI, side by side on two source trees (e.g. the main
before the hardening, in a git worktree, and this checkout), and print the figures of
bench/README.md.

    git worktree add --detach /tmp/before <rev>
    python bench/hostile.py before=/tmp/before after=. [--only gate,hostile,load,races,kill]

Each tree runs as `python -m tracker.cli` with PYTHONPATH at the tree, on its own fresh database
and temp folder; nothing is shared between the two but this script. Needs psutil and httpx (the
dev extra).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "suites" / "realities"
TOKEN = "bench-hostile-token-0123456789"
MB = 1024 * 1024


class Tree:
    """One source tree's tracker, on a fresh database in its own folder."""

    def __init__(self, name: str, src: Path) -> None:
        self.name, self.src = name, src.resolve()
        self.dir = Path(tempfile.mkdtemp(prefix=f"hostile-{name}-"))
        self.tmp = self.dir / "tmp"
        self.tmp.mkdir()

    def env(self, db: str = "t.db") -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
        env.update(
            PYTHONPATH=str(self.src),
            TRACKER_DATABASE_URL=f"sqlite:///{self.dir / db}",
            TRACKER_TOKEN=TOKEN,
            TMPDIR=str(self.tmp),
        )
        return env

    def cli(self, *args: str, db: str = "t.db", **kw) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "tracker.cli", *args], cwd=self.dir, env=self.env(db), **kw
        )

    @contextlib.contextmanager
    def server(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = self.cli(
            "serve", "--no-scheduler", "--port", str(port),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        try:
            yield url, proc
        finally:
            proc.kill()
            proc.wait()


def reportlog(n: int, prefix: str = "t") -> bytes:
    lines = []
    for i in range(n):
        nodeid = f"{prefix}/test_{i % 50}.py::test_{i}"
        for when in ("setup", "call", "teardown"):
            lines.append(
                json.dumps(
                    {
                        "$report_type": "TestReport",
                        "nodeid": nodeid,
                        "when": when,
                        "outcome": "passed",
                        "duration": 0.01,
                        "start": 1764500000.0 + i,
                        "stop": 1764500000.01 + i,
                    }
                )
            )
    return ("\n".join(lines) + "\n").encode()


def hostile_files(folder: Path) -> dict[str, Path]:
    """The attack's files, built once: small on the wire, huge once opened."""
    folder.mkdir(exist_ok=True)
    files = {}
    path = folder / "newlines.jsonl.gz"  # one test, then 500 MB of newlines: ~510 KB
    if not path.exists():
        with gzip.open(path, "wb", compresslevel=9) as fh:
            fh.write(reportlog(1))
            for _ in range(500):
                fh.write(b"\n" * MB)
    files["gzip: 1 test + 500 MB of newlines"] = path
    path = folder / "bomb.zip"  # 1 GB of valid reportlog lines in a zip
    if not path.exists():
        line = b'{"$report_type": "SessionStart", "pytest_version": "8"}\n'
        block = line * (MB // len(line))
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("r.jsonl", "w") as fh:
            for _ in range(1024):
                fh.write(block)
    files["zip bomb: 1 GB of reportlog lines"] = path
    path = folder / "bomb.jsonl.gz"
    if not path.exists():
        line = b'{"$report_type": "SessionStart", "pytest_version": "8"}\n'
        block = line * (MB // len(line))
        with gzip.open(path, "wb", compresslevel=9) as fh:
            for _ in range(1024):
                fh.write(block)
    files["gzip bomb: 1 GB of reportlog lines"] = path
    path = folder / "big.jsonl.gz"
    if not path.exists():
        path.write_bytes(gzip.compress(reportlog(20_000, "big")))
    files["legit: 20,000-test reportlog"] = path
    return files


class Watch:
    """Peak RSS of the server and the slowest /healthz while something else happens."""

    def __init__(self, url: str, pid: int) -> None:
        self.url, self.proc = url, psutil.Process(pid)
        self.peak_rss, self.worst_health, self.health_errors = 0, 0.0, 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._rss, self._ping)]

    def _rss(self) -> None:
        while not self.stop.wait(0.05):
            with contextlib.suppress(psutil.Error):
                self.peak_rss = max(self.peak_rss, self.proc.memory_info().rss)

    def _ping(self) -> None:
        while not self.stop.wait(0.25):
            t0 = time.monotonic()
            try:
                httpx.get(f"{self.url}/healthz", timeout=30)
            except httpx.HTTPError:
                self.health_errors += 1
            self.worst_health = max(self.worst_health, time.monotonic() - t0)

    def __enter__(self) -> Watch:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()


def upload(url: str, content: bytes, name: str, suite: str = "s", timeout: float = 180) -> int:
    try:
        return httpx.post(
            f"{url}/api/v1/suites/{suite}/runs",
            headers={"Authorization": f"Bearer {TOKEN}"},
            data={"runner": "r"},
            files={"file": (name, content)},
            timeout=timeout,
        ).status_code
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"


# --- the scenarios: each returns rows of (what, value) for one tree ---


def _spooled(pid: int, folder: Path) -> int:
    """Bytes in the files the server holds open under its temp folder (the upload spool is an
    unnamed file there, invisible to a directory listing)."""
    total = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd).startswith(str(folder)):
                total += os.stat(fd).st_size
    return total


def gate(tree: Tree) -> list[tuple[str, str]]:
    """Bytes an unauthenticated client gets to send (and the server spools) before its answer."""
    rows = []
    with tree.server() as (url, server):
        port = int(url.rsplit(":", 1)[1])
        part = b'--b\r\nContent-Disposition: form-data; name="file"; filename="r.jsonl"\r\n\r\n'
        for label, headers, total in (
            ("no token, chunked, 200 MB", "Transfer-Encoding: chunked\r\n", 200 * MB),
            ("no token, Content-Length 200 MB", f"Content-Length: {200 * MB}\r\n", 200 * MB),
            (
                "token, Content-Length 10 GB",
                f"Authorization: Bearer {TOKEN}\r\nContent-Length: {10 * 1024 * MB}\r\n",
                10 * 1024 * MB,
            ),
        ):
            chunked = "chunked" in headers
            sock = socket.create_connection(("127.0.0.1", port), timeout=60)
            sock.sendall(
                (
                    "POST /api/v1/suites/s/runs HTTP/1.1\r\nHost: x\r\n"
                    f"Content-Type: multipart/form-data; boundary=b\r\n{headers}\r\n"
                ).encode()
            )
            sent, peak_spool, answer = 0, 0, b""
            started = time.monotonic()
            block = part + b"x" * (MB - len(part))
            try:
                while sent < min(total, 400 * MB) and time.monotonic() - started < 60:
                    readable, _, _ = select.select([sock], [], [], 0)
                    if readable:
                        answer = sock.recv(200)
                        break
                    payload = b"%x\r\n%s\r\n" % (len(block), block) if chunked else block
                    sock.sendall(payload)
                    sent += len(block)
                    block = b"x" * MB
                    if sent % (16 * MB) == 0:
                        peak_spool = max(peak_spool, _spooled(server.pid, tree.tmp))
                if not answer:
                    sock.settimeout(30)
                    answer = sock.recv(200)
            except OSError:
                with contextlib.suppress(OSError):
                    answer = answer or sock.recv(200)
            finally:
                sock.close()
            status = answer.split(b" ", 2)[1].decode() if answer.count(b" ") >= 2 else "no answer"
            rows.append(
                (
                    label,
                    f"{status}; {peak_spool / MB:.0f} MB spooled to disk "
                    f"(client sent {sent / MB:.0f} MB)",
                )
            )
    return rows


def hostile(tree: Tree, files: dict[str, Path]) -> list[tuple[str, str]]:
    rows = []
    with tree.server() as (url, proc):
        for label, path in files.items():
            with Watch(url, proc.pid) as watch:
                t0 = time.monotonic()
                status = upload(url, path.read_bytes(), path.name)
                took = time.monotonic() - t0
            rows.append(
                (
                    label,
                    f"{status} in {took:.1f} s; peak RSS {watch.peak_rss / MB:.0f} MB; "
                    f"slowest /healthz {watch.worst_health:.2f} s"
                    + (f" ({watch.health_errors} failed)" if watch.health_errors else ""),
                )
            )
    return rows


PAGES = ["/", "/suites/load", "/api/v1/suites", "/healthz", "/runs/1", "/badge/load.svg"]


def load(tree: Tree) -> list[tuple[str, str]]:
    rows = []
    big = gzip.compress(reportlog(2_000, "load"))
    with tree.server() as (url, _), httpx.Client(base_url=url, timeout=120) as http:
        upload(url, big, "seed.jsonl.gz", suite="load")

        def get(i: int):
            try:
                return http.get(PAGES[i % len(PAGES)]).status_code
            except httpx.HTTPError as exc:
                return type(exc).__name__

        for label, uploads, gets, rounds in (
            ("1 upload + 30 page views, 3 rounds", 1, 30, 3),
            ("20 parallel uploads + 200 GETs", 20, 200, 1),
        ):
            statuses = []
            t0 = time.monotonic()
            for _ in range(rounds):
                with ThreadPoolExecutor(64) as pool:
                    ups = [
                        pool.submit(upload, url, big, "l.jsonl.gz", "load") for _ in range(uploads)
                    ]
                    views = [pool.submit(get, i) for i in range(gets)]
                    statuses += [f.result() for f in ups + views]
            bad = [s for s in statuses if not isinstance(s, int) or s >= 500]
            rows.append(
                (
                    label,
                    f"{len(bad)} of {len(statuses)} answered 5xx or failed "
                    f"({', '.join(sorted({str(b) for b in bad})) or 'none'}); "
                    f"{time.monotonic() - t0:.1f} s",
                )
            )
    return rows


def races(tree: Tree) -> list[tuple[str, str]]:
    rows = []
    procs = [
        tree.cli("runs", "--json", db="first.db", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(12)
    ]
    failed = sum(p.wait() != 0 for p in procs)
    rows.append(("12 parallel first commands on a fresh database", f"{failed} failed"))
    files = []
    for i in range(18):
        path = tree.dir / f"race{i}.jsonl"
        path.write_bytes(reportlog(5, f"r{i}"))
        files.append(path)
    procs = [
        tree.cli(
            "ingest",
            str(f),
            "--suite",
            "brand-new",
            "--runner",
            "r",
            db="race.db",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for f in files
    ]
    failed = sum(p.wait() != 0 for p in procs)
    stored = sqlite3.connect(tree.dir / "race.db").execute("SELECT count(*) FROM run").fetchone()[0]
    rows.append(
        ("18 parallel ingests creating one suite", f"{failed} failed, {stored} of 18 stored")
    )
    return rows


CONFIG = """
data_dir = "{data}"
[runner]
name = "bench"
device = "cpu"
[scheduler]
poll_seconds = 1
[[suites]]
name = "realities"
path = "{suite}"
python = "{python}"
args = ["test_outcomes.py", "test_hang.py"]
test_timeout = 300
reruns = 0
env = {{ FIXTURE_STATE = "{state}" }}
"""


def _pytest_left(folder: Path) -> int:
    """pytest processes still working for the run's folder (by their command line)."""
    count = 0
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "pytest" in cmd and str(folder) in cmd:
            count += 1
    return count


def _wait_for_hang(data: Path, deadline: float) -> Path | None:
    while time.monotonic() < deadline:
        for events in data.glob("runs/realities/*/p0.events.jsonl"):
            if "test_hang.py::test_hang" in events.read_text():
                return events.parent
        time.sleep(0.2)
    return None


def _until_closed(db: Path, limit: float) -> str:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        with contextlib.closing(sqlite3.connect(db)) as con:
            row = con.execute("SELECT status FROM run ORDER BY id DESC LIMIT 1").fetchone()
        if row and row[0] != "running":
            return f"{row[0]} after {time.monotonic() - t0:.0f} s"
        time.sleep(1)
    return f"still running after {limit:.0f} s"


def _owner(db: Path) -> int | None:
    with contextlib.closing(sqlite3.connect(db)) as con:
        row = con.execute("SELECT pid FROM run WHERE status = 'running'").fetchone()
    return row[0] if row else None


def kill(tree: Tree) -> list[tuple[str, str]]:
    """kill -9 of the tracker that owns a running run (hung in a test): what is left running,
    and when the run is closed (by `tracker runs`, or by the surviving scheduler)."""
    rows = []
    for how in ("tracker run", "tracker scheduler"):
        work = tree.dir / how.replace(" ", "-")
        work.mkdir()
        config = work / "tracker.toml"
        config.write_text(
            CONFIG.format(data=work / "data", suite=SUITE, python=sys.executable, state=work)
        )
        db = f"{work.name}.db"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        if how == "tracker run":
            procs = [tree.cli("--config", str(config), "run", "realities", db=db, **quiet)]
        else:  # two schedulers on one database; whichever takes the request is the victim
            procs = [
                tree.cli("--config", str(config), "scheduler", db=db, **quiet) for _ in range(2)
            ]
            time.sleep(8)
            with contextlib.closing(sqlite3.connect(tree.dir / db)) as con:
                con.execute(
                    "INSERT INTO run_request (suite, runner, state, requested_at) "
                    "VALUES ('realities', 'bench', 'queued', datetime('now'))"
                )
                con.commit()
        folder = _wait_for_hang(work / "data", time.monotonic() + 120)
        owner = _owner(tree.dir / db)
        victim = next((p for p in procs if p.pid == owner), None)
        if folder is None or victim is None:
            rows.append((f"kill -9 of {how}", "the run never reached its hanging test"))
        else:
            before = _pytest_left(folder)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            time.sleep(2)
            left = _pytest_left(folder)
            if how == "tracker run":  # the next command a maintainer types
                tree.cli("--config", str(config), "runs", "--json", db=db, **quiet).wait()
                closed = _until_closed(tree.dir / db, 5)
            else:
                closed = _until_closed(tree.dir / db, 75)
            rows.append(
                (
                    f"kill -9 of {how}",
                    f"pytest processes: {before} before, {left} 2 s after; run {closed}",
                )
            )
        for proc in procs:
            proc.kill()
            proc.wait()
        for proc in psutil.process_iter(["cmdline"]):  # clean up what the old tree leaves
            if folder and str(folder) in " ".join(proc.info["cmdline"] or []):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="name=path of a source tree")
    parser.add_argument("--only", default="gate,hostile,load,races,kill")
    args = parser.parse_args()
    trees = [Tree(name, Path(src)) for name, src in (t.split("=", 1) for t in args.trees)]
    only = args.only.split(",")
    files = hostile_files(Path(tempfile.gettempdir()) / "hostile-files")
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}")
    for scenario in only:
        print(f"\n## {scenario}\n")
        print("| | " + " | ".join(t.name for t in trees) + " |")
        print("| --- |" + " --- |" * len(trees))
        results = []
        for tree in trees:
            func = {"gate": gate, "hostile": lambda t: hostile(t, files), "load": load,
                    "races": races, "kill": kill}[scenario]  # fmt: skip
            results.append(dict(func(tree)))
        for label in results[0]:
            print(f"| {label} | " + " | ".join(r.get(label, "-") for r in results) + " |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
