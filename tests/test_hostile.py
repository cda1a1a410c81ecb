"""Hostile input, load and faults: each finding of the attack on `tracker serve` and the CLI,
reproduced against the real thing (uvicorn on 127.0.0.1, CLI subprocesses, real pytest processes)
and now held."""

from __future__ import annotations

import gzip
import io
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from helpers import SUITES, TRACKER, junit, live_server, settings_for, tracker, wait_until
from sqlalchemy import func, select, update

from tracker import quarantine, store
from tracker.config import Settings
from tracker.db import session_scope
from tracker.ingest import IngestError, read_results
from tracker.models import Case, Run, Suite
from tracker.records import RunRecord
from tracker.recovery import HOST, keep_recovering
from tracker.runner import jail
from tracker.web.app import create_app

TOKEN = "hostile-tests-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return settings_for(tmp_path, db_url, token=TOKEN, upload_max_mb=1)


@pytest.fixture
def client(settings: Settings) -> TestClient:
    return TestClient(create_app(settings))


def post(client, content: bytes, name="r.jsonl", suite="s", **form) -> httpx.Response:
    return client.post(
        f"/api/v1/suites/{suite}/runs",
        headers=AUTH,
        data={"runner": "r", **form},
        files={"file": (name, content)},
    )


def report(nodeid: str, when: str, outcome: str, **extra) -> dict:
    return {
        "$report_type": "TestReport",
        "nodeid": nodeid,
        "when": when,
        "outcome": outcome,
        "duration": 0.1,
        **extra,
    }


def reportlog(*records: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def passing(nodeid: str = "t.py::a", **call) -> list[dict]:
    return [
        report(nodeid, "setup", "passed"),
        report(nodeid, "call", "passed", **call),
        report(nodeid, "teardown", "passed"),
    ]


def timed(start: float) -> list[dict]:
    return [
        report("t.py::a", when, "passed", start=start, stop=start + 1)
        for when in ("setup", "call", "teardown")
    ]


def stored_runs(settings: Settings) -> int:
    with session_scope(settings.database_url) as session:
        return session.execute(select(func.count()).select_from(Run)).scalar_one()


# 1. The token and the size are checked before the body is read.


def _raw(url: str, head: str, body_chunks=()) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode())
        try:
            for chunk in body_chunks:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: what it answered is still there to read
        return sock.recv(65536)


BEARER = f"Authorization: Bearer {TOKEN}\r\n"
HEAD = (
    "POST /api/v1/suites/s/runs HTTP/1.1\r\nHost: x\r\n"
    "Content-Type: multipart/form-data; boundary=b\r\n{extra}\r\n"
)


def test_unauthenticated_upload_is_refused_before_any_body(settings):
    with live_server(create_app(settings)) as url:
        # not a byte of body sent: the answer must come anyway
        chunked = _raw(url, HEAD.format(extra="Transfer-Encoding: chunked\r\n"))
        declared = _raw(
            url,
            HEAD.format(
                extra=f"Authorization: Bearer {TOKEN}\r\nContent-Length: {10 * 1024**3}\r\n"
            ),
        )
        part = b'--b\r\nContent-Disposition: form-data; name="file"; filename="r.jsonl"\r\n\r\n'
        chunks = [part, *[b"{}\n" * 16384] * 64]  # 4 MB against the 1 MB limit
        streamed = _raw(
            url,
            HEAD.format(extra=f"{BEARER}Transfer-Encoding: chunked\r\n"),
            [b"%x\r\n%s\r\n" % (len(c), c) for c in chunks],
        )
    assert chunked.startswith(b"HTTP/1.1 401"), chunked[:100]
    assert declared.startswith(b"HTTP/1.1 413"), declared[:100]
    assert streamed.startswith(b"HTTP/1.1 413"), streamed[:100]
    assert stored_runs(settings) == 0


# 2. Uploads parse off the event loop and the pool serves everyone: no 5xx under load.


def test_uploads_beside_page_views_give_no_server_error(settings):
    settings.upload_max_mb = 64
    big = junit({f"t/test_{i % 40}.py::test_{i}": ("passed", None) for i in range(2000)}).encode()
    # 8 uploads of 2,000 results and 80 page views at once: on two busy cores (the suite at -n 6)
    # an upload to PostgreSQL waited over 60 s for its answer; a server error, not a wait, fails
    with live_server(create_app(settings)) as url, httpx.Client(base_url=url, timeout=300) as http:

        def upload(i: int) -> int:
            return http.post(
                "/api/v1/suites/load/runs",
                headers=AUTH,
                data={"runner": f"r{i % 3}"},
                files={"file": ("j.xml", big)},
            ).status_code

        def view(i: int) -> int:
            path = ["/", "/api/v1/suites", "/healthz", "/suites/load", "/badge/load.svg"][i % 5]
            return http.get(path).status_code

        with ThreadPoolExecutor(40) as pool:
            ups = [pool.submit(upload, i) for i in range(8)]
            gets = [pool.submit(view, i) for i in range(80)]
            statuses = [f.result() for f in ups], [f.result() for f in gets]
    assert statuses[0] == [201] * 8
    assert all(s < 500 for s in statuses[1]), statuses[1]
    assert stored_runs(settings) == 8


# 3. Bounded decompression, lines, results; paginated reads.


def test_gzip_of_endless_newlines_is_refused_by_its_line_count(client, settings, monkeypatch):
    monkeypatch.setattr("tracker.ingest.MAX_LINES", 100_000)
    body = b"".join(passing()) if False else reportlog(*passing()) + b"\n" * 3_000_000
    r = post(client, gzip.compress(body), name="r.jsonl.gz")
    assert r.status_code == 400 and "more than 100,000 lines" in r.json()["detail"]
    assert stored_runs(settings) == 0


def test_zip_and_gzip_bombs_stop_at_the_limit():
    data = reportlog(*passing()) * 20_000  # ~4 MB
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("inner.jsonl.gz", gzip.compress(data))
    for blob, name in ((zipped.getvalue(), "bomb.zip"), (gzip.compress(gzip.compress(data)), "gz")):
        with pytest.raises(IngestError, match="larger than 1 MB uncompressed"):
            read_results(io.BytesIO(blob), name, limit=1024 * 1024)


def test_too_many_results_are_refused(client, monkeypatch):
    monkeypatch.setattr("tracker.ingest.MAX_RESULTS", 10)
    xml = junit({f"t.py::test_{i}": ("passed", None) for i in range(11)}).encode()
    r = post(client, xml, name="j.xml")
    assert r.status_code == 400 and "more than 10 test results" in r.json()["detail"]
    records = [rec for i in range(11) for rec in passing(f"t.py::test_{i}")]
    r = post(client, reportlog(*records))
    assert r.status_code == 400 and "more than 10 test results" in r.json()["detail"]


def test_run_results_are_read_a_page_at_a_time(client, settings):
    settings.upload_max_mb = 64
    xml = junit({f"t.py::test_{i:04}": ("passed", None) for i in range(2500)}).encode()
    run = post(client, xml, name="j.xml").json()["run"]["id"]
    first = client.get(f"/api/v1/runs/{run}").json()
    assert (len(first["results"]), first["total"]) == (1000, 2500)
    last = client.get(f"/api/v1/runs/{run}", params={"offset": 2000, "limit": 1000}).json()
    assert [r["nodeid"] for r in last["results"]][:1] == ["t.py::test_2000"]
    assert len(last["results"]) == 500
    assert client.get(f"/api/v1/runs/{run}", params={"limit": 5000}).status_code == 422
    page = client.get(f"/runs/{run}").text  # a page, 200 rows, what failed first
    assert "1–200 shown" in page and "offset=200" in page
    assert page.count('<tr><td class="id"><a href="/tests/') == 200


# 4 and 5. Exports a maintainer pastes, and what the terminal shows.

PWN = "t/test_x.py::test_y['$(touch PWNED)' `touch PWNED2`]"


def test_proposed_quarantine_command_is_safe_to_paste(tmp_path):
    for night in range(6):
        path = tmp_path / f"n{night}.xml"
        outcome = "failed" if night % 2 else "passed"
        path.write_text(junit({PWN: (outcome, "boom"), "t/test_x.py::test_ok": ("passed", None)}))
        ingested = tracker(tmp_path, "ingest", str(path), "--suite", "s", "--runner", "r")
        assert ingested.returncode in (0, 1), ingested.stderr
    proposed = tracker(tmp_path, "quarantine", "propose", "--suite", "s")
    assert proposed.returncode == 0, proposed.stderr
    lines = [ln for ln in proposed.stdout.splitlines() if ln.startswith("tracker ")]
    assert len(lines) == 1
    # paste it into a shell, with `tracker` standing in to show what it would receive
    shell = subprocess.run(
        ["bash", "-c", f'tracker() {{ printf "%s\\n" "$@"; }}\n{lines[0]}'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert not list(tmp_path.glob("PWNED*"))
    assert PWN in shell.stdout.splitlines()


def test_deselect_lines_cannot_add_options(settings, tmp_path):
    xml = (
        '<testsuite name="pytest"><testcase classname="t" name="a&#10;-p no:cacheprovider'
        ' --rootdir=/evil"><failure message="x"/></testcase></testsuite>'
    )
    path = tmp_path / "j.xml"
    path.write_text(xml)
    from tracker.ingest import load_run

    record = load_run(path, suite="s", runner="r")
    with session_scope(settings.database_url) as session:
        store.save_run(session, record)
        suite_id = session.execute(select(Suite.id)).scalar_one()
        # an id stored before validation existed, newline and all
        session.add(
            Case(suite_id=suite_id, nodeid="t.py::b\n--rootdir=/evil2", file="t.py", kernel="t")
        )
        session.commit()
        for nodeid in session.execute(select(Case.nodeid)).scalars().all():
            quarantine.add(session, "s", nodeid, "test", "me", force=True)
        lines = quarantine.deselect_lines(quarantine.active(session, "s"))
    assert len(lines) == 2
    for line in lines:
        words = shlex.split(line)
        assert words[0] == "--deselect" and len(words) == 2 and "\n" not in words[1]
    assert "t.py::a\\n-p no:cacheprovider --rootdir=/evil" in [shlex.split(x)[1] for x in lines]


def test_terminal_escapes_in_ids_and_messages_are_shown_as_text(tmp_path):
    evil = "\x1b[2J\x1b]0;owned\x07\x1b]52;c;ZXZpbA==\x07"
    nodeid = f"t.py::test_x[{evil}]"
    records = [
        report(nodeid, "setup", "passed"),
        report(nodeid, "call", "failed", longrepr=f"E   AssertionError: {evil}"),
        report(nodeid, "teardown", "passed"),
    ]
    path = tmp_path / "r.jsonl"
    path.write_bytes(reportlog(*records))
    ingested = tracker(tmp_path, "ingest", str(path), "--suite", "s", "--runner", "r")
    shown = tracker(tmp_path, "show", "1")
    listed = tracker(tmp_path, "runs")
    for result in (ingested, shown, listed):
        assert "\x1b" not in result.stdout + result.stderr
        assert "\x07" not in result.stdout + result.stderr
    assert "\\x1b[2J" in shown.stdout


# 6 and 7. Hostile but well-formed files: a clear 400 (exit 2) or stored, never a 500.

DEEP_JSON = '{"a":' * 10_000 + "1" + "}" * 10_000
FUTURE = datetime(9998, 1, 1, tzinfo=UTC).timestamp()
HOSTILE_FILES = {
    "longrepr-chain-of-a-number": (reportlog(*passing(longrepr={"chain": 5})), 201),
    "longrepr-sections-a-string": (
        reportlog(
            report("t.py::a", "setup", "passed"),
            report("t.py::a", "call", "failed", longrepr={"reprcrash": 1, "sections": "abc"}),
            report("t.py::a", "teardown", "passed"),
        ),
        201,
    ),
    "longrepr-a-list-of-two": (reportlog(*passing(longrepr=[1, 2])), 201),
    "duration-nan": (reportlog(*passing(duration=float("nan"))), 400),
    "duration-infinite": (reportlog(*passing(duration=float("inf"))), 400),
    "duration-huge": (reportlog(*passing(duration=1e300)), 400),
    "start-huge": (reportlog(*timed(1e300)), 201),
    "start-year-9998": (reportlog(*timed(FUTURE)), 400),
    "json-nested-10000-deep": (
        f'{{"$report_type": "TestReport", "x": {DEEP_JSON}}}\n'.encode(),
        400,
    ),
    "xml-nested-10000-deep": (
        ("<testsuite>" * 10_000 + "</testsuite>" * 10_000).encode(),
        400,
    ),
    "junit-timestamp-9999": (
        b'<testsuite name="x" timestamp="9999-12-31T23:00:00" time="7200">'
        b'<testcase classname="c" name="a"/></testsuite>',
        400,
    ),
    "junit-time-nan": (
        b'<testsuite><testcase classname="c" name="a" time="NaN"/></testsuite>',
        201,
    ),
    "outcome-a-list": (
        reportlog(report("t.py::a", "setup", ["passed"]), report("t.py::a", "teardown", {})),
        201,
    ),
}


@pytest.mark.parametrize("case", HOSTILE_FILES, ids=list(HOSTILE_FILES))
def test_hostile_files_get_a_clear_answer(client, settings, case):
    content, expected = HOSTILE_FILES[case]
    name = "r.xml" if content.startswith(b"<") else "r.jsonl"
    r = post(client, content, name=name)
    assert r.status_code == expected, r.text
    assert stored_runs(settings) == (1 if expected == 201 else 0)


@pytest.mark.parametrize("case", ["duration-nan", "json-nested-10000-deep", "junit-timestamp-9999"])
def test_hostile_files_get_exit_2_from_the_cli(tmp_path, case):
    content, _ = HOSTILE_FILES[case]
    path = tmp_path / ("r.xml" if content.startswith(b"<") else "r.jsonl")
    path.write_bytes(content)
    result = tracker(tmp_path, "ingest", str(path), "--suite", "s", "--runner", "r")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")


@pytest.mark.parametrize(
    ("started_at", "reason"),
    [
        ("0001-01-01T00:00:00+05:00", "outside 2000"),
        ("9999-12-30T00:00:00+00:00", "outside 2000"),
        ("2026-11-29T22:00:00", "offset"),
    ],
)
def test_start_times_out_of_bounds_are_refused(client, started_at, reason):
    r = post(client, reportlog(*passing()), started_at=started_at)
    assert r.status_code == 400 and reason in r.json()["detail"]


def test_a_far_future_run_cannot_pin_the_badge(client):
    good = post(client, reportlog(*passing()))
    assert good.status_code == 201
    future = post(client, reportlog(*passing()), started_at="9999-12-30T00:00:00+00:00")
    assert future.status_code == 400
    failing = reportlog(
        report("t.py::a", "setup", "passed"),
        report("t.py::a", "call", "failed", longrepr="E   boom"),
        report("t.py::a", "teardown", "passed"),
    )
    assert post(client, failing).status_code == 201
    assert "failed" in client.get("/badge/s.svg", params={"metric": "status"}).text


def test_ids_beyond_64_bits_are_a_422(client):
    huge = 2**64
    for path in (
        f"/api/v1/runs/{huge}",
        f"/runs/{huge}",
        f"/tests/{huge}",
        f"/api/v1/tests/{huge}",
    ):
        assert client.get(path).status_code == 422, path


# 8. A dead tracker's run is closed by any survivor; its pytest children die with it.


def _workers_of(folder: Path) -> list[int]:
    marker = f"TRACKER_WORKDIR={folder}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _tracker_run_in_background(folder: Path, config: str, suite: str) -> subprocess.Popen:
    """`tracker run SUITE` as its own process, with `config` as its tracker.toml: to be killed."""
    (folder / "tracker.toml").write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_DATABASE_URL"] = f"sqlite:///{folder / 'cli.db'}"
    return subprocess.Popen([*TRACKER, "run", suite], cwd=folder, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux")
def test_kill_9_of_tracker_run_leaves_no_pytest_and_keeps_results(tmp_path):
    config = f"""
data_dir = "{tmp_path / "data"}"
[runner]
name = "ci"
device = "cpu"
[[suites]]
name = "realities"
path = "{SUITES / "realities"}"
python = "{sys.executable}"
args = ["test_outcomes.py", "test_hang.py"]
test_timeout = 120
reruns = 0
env = {{ FIXTURE_STATE = "{tmp_path}" }}
"""
    proc = _tracker_run_in_background(tmp_path, config, "realities")
    started = '"e": "start", "nodeid": "test_hang.py::test_hang"'  # not just collected

    def hanging() -> list[Path]:
        events = list((tmp_path / "data").glob("runs/realities/*/p0.events.jsonl"))
        return [e for e in events if started in e.read_text()]

    if not wait_until(hanging, 120):
        proc.kill()
        pytest.fail("the run never reached the hanging test")
    folder = hanging()[0].parent
    assert _workers_of(folder), "the pytest process should be running"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert wait_until(lambda: not _workers_of(folder), 10)
    listed = tracker(tmp_path, "runs", "--json")
    run = json.loads(listed.stdout)["runs"][0]
    assert run["status"] == "interrupted"
    assert run["counts"]["passed"] >= 1 and run["counts"]["failed"] >= 1


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


needs_cgroup = pytest.mark.skipif(
    jail.base() is None, reason="no writable cgroup here: the README says what is then not covered"
)


@needs_cgroup
def test_a_grandchild_in_its_own_session_ends_with_the_run(run_suite, tmp_path):
    run = run_suite(suite="escape", reruns=0)
    assert run["run"]["counts"] == {"passed": 2}
    escapee = int((tmp_path / "state" / "escapee.pid").read_text())
    assert not _alive(escapee)


@needs_cgroup
def test_a_grandchild_in_its_own_session_ends_in_the_recovery_after_kill_9(tmp_path):
    config = f"""
data_dir = "{tmp_path / "data"}"
[runner]
name = "ci"
device = "cpu"
[[suites]]
name = "escape"
path = "{SUITES / "escape"}"
python = "{sys.executable}"
test_timeout = 120
env = {{ FIXTURE_STATE = "{tmp_path}", ESCAPE_HANG = "1" }}
"""
    proc = _tracker_run_in_background(tmp_path, config, "escape")
    pid_file = tmp_path / "escapee.pid"
    if not wait_until(lambda: pid_file.exists() and pid_file.read_text(), 60):
        proc.kill()
        pytest.fail("the test never started its grandchild")
    escapee = int(pid_file.read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _alive(escapee)  # what a process group and a parent-death signal miss
    listed = tracker(tmp_path, "runs", "--json")  # recovers the run the kill left open
    assert json.loads(listed.stdout)["runs"][0]["status"] == "interrupted"
    assert not _alive(escapee)


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _running(settings: Settings, host: str, pid: int, heartbeat: datetime | None) -> int:
    record = RunRecord(suite="s", runner="ci", source="runner", started_at=datetime.now(UTC))
    with session_scope(settings.database_url) as session:
        run = store.start_run(session, record, host, pid)
        run.heartbeat_at = heartbeat
        session.commit()
        return run.id


def _status(settings: Settings, run_id: int) -> str:
    with session_scope(settings.database_url) as session:
        return session.get(Run, run_id).status


def test_a_survivor_closes_a_dead_schedulers_run(settings, client, tmp_path):
    from tracker.config import SuiteConfig

    settings.suites = [SuiteConfig(name="s", path=tmp_path)]
    run_id = _running(settings, HOST, _dead_pid(), None)
    assert client.post("/api/v1/suites/s/trigger", headers=AUTH).status_code == 409
    stop = __import__("threading").Event()
    stop.set()
    keep_recovering(settings, stop)  # one round, as `serve` and the scheduler do every 30 s
    assert _status(settings, run_id) == "interrupted"
    assert client.post("/api/v1/suites/s/trigger", headers=AUTH).status_code == 202


def test_runs_elsewhere_close_when_their_heartbeat_lapses(settings):
    from tracker.recovery import recover

    now = datetime.now(UTC)
    lapsed = _running(settings, "other-host", 1, now - timedelta(minutes=3))
    with session_scope(settings.database_url) as session:
        store.save_run(session, RunRecord(suite="s2", runner="ci", source="x", started_at=now))
    record = RunRecord(suite="s2", runner="ci", source="runner", started_at=now)
    with session_scope(settings.database_url) as session:
        alive = store.start_run(session, record, "other-host", 1)
        alive.heartbeat_at = now - timedelta(seconds=5)
        session.commit()
        alive_id = alive.id
    assert recover(settings) == [lapsed]
    assert _status(settings, alive_id) == "running"


def test_the_scheduler_keeps_recovering(settings):
    from tracker.scheduler import build

    scheduler = build(settings)
    try:
        job = scheduler.get_job("recover", jobstore="local")
        assert job is not None and job.trigger.interval <= timedelta(minutes=1)
    finally:
        scheduler.shutdown(wait=False)


# 9. Races on a fresh database.


def _together(tmp_path: Path, commands: list[list[str]]) -> list[subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_DATABASE_URL"] = f"sqlite:///{tmp_path / 'race.db'}"
    procs = [
        subprocess.Popen(
            [*TRACKER, *c], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for c in commands
    ]
    return [
        subprocess.CompletedProcess(p.args, p.wait(timeout=120), *p.communicate()) for p in procs
    ]


def test_parallel_first_commands_on_a_fresh_database(tmp_path):
    done = _together(tmp_path, [["runs", "--json"]] * 8)  # 4 per core
    assert [p.returncode for p in done] == [0] * 8, [p.stderr[-500:] for p in done]


def test_parallel_ingests_creating_one_suite_lose_nothing(tmp_path):
    files = []
    for i in range(12):
        path = tmp_path / f"j{i}.xml"
        path.write_text(junit({f"t.py::test_{i}": ("passed", None)}))
        files.append(["ingest", str(path), "--suite", "brand-new", "--runner", f"r{i % 2}"])
    done = _together(tmp_path, files)
    assert [p.returncode for p in done] == [0] * 12, [p.stderr[-500:] for p in done]
    listed = _together(tmp_path, [["runs", "--suite", "brand-new", "--json"]])[0]
    assert len(json.loads(listed.stdout)["runs"]) == 12


# 10. An id longer than the store keeps stays one test.


def test_over_long_id_is_one_test_with_its_rerun(run_suite):
    detail = run_suite(".", suite="long_ids", suite_path=SUITES / "long_ids")
    assert len(detail["results"]) == 2
    long = next(r for r in detail["results"] if r["nodeid"].startswith("test_long.py::test_long[a"))
    assert long["outcome"] == "failed"
    assert [a["isolated"] for a in long["attempts"]] == [False, True]


# 11. Names: a safe character set, and links that stay links.


@pytest.mark.parametrize(
    ("suite", "runner"),
    [("%2E%2E", "r"), ("ok", "a\nb"), ("ok", "evil\u202etxt.exe"), ("a b", "r"), ("ok", "x" * 101)],
)
def test_unsafe_suite_and_runner_names_are_refused(client, settings, suite, runner):
    r = client.post(
        f"/api/v1/suites/{suite}/runs",
        headers=AUTH,
        data={"runner": runner},
        files={"file": ("r.jsonl", reportlog(*passing()))},
    )
    assert r.status_code in (400, 404, 422), r.text
    assert stored_runs(settings) == 0


def test_config_with_an_unsafe_suite_name_is_exit_2(tmp_path):
    result = tracker(tmp_path, "runs", config='[[suites]]\nname = "a/b"\npath = "."\n')
    assert result.returncode == 2 and "is not valid" in result.stderr


def test_links_to_names_stored_before_the_rules_are_encoded(settings, client):
    record = RunRecord(suite="x", runner="r", source="ingest", started_at=datetime.now(UTC))
    with session_scope(settings.database_url) as session:
        store.save_run(session, record)
        session.execute(update(Suite).values(name=".."))
        session.commit()
    page = client.get("/").text
    assert 'href="/suites/%2E%2E"' in page and 'href="/suites/.."' not in page
