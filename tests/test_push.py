"""Runs pushed from runners' trackers to a central one (a real uvicorn on 127.0.0.1, its database
once SQLite and once PostgreSQL): the whole record arrives (reruns, process order, environment,
forced status), a run is stored once however often it is sent, a bad push stores nothing, and a
push while the central server is down waits in the outbox and arrives after."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from helpers import SUITES, TRACKER, live_server, served_port, settings_for, wait_until
from sqlalchemy import func, select, update

from tracker import push, queries, scheduler, store
from tracker.config import PushConfig, RunnerConfig, Settings, SuiteConfig
from tracker.db import session_scope
from tracker.ingest import pushed
from tracker.models import Outbox, Run
from tracker.records import RUN_FORMAT, RUN_TIMED_OUT
from tracker.runner.execute import execute
from tracker.service import history
from tracker.web.app import create_app

TOKEN = "push-token-for-tests-0123456789"


@pytest.fixture
def central(db_url: str, tmp_path: Path) -> Iterator[tuple[Settings, str]]:
    settings = settings_for(tmp_path / "central", db_url, token=TOKEN)
    with live_server(create_app(settings)) as url:
        yield settings, url


def runner_settings(tmp_path: Path, name: str, url: str) -> Settings:
    return settings_for(
        tmp_path / name,
        f"sqlite:///{tmp_path / name}.db",
        runner=RunnerConfig(name=name, device="cpu"),
        push=PushConfig(url=url),
        push_token=TOKEN,
    )


def run_realities(settings: Settings, tmp_path: Path, *files: str, **options) -> int:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    suite = SuiteConfig(
        name="realities",
        path=SUITES / "realities",
        python=sys.executable,
        args=list(files),
        env={"FIXTURE_STATE": str(state)},
        **{"test_timeout": 1, "run_timeout": 120, "reruns": 1, **options},
    )
    with session_scope(settings.database_url) as session:
        record = execute(settings, suite, read_history=history(settings, suite))
        return store.save_run(session, record).id


def _comparable(detail: dict) -> dict:
    """A run as both stores must agree on it: everything but their own row ids and paths."""
    run = {k: v for k, v in detail["run"].items() if k not in ("id", "artifacts", "origin")}
    results = [{k: v for k, v in r.items() if k != "test_id"} for r in detail["results"]]
    return {"run": run, "results": results}


def test_the_whole_run_arrives_once(central, tmp_path):
    central_settings, url = central
    local = runner_settings(tmp_path, "a2-1", url)
    run_id = run_realities(local, tmp_path, "test_flaky.py", "test_abort.py", "test_order.py")
    push.push_after_run(local, run_id)
    with session_scope(local.database_url) as session:
        sent = queries.run_detail(session, run_id)
        row = session.get(Outbox, run_id)
        assert row.pushed_at is not None and row.last_error is None
    with session_scope(central_settings.database_url) as session:
        got = queries.run_detail(session, row.remote_id)
    assert sent["format"] == RUN_FORMAT
    assert _comparable(got) == _comparable(sent)
    assert sent["run"]["origin"] == {
        "store": queries_store_id(local),
        "run": run_id,
        "pushed": False,
    }
    assert got["run"]["origin"] == {**sent["run"]["origin"], "pushed": True}
    attempts = [a for r in got["results"] for a in r["attempts"]]
    assert any(a["isolated"] for a in attempts)  # the reruns in fresh processes
    assert {a["outcome"] for a in attempts} >= {"crashed", "passed", "failed"}
    assert all(a["process"] is not None for a in attempts if not a["isolated"])
    assert got["run"]["environment"]["python"]  # the probe's environment
    # the runner's folder is not a path on the central server: its files are never read there
    assert sent["run"]["artifacts"] and got["run"]["artifacts"] is None

    # sent again (the answer was lost, a second pusher, `tracker push RUN`): stored once
    with session_scope(local.database_url) as session:
        push.enqueue(session, [run_id])
    again = push.send(local)
    assert [(s.remote_id, s.created, s.error) for s in again] == [(row.remote_id, False, None)]
    with session_scope(central_settings.database_url) as session:
        assert len(queries.list_runs(session)) == 1


def queries_store_id(settings: Settings) -> str:
    with session_scope(settings.database_url) as session:
        return queries.store_id(session)


def test_runs_pushed_at_once_are_stored_once(central, tmp_path):
    """Four pushers send the same run at the same moment (on PostgreSQL, into four sessions of
    the server's thread pool): one run is stored, every pusher gets its id."""
    central_settings, url = central
    local = runner_settings(tmp_path, "a2-8", url)
    run_id = run_realities(local, tmp_path, "test_fast.py")
    with session_scope(local.database_url) as session:
        body = gzip.compress(json.dumps(queries.run_detail(session, run_id)).encode())
    answers: list[httpx.Response] = []
    barrier = threading.Barrier(4)

    def send() -> None:
        barrier.wait()
        answers.append(
            httpx.post(
                f"{url}/api/v1/runs",
                content=body,
                headers={"Authorization": f"Bearer {TOKEN}", "Content-Encoding": "gzip"},
                timeout=60,
            )
        )

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.status_code for a in answers) == [200, 200, 200, 201]
    assert len({a.json()["id"] for a in answers}) == 1
    with session_scope(central_settings.database_url) as session:
        assert len(queries.list_runs(session)) == 1


def test_a_forced_status_is_kept_and_outcomes_derived_again(central, tmp_path):
    """A timed-out run stays timed out; the final outcomes are derived again, not trusted."""
    central_settings, url = central
    local = runner_settings(tmp_path, "a2-2", url)
    run_id = run_realities(local, tmp_path, "test_fast.py")
    with session_scope(local.database_url) as session:
        detail = queries.run_detail(session, run_id)
    detail["run"]["status"], detail["run"]["message"] = RUN_TIMED_OUT, "the run's limit"
    detail["results"][0]["outcome"] = "passed-but-lying"
    devices = [{"index": 0, "name": "Ascend910B4", "driver": "24.1.0"}]
    detail["run"]["environment"] |= {"driver": {"not": "text"}, "huge": "x" * 10_000}
    detail["run"]["environment"]["devices"] = devices
    answer = httpx.post(  # httpx's 5 s default: too short on 2 loaded cores (timed out once)
        f"{url}/api/v1/runs", json=detail, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
    )
    assert answer.status_code == 201, answer.text
    with session_scope(central_settings.database_url) as session:
        got = queries.run_detail(session, answer.json()["id"])
    assert (got["run"]["status"], got["run"]["message"]) == (RUN_TIMED_OUT, "the run's limit")
    assert got["results"][0]["outcome"] == detail["results"][0]["attempts"][0]["outcome"]
    env = got["run"]["environment"]  # facts bounded, typed where they have a column
    assert env["devices"] == devices and "huge" not in env and env["driver"] is None


def test_bad_pushes_are_refused_whole(central, tmp_path, monkeypatch):
    central_settings, url = central
    local = runner_settings(tmp_path, "a2-4", url)
    run_id = run_realities(local, tmp_path, "test_fast.py")
    with session_scope(local.database_url) as session:
        good = queries.run_detail(session, run_id)
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def post(body, headers=auth) -> httpx.Response:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx.post(f"{url}/api/v1/runs", content=content, headers=headers, timeout=30)

    bad_attempt = json.loads(json.dumps(good))
    bad_attempt["results"][0]["attempts"][0]["outcome"] = "exploded"
    running = {**good, "run": {**good["run"], "status": "running"}}
    no_origin = {**good, "run": {k: v for k, v in good["run"].items() if k != "origin"}}
    bad_suite = {**good, "run": {**good["run"], "suite": "../../etc"}}
    naive = {**good, "run": {**good["run"], "started_at": "2026-11-30T10:00:00"}}
    bomb = gzip.compress(b"[" * (65 * 1024 * 1024))  # past upload_max_mb (64) unzipped
    empties = gzip.compress(b'{"x": [' + b"{}," * 5_000_000 + b"{}]}")  # 15 MB of empty objects
    deep = b"[" * 5000 + b"]" * 5000
    cases = {
        "unsupported format": post({**good, "format": "tracker-run/2"}),
        "not JSON": post(b"{oops"),
        "not valid gzip": post(b"plain", {**auth, "Content-Encoding": "gzip"}),
        "MB unzipped": post(bomb, {**auth, "Content-Encoding": "gzip"}),
        "objects and lists": post(empties, {**auth, "Content-Encoding": "gzip"}),
        "nested too deep": post(deep),
        "unknown outcome": post(bad_attempt),
        "cannot be pushed": post(running),
        "run.origin": post(no_origin),
        "suite name": post(bad_suite),
        "time zone": post(naive),
    }
    for reason, answer in cases.items():
        assert answer.status_code == 400, (reason, answer.text)
        assert reason in answer.json()["detail"], (reason, answer.text)
    assert post(good, {}).status_code == 401
    with session_scope(central_settings.database_url) as session:
        assert session.execute(select(func.count()).select_from(Run)).scalar() == 0

    # a server that refuses the record (here: it reads another format) is not asked again soon
    monkeypatch.setattr(pushed, "RUN_FORMAT", "tracker-run/2")
    push.push_after_run(local, run_id)
    with session_scope(local.database_url) as session:
        (row,) = push.waiting(session)
    assert "400 unsupported format" in row.last_error
    assert row.next_try_at - datetime.now(UTC) > timedelta(minutes=59)


def test_a_push_during_an_outage_waits_and_arrives(db_url, tmp_path):
    central_settings = settings_for(tmp_path / "c", db_url, token=TOKEN)
    with live_server(create_app(central_settings)) as url:
        pass  # a port that answered once and is closed now: the central server is down
    local = runner_settings(tmp_path, "a2-1", url)
    run_id = run_realities(local, tmp_path, "test_fast.py")
    push.push_after_run(local, run_id)  # the run is stored; its push fails and is queued
    with session_scope(local.database_url) as session:
        (row,) = push.waiting(session)
        assert (row.run_id, row.tries) == (run_id, 1)
        assert "ConnectError" in row.last_error or "refused" in row.last_error
        wait = row.next_try_at - datetime.now(UTC)
        assert timedelta(seconds=20) < wait <= timedelta(seconds=30)
    assert push.send(local, due_only=True) == []  # not before its backoff
    assert "1 run not yet pushed to" in TestClient(create_app(local)).get("/").text
    assert push.backoff(local, 3) == timedelta(minutes=2)
    assert push.backoff(local, 30) == timedelta(hours=1)
    with session_scope(local.database_url) as session:  # the backoff has passed
        session.execute(update(Outbox).values(next_try_at=datetime.now(UTC)))
        session.commit()
    with live_server(create_app(central_settings)) as url:
        local.push.url = url
        jobs = scheduler.build(local)
        retry = jobs.get_job("push")  # what the scheduler does every 30 s
        jobs.shutdown(wait=False)
        (sent,) = retry.func(*retry.args)
    assert (sent.run_id, sent.created, sent.error) == (run_id, True, None)
    with session_scope(local.database_url) as session:
        assert push.waiting(session) == []
    with session_scope(central_settings.database_url) as session:
        assert [r["runner"] for r in queries.list_runs(session)] == ["a2-1"]


def _serve(db: str, cwd: Path, port: int = 0) -> tuple[subprocess.Popen, int]:
    """A central `tracker serve --workers 2`, and the port it took."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env |= {"TRACKER_DATABASE_URL": db, "TRACKER_TOKEN": TOKEN}
    log = cwd / f"serve-{time.monotonic_ns()}.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*TRACKER, "serve", "--port", str(port), "--no-scheduler", "--workers", "2"],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=out,
        )
    port = served_port(log, server)
    if not wait_until(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), 120):
        server.kill()
        raise AssertionError(f"the central tracker did not answer: {log.read_text()[-2000:]}")
    return server, port


def _answers(url: str) -> bool:
    try:
        return httpx.get(url).status_code == 200
    except httpx.TransportError:
        return False


def _runner(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_PUSH_TOKEN"] = TOKEN
    return subprocess.run(
        [*TRACKER, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.postgresql
def test_two_runners_and_an_outage_on_a_central_server(new_pg_database, tmp_path):
    """Two runner trackers (each its own config and SQLite store) run the example suite and push
    to one central `tracker serve --workers 2` on PostgreSQL; a run made while the central
    server is down waits in its runner's outbox and arrives with `tracker push --pending`."""
    db = new_pg_database()
    server, port = _serve(db, tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        for name in ("a2-1", "a2-8"):
            (tmp_path / name).mkdir()
            (tmp_path / name / "tracker.toml").write_text(
                f'[runner]\nname = "{name}"\ndevice = "cpu"\n[push]\nurl = "{base}"\n'
            )
            done = _runner(tmp_path / name, "run", "example")
            assert done.returncode == 0, done.stderr
            assert "pushed to" in done.stderr
        (suite,) = httpx.get(f"{base}/api/v1/suites", timeout=60).json()
        assert sorted(suite["runners"]) == ["a2-1", "a2-8"]
        for page in ("/", "/suites/example", "/suites/example/promotion"):
            text = httpx.get(base + page, timeout=60).text
            assert "a2-1" in text and "a2-8" in text, page
    finally:
        server.terminate()
        server.wait(timeout=30)

    late = _runner(tmp_path / "a2-1", "run", "example")  # the central server is down
    assert late.returncode == 0, late.stderr
    assert "not pushed yet" in late.stderr
    waiting = json.loads(_runner(tmp_path / "a2-1", "push", "--json").stdout)["waiting"]
    assert [(w["run_id"], w["tries"]) for w in waiting] == [(2, 1)]
    server, _ = _serve(db, tmp_path, port)  # back where the runners push to
    try:
        sent = _runner(tmp_path / "a2-1", "push", "--pending")
        assert sent.returncode == 0, sent.stderr
        assert "run 2: stored as run 3" in sent.stdout
        runs = httpx.get(f"{base}/api/v1/suites/example/runs?runner=a2-1", timeout=60)
        runs = runs.json()["runs"]
        assert len(runs) == 2 and runs[0]["host"] == socket.gethostname()
        page = httpx.get(f"{base}/runs/{runs[0]['id']}", timeout=60).text
        assert "pushed from its tracker (run 2 there)" in page
        assert _runner(tmp_path / "a2-1", "push", "--json").stdout.count('"run_id"') == 0
        unknown = _runner(tmp_path / "a2-1", "push", "99")
        assert unknown.returncode == 2 and "no run with id 99" in unknown.stderr
        nowhere = _runner(tmp_path, "push", "--pending")  # no config here
        assert nowhere.returncode == 2 and "no [push] url configured" in nowhere.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)


def _push(**run) -> dict:
    from tracker.records import RUN_FORMAT

    return {
        "format": RUN_FORMAT,
        "run": {
            "origin": {"store": "s1", "run": 1},
            "status": "passed",
            "suite": "s",
            "runner": "r",
            "source": "runner",
            "started_at": "2026-11-30T10:00:00+00:00",
            **run,
        },
        "results": [{"nodeid": "t.py::a", "attempts": [{"number": 1, "outcome": "passed"}]}],
    }


def test_impossible_values_in_a_push_are_refused_or_made_safe():
    from tracker.ingest.pushed import read_pushed
    from tracker.validate import InvalidRecord

    with pytest.raises(InvalidRecord, match="is before its start"):
        read_pushed(_push(finished_at="2016-11-30T10:00:00+00:00"))
    bad = _push()
    bad["results"][0]["attempts"][0]["duration"] = True
    with pytest.raises(InvalidRecord, match="not true or false"):
        read_pushed(bad)
    for field in ("process", "position"):
        huge = _push()
        huge["results"][0]["attempts"][0][field] = 2**31
        with pytest.raises(InvalidRecord, match="less than or equal to 2147483647"):
            read_pushed(huge)
    with pytest.raises(InvalidRecord, match="less than or equal to 2147483647"):
        read_pushed(_push(origin={"store": "s1", "run": 2**31}))
    hostile = _push(
        message="bad\u202egnp.exe \x1b[2J\x00",
        environment={"driver": "550\x00\u2066", "nan": float("nan"), "deep": {"a": ["\x1b"]}},
    )
    hostile["results"][0]["attempts"][0] |= {"worker": "gw0\u202e\x00", "message": "E \x1b[31m"}
    record = read_pushed(json.loads(json.dumps(hostile))).record
    assert record.message == "bad\\u202egnp.exe \\x1b[2J\\x00"
    assert record.environment == {"driver": "550\\x00\\u2066", "deep": {"a": ["\\x1b"]}}
    attempt = record.attempts[0]
    assert (attempt.worker, attempt.message) == ("gw0\\u202e\\x00", "E \\x1b[31m")


def test_each_run_shows_the_environment_its_own_runner_reported(settings):
    from tracker import queries, store
    from tracker.db import session_scope
    from tracker.ingest.pushed import read_pushed

    deep: list = []
    inner = deep
    for _ in range(900):
        inner.append([])
        inner = inner[0]
    ids = []
    with session_scope(settings.database_url) as session:
        for n, host in enumerate(("a2-1", "a2-8"), 1):
            env = {"device_kind": "npu", "driver": "24.1", "host": host, "deep": deep}
            pushed = read_pushed(_push(origin={"store": "s1", "run": n}, environment=env))
            ids.append(store.save_pushed(session, pushed.record, "s1", n, None)[0].id)
        shown = [queries.run_info(session, i)["environment"] for i in ids]
    assert [e["host"] for e in shown] == ["a2-1", "a2-8"]  # not the first writer's
    assert all("deep" not in e for e in shown)  # 900 levels deep: dropped, not a 500 later


def test_a_taken_origin_accepts_only_the_same_run_again(settings):
    from tracker import store
    from tracker.db import session_scope
    from tracker.ingest.pushed import read_pushed

    def save(**run):
        pushed = read_pushed(_push(**run))
        with session_scope(settings.database_url) as session:
            return store.save_pushed(session, pushed.record, "s1", 1, None)

    first, created = save()
    assert created
    again, created = save()  # its answer was lost: sent again
    assert (again.id, created) == (first.id, False)
    for other in ({"suite": "other"}, {"runner": "r2"}, {"started_at": "2026-11-30T11:00:00Z"}):
        with pytest.raises(store.OriginConflict, match="a second push under an origin"):
            save(**other)


def test_the_push_schema_asks_for_what_the_server_reads(settings):
    from fastapi.testclient import TestClient

    from tracker.web.app import create_app

    spec = TestClient(create_app(settings)).get("/openapi.json").json()
    body = spec["paths"]["/api/v1/runs"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["required"] == ["format", "run", "results"]
    upload = spec["components"]["schemas"]["Body_upload_api_v1_suites__suite__runs_post"]
    assert upload["properties"]["file"]["minLength"] == 1  # an empty file is a 400: said so
    client = TestClient(create_app(settings.model_copy(update={"token": TOKEN})))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    empty = client.post(
        "/api/v1/suites/s/runs", files={"file": ("r.xml", b"")}, data={"runner": "r"}, headers=auth
    )
    assert empty.status_code == 400, empty.text


def test_a_full_disk_is_a_503_that_stores_nothing_and_the_retry_arrives(tmp_path):
    from sqlalchemy import event

    from tracker.db import get_engine

    settings = settings_for(tmp_path, token=TOKEN)
    client = TestClient(create_app(settings))
    engine = get_engine(settings.database_url)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    big = _push()  # more than the file may grow by
    failed = {"number": 1, "outcome": "failed", "message": "m" * 5000}
    big["results"] = [{"nodeid": f"t.py::t{i}", "attempts": [failed]} for i in range(200)]

    def full_disk(dbapi_connection, _record) -> None:  # SQLite's own "database or disk is full"
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")

    event.listen(engine, "connect", full_disk)
    engine.dispose()
    try:
        answer = client.post("/api/v1/runs", json=big, headers=headers)
    finally:
        event.remove(engine, "connect", full_disk)
        engine.dispose()
    assert answer.status_code == 503, answer.text
    assert "database or disk is full" in answer.json()["detail"]
    assert answer.headers["Retry-After"]
    with session_scope(settings.database_url) as session:
        assert session.scalar(select(func.count()).select_from(Run)) == 0  # nothing half-stored
    assert client.post("/api/v1/runs", json=big, headers=headers).status_code in (200, 201)


def test_options_and_405_name_every_method_of_a_path(tmp_path):
    client = TestClient(create_app(settings_for(tmp_path)))
    answer = client.options("/api/v1/suites/s/runs")
    assert answer.status_code == 204
    assert answer.headers["Allow"] == "GET, HEAD, OPTIONS, POST"
    answer = client.get("/api/v1/runs")  # pushes only
    assert (answer.status_code, answer.headers["Allow"]) == (405, "OPTIONS, POST")
