"""A real APScheduler in the test process (and two in separate processes) on a fixture suite,
with crons that fire every few seconds, against real SQLite files."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi.testclient import TestClient
from helpers import DATA, SUITES, served_port, settings_for, wait_until
from sqlalchemy import select, update

from tracker import push, scheduler
from tracker.config import SchedulerConfig, Settings, SuiteConfig
from tracker.db import session_scope
from tracker.models import Result, Run, Runner, RunRequest, RunSlot, Suite
from tracker.recovery import HOST, recover

TOKEN = "trigger-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def make_settings(db_url, tmp_path, schedule: str | None, grace: int = 60) -> Settings:
    suite = SuiteConfig(
        name="ids",
        path=SUITES / "realities",
        python=sys.executable,
        args=["test_ids.py"],
        schedule=schedule,
        test_timeout=10,
        reruns=0,
        env={"FIXTURE_STATE": str(tmp_path)},
    )
    return settings_for(
        tmp_path,
        db_url,
        suites=[suite],
        token=TOKEN,
        scheduler=SchedulerConfig(misfire_grace_seconds=grace, poll_seconds=0.5),
    )


def runs(settings) -> list[Run]:
    with session_scope(settings.database_url) as session:
        return list(session.execute(select(Run).order_by(Run.started_at)).scalars())


def test_runs_fire_and_never_overlap(db_url, tmp_path):
    settings = make_settings(db_url, tmp_path, "*/2 * * * * *")
    sched = scheduler.build(settings)
    sched.resume()
    try:
        assert wait_until(
            lambda: len([r for r in runs(settings) if r.status != "running"]) >= 3, 30
        )
    finally:
        sched.shutdown(wait=True)
    done = [r for r in runs(settings) if r.status != "running"]
    assert all(r.status == "passed" and r.counts == {"passed": 3} for r in done)
    for before, after in itertools.pairwise(done):
        assert before.finished_at <= after.started_at  # one at a time
    with session_scope(settings.database_url) as session:
        slots = session.execute(select(RunSlot.slot_at)).scalars().all()
    assert len(slots) == len(set(slots)) >= len(done)


def _second_soon(delay: int) -> str:
    return f"{(datetime.now(UTC) + timedelta(seconds=delay)).second} * * * * *"


def _host_was_down(settings: Settings, seconds: int) -> datetime:
    """Build the scheduler, stop it, and make its stored job due `seconds` ago: what a host that
    was down when the cron fired finds on boot (no waiting for the wall clock to get there)."""
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

    from tracker.db import get_engine

    scheduler.build(settings).shutdown(wait=False)
    jobs = SQLAlchemyJobStore(engine=get_engine(settings.database_url))
    job = jobs.lookup_job(scheduler.job_id("ids", "ci"))
    due = datetime.now(UTC) - timedelta(seconds=seconds)
    job.next_run_time = due
    jobs.update_job(job)
    return due


def _next_run(settings: Settings) -> datetime | None:
    from tracker.schedule import next_runs

    return next_runs(settings)["ids"]


def test_missed_run_fires_once_after_restart(db_url, tmp_path):
    settings = make_settings(db_url, tmp_path, _second_soon(-2), grace=60)  # fired 2 s ago
    _host_was_down(settings, 2)
    sched = scheduler.build(settings)  # boot: the stored job keeps its next run time
    sched.resume()
    try:
        assert wait_until(lambda: any(r.status == "passed" for r in runs(settings)), 60)
    finally:
        sched.shutdown(wait=True)
    assert len(runs(settings)) == 1
    assert _next_run(settings) > datetime.now(UTC)  # coalesced: the next is next minute's


def test_missed_run_beyond_the_grace_is_skipped(db_url, tmp_path):
    settings = make_settings(db_url, tmp_path, _second_soon(-30), grace=1)  # fired 30 s ago
    due = _host_was_down(settings, 30)
    sched = scheduler.build(settings)
    sched.resume()
    try:  # the scheduler has looked at the job once its next run time has moved on
        assert wait_until(lambda: _next_run(settings) > due, 60)
    finally:
        sched.shutdown(wait=True)
    assert runs(settings) == []


def test_stale_running_run_is_closed_on_start(db_url, tmp_path):
    settings = make_settings(db_url, tmp_path, None)
    dead = subprocess.Popen(["true"])
    dead.wait()
    artifacts = tmp_path / "data" / "runs" / "ids" / "old"
    artifacts.mkdir(parents=True)
    lines = (DATA / "reportlog_complete.jsonl").read_text().splitlines(keepends=True)
    (artifacts / "p0.reportlog.jsonl").write_text("".join(lines[:13]))  # killed mid-test
    with session_scope(settings.database_url) as session:
        suite, runner = (
            Suite(name="ids", created_at=datetime.now(UTC)),
            Runner(name="ci", created_at=datetime.now(UTC)),
        )
        session.add_all([suite, runner])
        session.flush()
        session.add(
            Run(
                suite_id=suite.id,
                runner_id=runner.id,
                status="running",
                source="runner",
                started_at=datetime.now(UTC),
                host=HOST,
                pid=dead.pid,
                artifacts=str(artifacts),
            )
        )
        session.commit()
    scheduler.build(settings).shutdown(wait=False)
    (run,) = runs(settings)
    assert run.status == "interrupted" and "stopped during the run" in run.message
    assert run.counts == {"failed": 1, "interrupted": 1, "passed": 1}
    with session_scope(settings.database_url) as session:
        assert len(session.execute(select(Result)).all()) == 3


def test_two_scheduler_processes_make_one_run_per_slot(db_url, tmp_path):
    settings = make_settings(db_url, tmp_path, "*/3 * * * * *")
    config = tmp_path / "tracker.toml"
    config.write_text(
        f'database_url = "{settings.database_url}"\ndata_dir = "{tmp_path / "data"}"\n'
        f'[runner]\nname = "ci"\ndevice = "cpu"\n[scheduler]\nmisfire_grace_seconds = 60\n'
        f'[[suites]]\nname = "ids"\npath = "{SUITES / "realities"}"\npython = "{sys.executable}"\n'
        f'args = ["test_ids.py"]\nschedule = "*/3 * * * * *"\nreruns = 0\n'
        f'env = {{ FIXTURE_STATE = "{tmp_path}" }}\n'
    )
    env = {**os.environ, "TRACKER_CONFIG": str(config), "TRACKER_TOKEN": TOKEN}
    env.pop("TRACKER_DATABASE_URL", None)
    web = [sys.executable, "-m", "tracker.cli", "serve", "--no-scheduler", "--workers", "2"]
    logs = [(tmp_path / f"p{i}.log").open("wb") for i in range(3)]

    def process_logs() -> list[str]:
        """The end of each process's log, with every failure: this test failed once under -n 6
        on 2 cores, and its output was not kept (session 18)."""
        return [(tmp_path / f"p{i}.log").read_text()[-1500:] for i in range(3)]

    procs = [
        subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=tmp_path)
        for log, command in zip(
            logs,
            (
                [sys.executable, "-m", "tracker.cli", "scheduler"],
                [sys.executable, "-m", "tracker.cli", "scheduler"],
                [*web, "--port", "0"],
            ),
            strict=True,
        )
    ]
    try:
        port = served_port(tmp_path / "p2.log", procs[2])
        base = f"http://127.0.0.1:{port}/api/v1/suites/ids/trigger"
        # two web workers starting beside two schedulers and a loaded machine: waited for,
        # however long it takes up to 2 minutes (it answered in 30 s but under -n 6 on 2 cores)
        up = wait_until(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), 120)
        assert up, (tmp_path / "p2.log").read_text()[-2000:]
        # `run now` from 8 people at once, through 2 web workers: queued once or refused
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: httpx.post(base, headers=AUTH, timeout=60), range(8)))
        codes = sorted(a.status_code for a in answers)  # 409: running or queued already
        said = [a.text[:200] for a in answers if a.status_code not in (202, 409)]
        assert set(codes) <= {202, 409} and codes.count(202) <= 1, (codes, said)
        done = wait_until(
            lambda: (
                len([r for r in runs(settings) if r.status != "running"]) >= 3
                and _requests_done(settings)
            ),
            240,  # ~50 s each with 6 copies of this test at once on 2 cores: room to spare
        )
        assert done, ([(r.id, r.status) for r in runs(settings)], process_logs())
    finally:
        for p in procs:
            p.terminate()
        stuck = []
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                stuck.append(p.args)
        for log in logs:
            log.close()
    # each stops on SIGTERM, a run of its own stored or given up
    assert not stuck, (stuck, process_logs())
    with session_scope(settings.database_url) as session:
        slots = session.execute(select(RunSlot)).scalars().all()
        requested = session.execute(select(RunRequest.run_id)).scalars().all()
    started = runs(settings)
    assert len({s.slot_at for s in slots}) == len(slots), process_logs()
    ran = [r for r in requested if r is not None]
    assert len(set(ran)) == len(ran), process_logs()  # each request ran once, by one scheduler
    # no slot or request ran twice; a slot may run not at all: one that found another run going
    # is skipped, and a scheduler stopped between its claim and the run's start leaves it empty
    assert 3 <= len(started) <= len(slots) + len(ran), (len(slots), ran, process_logs())
    for before, after in itertools.pairwise(started):
        if before.finished_at:
            assert before.finished_at <= after.started_at, (before, after, process_logs())


def _answers(url: str) -> bool:
    try:
        return httpx.get(url).status_code == 200
    except httpx.TransportError:
        return False


def _requests_done(settings) -> bool:
    with session_scope(settings.database_url) as session:
        return all(r.state == "done" for r in session.execute(select(RunRequest)).scalars())


@pytest.fixture
def api(db_url, tmp_path):
    from tracker.web.app import create_app

    settings = make_settings(db_url, tmp_path, None)
    return settings, TestClient(create_app(settings))


def test_trigger_needs_the_token_and_a_configured_suite(api):
    _, client = api
    assert client.post("/api/v1/suites/ids/trigger").status_code == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert client.post("/api/v1/suites/nope/trigger", headers=auth).status_code == 404


def test_trigger_queues_a_run_and_refuses_while_busy(api):
    settings, client = api
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = client.post("/api/v1/suites/ids/trigger", headers=auth)
    assert r.status_code == 202 and r.json()["state"] == "queued"
    assert client.post("/api/v1/suites/ids/trigger", headers=auth).status_code == 409
    scheduler._settings = settings
    scheduler.poll_requests()  # what the scheduler process does every few seconds
    (run,) = runs(settings)
    assert run.status == "passed"
    with session_scope(settings.database_url) as session:
        request = session.execute(select(RunRequest)).scalar_one()
        assert (request.state, request.run_id) == ("done", run.id)
        session.add(
            Run(
                suite_id=run.suite_id,
                runner_id=run.runner_id,
                status="running",
                source="runner",
                started_at=datetime.now(UTC),
                host=HOST,
                pid=os.getpid(),
            )
        )
        session.commit()
    assert client.post("/api/v1/suites/ids/trigger", headers=auth).status_code == 409


def test_a_request_whose_scheduler_died_does_not_block_run_now(api):
    """Taken by a scheduler on this host that is gone (a dead pid), or on another host ten
    minutes ago with no run going: recovery ends both, and `run now` is accepted again. One
    whose scheduler lives is left alone."""
    settings, client = api
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    long_ago = datetime.now(UTC) - timedelta(minutes=10)

    def taken(claimed_by: str) -> str:
        with session_scope(settings.database_url) as session:
            session.add(
                RunRequest(suite="ids", runner="ci", state="started", requested_at=long_ago,
                           claimed_by=claimed_by, claimed_at=long_ago)
            )  # fmt: skip
            session.commit()
        assert client.post("/api/v1/suites/ids/trigger", headers=AUTH).status_code == 409
        recover(settings)
        with session_scope(settings.database_url) as session:
            return session.execute(select(RunRequest.state).order_by(RunRequest.id.desc())).first()[
                0
            ]

    assert taken(f"{HOST}:{dead}") == "done"
    assert taken("elsewhere:1") == "done"
    assert taken(f"{HOST}:{os.getpid()}") == "started"  # this process lives
    with session_scope(settings.database_url) as session:
        session.execute(update(RunRequest).values(state="done"))
        session.commit()
    assert client.post("/api/v1/suites/ids/trigger", headers=AUTH).status_code == 202


def test_schedule_endpoint_shows_the_next_run(db_url, tmp_path):
    from tracker.web.app import create_app

    settings = make_settings(db_url, tmp_path, "0 22 * * *")
    (entry,) = TestClient(create_app(settings)).get("/api/v1/schedule").json()
    assert entry["schedule"] == "0 22 * * *"
    assert entry["next_run"].endswith("22:00:00+00:00")


@pytest.mark.sqlite_only  # SQLite's backup API
def test_backup_while_the_database_is_in_use(db_url, tmp_path):
    settings = make_settings(db_url, tmp_path, None)
    from tracker.service import run_and_store

    run_and_store(settings, settings.suites[0])
    env = {**os.environ, "TRACKER_DATABASE_URL": settings.database_url}
    copy = tmp_path / "copy.db"
    proc = subprocess.run(
        [sys.executable, "-m", "tracker.cli", "db", "backup", str(copy)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    shutil.copy(copy, tmp_path / "check.db")
    check = settings_for(tmp_path, f"sqlite:///{tmp_path / 'check.db'}")
    assert len(runs(check)) == 1
    again = subprocess.run(
        [sys.executable, "-m", "tracker.cli", "db", "backup", str(copy)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 2 and "exists" in again.stderr


def test_retention_prunes_old_results_and_keeps_runs(db_url, tmp_path):
    settings = make_settings(db_url, tmp_path, None)
    settings.scheduler.retention_days = 7
    from tracker import store
    from tracker.records import AttemptRecord, RunRecord

    with session_scope(settings.database_url) as session:
        for age in (30, 20, 1):
            store.save_run(
                session,
                RunRecord(
                    "ids",
                    "ci",
                    "runner",
                    datetime.now(UTC) - timedelta(days=age),
                    collected=["t.py::a"],
                    attempts=[AttemptRecord("t.py::a", "passed")],
                ),
            )
        old_unsent = runs(settings)[1].id
        push.enqueue(session, [old_unsent])  # the central server has been down for 20 days
    scheduler._settings = settings
    scheduler.prune()
    kept = runs(settings)
    assert [r.counts for r in kept] == [{"passed": 1}] * 3  # summaries stay
    with session_scope(settings.database_url) as session:
        results = session.execute(select(Result.run_id).order_by(Result.run_id)).scalars()
        assert list(results) == [old_unsent, kept[2].id]  # a run not yet pushed stays whole


def test_serve_runs_web_and_scheduler_in_one_process(tmp_path):
    import json
    import urllib.request

    config = tmp_path / "tracker.toml"
    config.write_text(
        f'database_url = "sqlite:///{tmp_path / "serve.db"}"\ndata_dir = "{tmp_path / "data"}"\n'
        f'[runner]\nname = "ci"\ndevice = "cpu"\n'
        f'[[suites]]\nname = "ids"\npath = "{SUITES / "realities"}"\npython = "{sys.executable}"\n'
        f'args = ["test_ids.py"]\nschedule = "*/2 * * * * *"\nreruns = 0\n'
        f'env = {{ FIXTURE_STATE = "{tmp_path}" }}\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tracker.cli", "--config", str(config), "serve", "--port", "0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )

    def get(path: str):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return json.loads(r.read())

    def a_run_passed() -> bool:
        try:
            return any(r["status"] == "passed" for r in get("/api/v1/suites/ids/runs")["runs"])
        except OSError:
            return False

    try:
        port = served_port(log, proc)
        assert wait_until(a_run_passed, 40)
        (entry,) = get("/api/v1/schedule")
        assert entry["next_run"] is not None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    err = log.read_text()
    assert "run 1 ids on ci: started" in err and "passed (passed 3)" in err  # the log lines


def test_a_crontab_weekday_means_what_crontab_says():
    """APScheduler 3 counts weekdays from Monday = 0; crontab from Sunday = 0. `0 2 * * 1` is a
    Monday night, not a Tuesday one."""
    from tracker.config import cron_trigger

    def next_day(expr: str) -> str:
        after = datetime(2026, 12, 1, tzinfo=UTC)  # a Tuesday
        return cron_trigger(expr, "UTC").get_next_fire_time(None, after).strftime("%a %d")

    assert next_day("0 2 * * 1") == "Mon 07"
    assert next_day("0 2 * * 0") == next_day("0 2 * * 7") == "Sun 06"
    assert next_day("0 2 * * 5-7") == "Fri 04"
    assert next_day("0 2 * * mon") == "Mon 07" and next_day("0 22 * * *") == "Tue 01"
    with pytest.raises(ValueError, match="not a crontab day of week"):
        cron_trigger("0 2 * * 8", "UTC")
