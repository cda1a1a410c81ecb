"""Alerts through a real HTTP receiver on 127.0.0.1: each format, a receiver that is down and
comes back, a missed night, a secret that never shows; and the issue-ready report, filed to a
fake GitHub API served the same way."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import helpers
import pytest
from helpers import junit, settings_for, tracker

from tracker import alerts, queries, store
from tracker.analysis.changes import run_events
from tracker.config import AlertConfig, GitHubConfig, SuiteConfig
from tracker.db import session_scope
from tracker.ingest import load_run
from tracker.models import Investigation
from tracker.web.app import create_app

SECRET = "T0KEN-s3cr3t-9f8e7d"
HOSTILE = "t/test_b.py::test_<!channel>@all"


class Receiver:
    """A webhook on 127.0.0.1: keeps every body it takes; `answer` is the status it gives."""

    def __init__(self) -> None:
        self.got: list[dict] = []
        self.paths: list[str] = []
        self.answer = 200
        self.reply = b'{"code": 0}'
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.answer < 300:
                    receiver.got.append(json.loads(body))
                    receiver.paths.append(self.path)
                self.send_response(receiver.answer)
                self.end_headers()
                self.wfile.write(receiver.reply)

            def log_message(self, *args) -> None:
                pass

        self.handler = Handler
        self.server: ThreadingHTTPServer | None = None
        self.port = 0

    def start(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self.handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def receiving() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    try:
        yield r
    finally:
        r.stop()


def _store(
    settings, tmp_path: Path, n: int, cases: dict, started: datetime | None = None, suite="s"
) -> int:
    path = tmp_path / f"night{n}.xml"
    path.write_text(junit(cases))
    runner = "r" if suite == "s" else settings.runner.name
    record = load_run(path, suite=suite, runner=runner, started_at=started)
    with session_scope(settings.database_url) as session:
        return store.save_run(session, record).id


def _nights(settings, tmp_path: Path) -> list[int]:
    """A green night, then one where a test breaks: the second is worth an alert."""
    ids = []
    for n, outcome in enumerate(["passed", "failed"]):
        cases = {"t/test_a.py::test_x": ("passed", None), HOSTILE: (outcome, "boom <@here>")}
        ids.append(_store(settings, tmp_path, n, cases))
        alerts.after_run(settings, ids[-1])
    return ids


@pytest.mark.parametrize("fmt", ["json", "slack", "feishu", "wecom", "dingtalk"])
def test_each_format_reaches_a_real_receiver(tmp_path, monkeypatch, fmt):
    with receiving() as r:
        monkeypatch.setenv("HOOK", f"http://127.0.0.1:{r.port}/hook?key={SECRET}")
        hook = AlertConfig(name="team", format=fmt, url_env="HOOK")
        settings = settings_for(tmp_path, alerts=[hook], public_url="https://ci.example.org")
        _first, second = _nights(settings, tmp_path)
    assert len(r.got) == 1, r.got  # the green first night changed nothing worth a warning
    body = r.got[0]
    if fmt == "json":
        assert body["id"] == f"run:{second}" and body["level"] == "critical"
        kinds = {e["kind"] for e in body["events"]}
        assert {"new_failures", "newly_broken", "kernel"} <= kinds
        assert HOSTILE in body["events"][0]["tests"]  # JSON carries the id as it is
        assert body["link"] == f"https://ci.example.org/runs/{second}"
        return
    text = {
        "slack": lambda b: b["text"],
        "feishu": lambda b: b["content"]["text"] if b["msg_type"] == "text" else None,
        "wecom": lambda b: b["text"]["content"] if b["msgtype"] == "text" else None,
        "dingtalk": lambda b: b["text"]["content"] if b["msgtype"] == "text" else None,
    }[fmt](body)
    assert f"s on r run #{second}" in text and "1 new failure" in text
    assert "kernel b: stable → failing" in text
    # an untrusted test id can mention no one and open no markup
    assert "<" not in text and ">" not in text.replace("→", "")
    if fmt != "slack":  # a robot's @mention; Slack's are <!channel>, escaped above
        assert "@all" not in text
    assert "test_" in text and "channel" in text


def test_a_receiver_down_then_back_loses_nothing_and_sends_nothing_twice(
    tmp_path, monkeypatch, caplog
):
    r = Receiver()
    r.start()
    monkeypatch.setenv("HOOK", f"http://127.0.0.1:{r.port}/hook?key={SECRET}")
    settings = settings_for(
        tmp_path, alerts=[AlertConfig(name="team", format="json", url_env="HOOK")]
    )
    r.stop()  # down: the address refuses connections
    caplog.set_level(logging.INFO, logger="tracker")
    ids = _nights(settings, tmp_path)
    r.answer = 503  # up, but failing
    r.start()
    assert alerts.send(settings) == 0
    with session_scope(settings.database_url) as session:
        waiting = queries.run_alert(session, ids[1])["deliveries"]
    assert waiting == [{"destination": "team", "sent_at": None, "tries": 2}]
    assert alerts.send(settings, due_only=True) == 0  # backing off: not due yet
    r.answer = 200  # back
    assert alerts.send(settings) == 1
    assert alerts.send(settings) == 0  # sent once: never again
    alerts.after_run(settings, ids[1])  # the hook again for the same run: nothing new
    assert [b["id"] for b in r.got] == [f"run:{ids[1]}"]
    r.stop()
    # the log says which destination failed and why, never its address
    warnings = [rec.getMessage() for rec in caplog.records if "not sent" in rec.getMessage()]
    assert warnings and all("team" in w for w in warnings)
    assert SECRET not in caplog.text and "127.0.0.1" not in caplog.text


def test_a_missed_night_is_an_alert_once_and_shows_red(tmp_path):
    out = tmp_path / "alerts.jsonl"
    nightly = SuiteConfig(name="s", path=tmp_path, schedule="0 2 * * *")
    settings = settings_for(
        tmp_path, suites=[nightly], alerts=[AlertConfig(name="mail", format="file", path=out)]
    )
    settings.runner.name = "r"
    three_days = datetime.now(UTC) - timedelta(days=3, hours=1)
    _store(settings, tmp_path, 0, {"t/test_a.py::test_x": ("passed", None)}, three_days)
    missed = alerts.missed_nights(settings)
    assert len(missed) == 1 and missed[0].startswith("missed:s:r:")
    assert alerts.missed_nights(settings) == []  # the same slot: once
    assert alerts.send(settings) == 1
    line = json.loads(out.read_text().splitlines()[0])
    assert line["events"][0]["kind"] == "missed_night" and line["level"] == "critical"
    assert "no run of s on r" in line["events"][0]["text"]
    from fastapi.testclient import TestClient

    with TestClient(create_app(settings)) as client:
        page = client.get("/").text
        assert 'class="stale"' in page and "no run for 3 days" in page
        badge = client.get("/badge/s.json?metric=status&runner=r").json()
        assert badge["message"] == "no run for 3 days" and badge["color"] == "#cf222e"
    # a run today: not missed any more
    _store(settings, tmp_path, 1, {"t/test_a.py::test_x": ("passed", None)})
    with TestClient(create_app(settings)) as client:
        assert "no run for" not in client.get("/").text


def test_a_first_run_failing_is_not_called_a_change_from_not_run(tmp_path):
    settings = settings_for(tmp_path)
    first = _store(settings, tmp_path, 0, {"t/test_a.py::test_x": ("failed", "boom")})
    alerts.after_run(settings, first)
    from fastapi.testclient import TestClient

    with TestClient(create_app(settings)) as client:
        events = client.get(f"/api/v1/runs/{first}/changes").json()["events"]
    kernel = [e for e in events if e["kind"] == "kernel"]
    days = settings.analysis.flaky_window_days
    assert [(e["level"], e["text"]) for e in kernel] == [
        ("critical", f"kernel a: failing, its first run on r in {days} days")
    ]


def test_a_test_passing_again_is_not_called_fixed(tmp_path):
    """Most tests that pass after a failure do so at the same commit: a flaky test's good
    night. The run says what it saw, and the page names the run it compares with."""
    settings = settings_for(tmp_path)
    _first, second = _nights(settings, tmp_path)
    third = _store(settings, tmp_path, 2, {"t/test_a.py::test_x": ("passed", None),
                                           HOSTILE: ("passed", None)})  # fmt: skip
    alerts.after_run(settings, third)
    from fastapi.testclient import TestClient

    with TestClient(create_app(settings)) as client:
        events = client.get(f"/api/v1/runs/{third}/changes").json()["events"]
        page = client.get(f"/runs/{third}").text
        listed = client.get(f"/runs/{third}?against={second}").text  # the list, not the alert
    passed = [e for e in events if e["kind"] == "fixed"]
    assert [e["text"] for e in passed] == [f"1 test passed that failed in run #{second}"]
    assert "fixed" not in " ".join(e["text"] for e in events)
    assert f"1 test passed that failed in run #{second}" in page
    assert f"Failed in #{second}, passed now: 1" in listed


def test_a_failure_without_a_result_next_time_is_not_called_passed(tmp_path):
    """A run that skipped a test, or an ingested log that ended before it, says nothing of a
    failure before it: neither "passed" nor "still failing" (run 25 of calls BT-BV, an xdist log
    cut by its limit, said "Still failing: 0" of run 21's failure it never reached)."""
    settings = settings_for(tmp_path)
    failing = {f"t/test_a.py::test_{n}": ("failed", "boom") for n in "xyz"}
    first = _store(settings, tmp_path, 0, failing)
    second = _store(settings, tmp_path, 1, {"t/test_a.py::test_x": ("skipped", "no device"),
                                           "t/test_a.py::test_z": ("passed", None)})  # fmt: skip
    alerts.after_run(settings, second)
    from fastapi.testclient import TestClient

    with TestClient(create_app(settings)) as client:
        answer = client.get(f"/api/v1/runs/{second}/changes").json()
        page = client.get(f"/runs/{second}").text
        listed = client.get(f"/runs/{second}?against={first}").text
    changes = answer["changes"]
    assert changes["fixed"] == ["t/test_a.py::test_z"] and changes["still_failing"] == []
    assert changes["no_result"] == ["t/test_a.py::test_x", "t/test_a.py::test_y"]
    fixed = [e["text"] for e in answer["events"] if e["kind"] == "fixed"]
    assert fixed == [f"1 test passed that failed in run #{first}"]
    assert f"Still failing from run #{first}: 0; without a result in this run: 2." in page
    assert f"Failed in #{first}, passed now: 1" in listed
    assert (
        f"Failed in #{first}, without a result now (not run, cut, skipped or absent): 2" in listed
    )
    assert "t/test_a.py::test_y</a>" in listed  # not in this run, still linked to its page


def test_a_webhook_secret_appears_in_no_page_and_no_log(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("HOOK", f"http://127.0.0.1:9/hook?key={SECRET}")  # nothing listens
    settings = settings_for(
        tmp_path, alerts=[AlertConfig(name="team", format="slack", url_env="HOOK")]
    )
    caplog.set_level(logging.DEBUG)
    _first, second = _nights(settings, tmp_path)
    from fastapi.testclient import TestClient

    with TestClient(create_app(settings)) as client:
        pages = [client.get(p).text for p in ("/", f"/runs/{second}", f"/api/v1/runs/{second}")]
        events = client.get(f"/api/v1/runs/{second}/changes").json()["events"]
        assert events == client.get(f"/runs/{second}?format=json").json()["alert"]["events"]
        assert [e["kind"] for e in events] == ["new_failures", "newly_broken", "kernel"]
        assert events[1]["text"].endswith("newly broken, by their recent runs")  # not this run's
    assert "team (not sent yet" in pages[1] and "What this run changed" in pages[1]
    for text in [
        *pages,
        caplog.text,
        repr(settings),
        json.dumps(settings.model_dump(), default=str),
    ]:
        assert SECRET not in text
    with session_scope(settings.database_url) as session:
        delivery = queries.run_alert(session, second)
    assert delivery["deliveries"][0]["sent_at"] is None


def test_report_is_markdown_and_files_an_issue_once(tmp_path):
    settings = settings_for(tmp_path, helpers.cli_database or f"sqlite:///{tmp_path / 'cli.db'}")
    db = settings.database_url
    for n, outcome in enumerate(["passed", "failed", "passed", "failed"]):
        cases = {"t/test_a.py::test_x": ("passed", None), HOSTILE: (outcome, "boom | `x`")}
        _store(settings, tmp_path, n, cases)
    shown = tracker(tmp_path, "report", HOSTILE, "--suite", "s")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "is flaky in s" in text and "failed in 2 of 4 runs" in text
    assert "boom" in text and "### Reproduce" in text and "| #4 |" in text
    from fastapi.testclient import TestClient

    with TestClient(create_app(settings)) as client, session_scope(db) as session:
        test_id = queries.test_ids(session, "s", [HOSTILE])[HOSTILE]
        assert f'href="/tests/{test_id}/report.md"' in client.get(f"/tests/{test_id}").text
        served = client.get(f"/tests/{test_id}/report.md")
    assert served.headers["content-type"].startswith("text/markdown")
    assert served.text.rstrip() == text.rstrip()  # the page's button gives what the CLI prints
    promotion = tracker(tmp_path, "report", "--promotion", "--suite", "s").stdout
    assert "| criterion | required | measured | met |" in promotion
    assert "| run success rate over 14 days | >= 95% | 50.0% | **no** |" in promotion
    kernel = tracker(tmp_path, "report", "--kernel", "b", "--suite", "s").stdout
    assert "## Kernel `b` is flaky in s" in kernel and "passed 2 of 4 times" in kernel
    assert kernel.count("-m pytest") == 1  # the one flaky test, alone
    with receiving() as r:
        r.reply = b'{"html_url": "https://github.com/o/r/issues/7", "number": 7}'
        r.answer = 201
        # the CLI helper clears TRACKER_* variables: the token comes from the file here
        config = (
            f'github_token = "{SECRET}"\n[github]\nrepo = "o/r"\n'
            f'api_url = "http://127.0.0.1:{r.port}"\n'
        )
        filed = tracker(tmp_path, "report", HOSTILE, "--suite", "s", "--file-issue", config=config)
    assert filed.returncode == 0, filed.stderr
    assert "https://github.com/o/r/issues/7" in filed.stdout and SECRET not in filed.stdout
    with session_scope(db) as session:
        links = queries.issue_links(session, "s")
    assert [(link.subject, link.url) for link in links] == [
        (HOSTILE, "https://github.com/o/r/issues/7")
    ]
    nothing = tracker(tmp_path, "report", "--suite", "s")
    assert nothing.returncode == 2 and "give one of" in nothing.stderr


@pytest.mark.sqlite_only
def test_a_report_says_where_it_failed_and_on_what(run_suite, settings, tmp_path):
    """A real failure's traceback gives the frames in the suite's own files; a later failure
    ingested without a probed environment leaves the environment to the run that had one."""
    from tracker.analysis.issue import test_report

    nodeid = "test_outcomes.py::test_fail"
    probed = run_suite("test_outcomes.py")["run"]["id"]
    _store(settings, tmp_path, 1, {nodeid: ("failed", "again")}, suite="realities")
    with session_scope(settings.database_url) as session:
        md = test_report(
            session, settings, queries.test_ids(session, "realities", [nodeid])[nodeid]
        )
    assert "outermost first, then the one that raised:\n\n- `test_outcomes.py:9`\n" in md
    assert f"Of run #{probed}, its latest failing run with a probed environment:" in md
    assert "| python |" in md


def test_a_healthy_streak_comments_once_and_closes_nothing(tmp_path):
    """A test, a kernel and the promotion verdict, each filed as an issue: each issue gets one
    comment once its subject is healthy, and none before."""
    from tracker.issues import comment_healthy

    links = {HOSTILE: 7, "kernel:b": 8, "promotion": 9}
    now = datetime.now(UTC)
    with receiving() as r:
        r.answer = 201
        settings = settings_for(
            tmp_path,
            github=GitHubConfig(repo="o/r", api_url=f"http://127.0.0.1:{r.port}", healthy_runs=2),
            github_token=SECRET,
        )
        _store(settings, tmp_path, 0, {HOSTILE: ("failed", "boom")}, now - timedelta(days=20))
        with session_scope(settings.database_url) as session:
            for subject, number in links.items():
                store.add_issue_link(
                    session, "s", subject, f"https://github.com/o/r/issues/{number}"
                )
        assert comment_healthy(settings, "s") == []  # failing; no run in the promotion window
        _store(settings, tmp_path, 1, {HOSTILE: ("passed", None)}, now - timedelta(days=7))
        assert comment_healthy(settings, "s") == []  # one healthy run of the two needed
        for day in range(6, -1, -1):  # then a run on each of the 7 days to today
            _store(
                settings, tmp_path, 8 - day, {HOSTILE: ("passed", None)}, now - timedelta(days=day)
            )
        commented = comment_healthy(settings, "s")
        assert sorted(commented) == [f"https://github.com/o/r/issues/{n}" for n in (7, 8, 9)]
        assert comment_healthy(settings, "s") == []  # once
    assert sorted(r.paths) == [f"/repos/o/r/issues/{n}/comments" for n in (7, 8, 9)]
    bodies = sorted(b["body"] for b in r.got)
    assert all("closes nothing" in body for body in bodies)
    assert "No test of kernel b failed an attempt in the suite's last 2 runs." in bodies[0]
    assert bodies[1].startswith("The promotion criterion is met now")
    assert bodies[2].startswith("The tracker has seen this test pass its first attempt")


def test_alerts_are_refused_without_where_to_send():
    with pytest.raises(ValueError, match="needs url_env"):
        AlertConfig(name="x", format="slack")
    with pytest.raises(ValueError, match="needs a path"):
        AlertConfig(name="x", format="file")


def test_an_uploaded_run_gets_its_alert_after_the_answer(tmp_path):
    from fastapi.testclient import TestClient

    out = tmp_path / "alerts.jsonl"
    settings = settings_for(
        tmp_path,
        token="t" * 16,
        alerts=[AlertConfig(name="mail", format="file", path=out, level="info")],
    )
    auth = {"Authorization": "Bearer " + "t" * 16}
    with TestClient(create_app(settings)) as client:
        for outcome in ("passed", "failed"):
            body = junit({"t/test_a.py::test_x": (outcome, "boom")}).encode()
            answer = client.post(
                "/api/v1/suites/s/runs",
                headers=auth,
                data={"runner": "r"},
                files={"file": ("j.xml", body)},
            )
            assert answer.status_code == 201
    # the app's end waits for the work it queued: both runs were worked out, one at a time
    sent = [json.loads(line) for line in out.read_text().splitlines()]
    assert [a["id"] for a in sent] == ["run:2"]  # the first run changed nothing worth saying
    assert [e["kind"] for e in sent[0]["events"]] == ["new_failures", "newly_broken", "kernel"]


def test_what_a_run_changed_is_not_read_from_the_run_after_it(tmp_path):
    """A run's changes are worked out after it is stored, maybe once the next is too: two
    uploads a moment apart must not lend the first the second's failure."""
    out = tmp_path / "alerts.jsonl"
    settings = settings_for(tmp_path, alerts=[AlertConfig(name="mail", format="file", path=out)])
    first = datetime.now(UTC) - timedelta(minutes=1)
    ids = [
        _store(settings, tmp_path, n, {"t/test_a.py::test_x": (outcome, "boom")}, when)
        for n, (outcome, when) in enumerate(
            [("passed", first), ("failed", first + timedelta(milliseconds=300))]
        )
    ]
    with session_scope(settings.database_url) as session:
        runs = [queries.run_info(session, i) for i in ids]
        assert run_events(session, settings, runs[0]) == []
        assert [e["kind"] for e in run_events(session, settings, runs[1])] == [
            "new_failures", "newly_broken", "kernel",
        ]  # fmt: skip


def test_a_runner_silent_here_is_a_missed_night_once(tmp_path):
    """A runner that pushes to this server has no schedule here: its silence is the alert."""
    out = tmp_path / "alerts.jsonl"
    settings = settings_for(tmp_path, alerts=[AlertConfig(name="mail", format="file", path=out)])
    four_days = datetime.now(UTC) - timedelta(days=4, hours=2)
    _store(settings, tmp_path, 0, {"t/test_a.py::test_x": ("passed", None)}, four_days)
    assert alerts.missed_nights(settings) == ["silent:s:r:1"]
    assert alerts.missed_nights(settings) == []  # the same silence: once
    alerts.send(settings)
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["events"][0]["text"].startswith("no run of s on r for 4 days (the last: ")
    _store(settings, tmp_path, 1, {"t/test_a.py::test_x": ("passed", None)})
    assert alerts.missed_nights(settings) == []  # it ran again


def test_two_senders_at_once_send_each_alert_once(tmp_path, monkeypatch):
    with receiving() as r:
        monkeypatch.setenv("HOOK", f"http://127.0.0.1:{r.port}/hook")
        settings = settings_for(
            tmp_path, alerts=[AlertConfig(name="team", format="json", url_env="HOOK")]
        )
        for n, outcome in enumerate(["passed", "failed"]):
            cases = {"t/test_a.py::test_x": (outcome, "boom")}
            alerts.record_run(settings, _store(settings, tmp_path, n, cases))
        barrier = threading.Barrier(4)

        def sender() -> int:
            barrier.wait()
            return alerts.send(settings)

        threads = [ThreadPoolExecutor(1).submit(sender) for _ in range(4)]
        assert sorted(t.result() for t in threads) == [0, 0, 0, 1]
    assert [b["id"] for b in r.got] == ["run:2"]


def _searched(session, test_id: int, run_id: int, verdict: str, details: dict) -> Investigation:
    """A polluter search's result, stored as the search stores it."""
    now = datetime.now(UTC)
    return store.save_investigation(
        session,
        Investigation(
            test_id=test_id, kind="polluter", run_id=run_id, started_at=now, finished_at=now,
            verdict=verdict, details=details,
        ),
    )  # fmt: skip


def test_a_polluter_found_is_an_alert(tmp_path):
    out = tmp_path / "alerts.jsonl"
    settings = settings_for(tmp_path, alerts=[AlertConfig(name="mail", format="file", path=out)])
    run_id = _store(settings, tmp_path, 0, {HOSTILE: ("failed", "boom")})
    with session_scope(settings.database_url) as session:
        test_id = queries.test_ids(session, "s", [HOSTILE])[HOSTILE]
        details = {"culprits": ["t/test_a.py::test_y"], "evidence": ["fails after: 3/3"]}
        found = _searched(session, test_id, run_id, "polluter", details)
    alerts.after_run(settings, run_id)
    alerts.investigated(settings, "s", found)
    first, line = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["id"] == f"investigation:{found.id}" and line["level"] == "warning"
    assert line["events"][0]["text"] == f"{HOSTILE} fails after t/test_a.py::test_y (polluter)"
    from fastapi.testclient import TestClient

    api = TestClient(create_app(settings)).get(f"/api/v1/runs/{run_id}/changes").json()
    # the run's own events, then what was found in its order
    assert api["events"] == [*first["events"], *line["events"]]


def test_a_search_whose_set_passed_again_blames_no_one(tmp_path):
    """Not confirmed: no alert, and the report lists the suspects as not blamed."""
    out = tmp_path / "alerts.jsonl"
    settings = settings_for(
        tmp_path,
        helpers.cli_database or f"sqlite:///{tmp_path / 'cli.db'}",
        alerts=[AlertConfig(name="mail", format="file", path=out)],
    )
    run_id = _store(settings, tmp_path, 0, {HOSTILE: ("failed", "boom")})
    with session_scope(settings.database_url) as session:
        test_id = queries.test_ids(session, "s", [HOSTILE])[HOSTILE]
        details = {"culprits": [], "suspects": ["t/test_a.py::test_y"], "probes": 9,
                   "evidence": ["fails after t/test_a.py::test_y: 0/3"]}  # fmt: skip
        found = _searched(session, test_id, run_id, "not confirmed", details)
    alerts.investigated(settings, "s", found)
    assert not out.exists()
    md = tracker(tmp_path, "report", HOSTILE, "--suite", "s").stdout
    assert "blamed no test: **not confirmed** (fails after t/test_a.py::test_y: 0/3)" in md
    assert "passed every try (not blamed):\n\n- `t/test_a.py::test_y`" in md
    assert "fails after `t/test_a.py::test_y`" not in md


def test_the_slot_before_a_moment_is_found_for_cadences_up_to_16_days(tmp_path):
    from tracker.schedule import slot_before

    at = datetime(2026, 12, 1, 8, 0, 1, tzinfo=UTC)

    def before(cron: str) -> datetime | None:
        return slot_before(SuiteConfig(name="s", path=tmp_path, schedule=cron), "UTC", at)

    assert before("*/3 * * * * *") == datetime(2026, 12, 1, 8, 0, 0, tzinfo=UTC)
    assert before("30 2 * * *") == datetime(2026, 12, 1, 2, 30, tzinfo=UTC)
    assert before("0 9 1 * *") is None  # monthly: not looked for (a missed night is nightly)
