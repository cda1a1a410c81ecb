"""Paths and small helpers shared by the tests."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SUITES = Path(__file__).parent / "suites"
DATA = Path(__file__).parent / "data"


def outcomes(detail: dict) -> dict[str, tuple[str, list[str]]]:
    """nodeid -> (final outcome, [attempt outcomes])"""
    return {
        r["nodeid"]: (r["outcome"], [a["outcome"] for a in r["attempts"]])
        for r in detail["results"]
    }


TRACKER = [sys.executable, "-m", "tracker.cli"]
SERVING = re.compile(rb"Uvicorn running on https?://\S+:(\d+)")


def wait_until(predicate, timeout: float) -> bool:
    """Whether `predicate` came true within `timeout` seconds (asked every 0.2 s)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def served_port(log: Path, proc: subprocess.Popen, timeout: float = 120) -> int:
    """The port a `tracker serve --port 0` took, read back from its log: the server binds it
    itself, so no other test can take it between a probe and the bind."""
    wait_until(lambda: SERVING.search(log.read_bytes()) or proc.poll() is not None, timeout)
    found = SERVING.search(log.read_bytes())
    assert found, f"tracker serve never said where it listens: {log.read_bytes()[-2000:]!r}"
    return int(found.group(1))


# the database of `tracker()` commands (a test module may set it from `db_url`); None: a SQLite
# file in the test's folder
cli_database: str | None = None


def tracker(
    tmp_path: Path, *args: str, config: str | None = None, process: bool = False
) -> subprocess.CompletedProcess:
    """`tracker ARGS` run in `tmp_path` (with `config` as its tracker.toml), on `cli_database`
    or a SQLite file there. In this process, as the `tracker` script's own `main` (Click's
    isolation: its argv, streams and environment), unless `process`: a real process, where that
    is the point (the installed entry point, signals, output a terminal would get)."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("TRACKER_")}
    env["TRACKER_DATABASE_URL"] = cli_database or f"sqlite:///{tmp_path / 'cli.db'}"
    if config is not None:
        (tmp_path / "tracker.toml").write_text(config)
    if process:
        full = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
        return subprocess.run(
            [*TRACKER, *args], cwd=tmp_path, env=full, capture_output=True, text=True, timeout=300
        )
    return _in_process(tmp_path, list(args), env)


def _in_process(cwd: Path, args: list[str], env: dict[str, str | None]):
    import traceback

    from click.testing import CliRunner

    from tracker.analysis.report import cache
    from tracker.cli import main

    cache.clear()  # what a new process starts with
    code = 0
    before, argv = Path.cwd(), sys.argv
    with CliRunner().isolation(env=env) as (stdout, stderr, _):
        os.chdir(cwd)
        sys.argv = ["tracker", *args]
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # what Python prints when a command dies
            traceback.print_exc()
            code = 1
        finally:
            sys.argv = argv
            os.chdir(before)
        sys.stdout.flush()
        sys.stderr.flush()
        out, error = stdout.getvalue().decode(), stderr.getvalue().decode()
    return subprocess.CompletedProcess(["tracker", *args], code, out, error)


def junit(cases: dict[str, tuple[str, str | None]]) -> str:
    """A JUnit XML file: nodeid -> (passed|failed|skipped, message)."""
    from xml.sax.saxutils import quoteattr

    rows = []
    for nodeid, (outcome, message) in cases.items():
        path, name = nodeid.split("::", 1)
        classname = path.removesuffix(".py").replace("/", ".")
        inner = ""
        if outcome == "failed":
            inner = f"<failure message={quoteattr(message or '')}>trace</failure>"
        elif outcome == "skipped":
            inner = f"<skipped message={quoteattr(message or '')}/>"
        rows.append(
            f'<testcase classname="{classname}" name={quoteattr(name)} time="0.5">{inner}'
            "</testcase>"
        )
    return f'<testsuite name="pytest">{"".join(rows)}</testsuite>'


def settings_for(folder: Path, url: str | None = None, **fields: Any):
    """The tests' one way to build settings: the database at `url` (else a SQLite file in
    `folder`), the data folder in `folder`, a CPU runner named "ci", and what a test adds.
    The database is migrated, as a command or the web app does at its start."""
    from tracker.config import RunnerConfig, Settings
    from tracker.db import migrate

    defaults = {
        "database_url": url or f"sqlite:///{folder / 'tracker.db'}",
        "data_dir": folder / "data",
        "runner": RunnerConfig(name="ci", device="cpu"),
    }
    settings = Settings(**{**defaults, **fields})
    migrate(settings.database_url)
    return settings


@contextmanager
def live_server(app) -> Iterator[str]:
    """A real uvicorn on a free port of 127.0.0.1, in a thread; yields its base URL."""
    import socket
    import threading
    import time

    import uvicorn

    # the socket is bound here and handed over: no other process can take the port in between
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


HOSTILE = '<script>alert("x")</script>'


def fill(settings, tmp_path: Path) -> None:
    """A database as a maintainer would have it after a few nights: ingested JUnit files with a
    flaky and a broken test, the recorded reportlog with a poisoned-device cascade, a run of the
    fixture suite by the real runner, and hostile test ids and messages."""
    from datetime import UTC, datetime, timedelta

    from tracker import quarantine, store
    from tracker.config import SuiteConfig
    from tracker.db import session_scope
    from tracker.ingest import load_run
    from tracker.runner.execute import execute
    from tracker.service import history

    a = "test/transformers/test_rms_norm.py::test_rms[fp32]"
    b = "test/transformers/test_mlp.py::test_falcon[bf16]"
    c = "test/transformers/test_rope.py::test_rope[fp32]"
    evil = f"test/transformers/test_evil.py::test_x[{HOSTILE}-'quoted'-ñ-中文]"
    oor = "OutOfResources: shared memory, Required: {}, Hardware limit: 65536"
    nights = [
        {
            a: ("passed", None),
            b: ("failed", oor.format(98304)),
            c: ("passed", None),
            evil: ("passed", None),
        },
        {
            a: ("passed", None),
            b: ("passed", None),
            c: ("passed", None),
            evil: ("failed", f'AssertionError: {HOSTILE} "quotes" & ünïcödé ' + "x" * 3000),
        },
        {
            a: ("passed", None),
            b: ("failed", oor.format(131072)),
            c: ("failed", "rope 0.031"),
            evil: ("passed", None),
        },
        {
            a: ("passed", None),
            b: ("passed", None),
            c: ("failed", "rope 0.029"),
            evil: ("passed", None),
        },
    ]
    now = datetime.now(UTC)
    with session_scope(settings.database_url) as session:
        for i, cases in enumerate(nights):
            path = tmp_path / f"night{i}.xml"
            path.write_text(junit(cases))
            record = load_run(
                path,
                suite="transformers",
                runner="a2-910b4",
                commit=f"c{i}",
                started_at=now - timedelta(days=len(nights) - i, hours=1),
            )
            store.save_run(session, record)
            if i == 2:  # the last night's rope failure is quarantined: a "passed" run hides it
                quarantine.add(session, "transformers", c, "rope drift on A2", "ci-bot")
        record = load_run(
            DATA / "reportlog_complete.jsonl",
            suite="transformers",
            runner="gha-910b4",
            commit="c3",
            started_at=now - timedelta(hours=3),
        )
        store.save_run(session, record)
        suite = SuiteConfig(
            name="realities",
            path=SUITES / "realities",
            python=sys.executable,
            args=["test_outcomes.py", "test_ids.py", "test_order.py"],
            env={"FIXTURE_STATE": str(tmp_path)},
            test_timeout=5,
            reruns=1,
        )
        store.save_run(session, execute(settings, suite, read_history=history(settings, suite)))


_pg_numbers = itertools.count()


def make_pg_database(server: str, template: str | None = "tracker_template") -> str:
    """A new database on the test PostgreSQL server (`pg_server`), a copy of the migrated
    template; without one, the template itself. Returns its URL."""
    import psycopg

    name = f"t{os.getpid()}_{next(_pg_numbers)}" if template else "tracker_template"
    with psycopg.connect(host=server, user="postgres", dbname="postgres", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    return f"postgresql+psycopg://postgres@/{name}?host={server}"
