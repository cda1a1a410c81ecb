"""The `tracker` command as a user runs it: a real process, a real SQLite file, exit codes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DATA, SUITES, tracker, wait_until


def test_run_example_json(tmp_path):
    proc = tracker(tmp_path, "run", "example", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    run = out["run"]
    assert set(run) >= {"id", "status", "suite", "runner", "commit", "started_at", "counts"}
    assert run["suite"] == "example" and run["status"] == "flaky"
    assert run["counts"] == {"flaky": 1, "passed": 22, "skipped": 1, "xfailed": 1}
    result = next(r for r in out["results"] if r["outcome"] == "flaky")
    assert result["kernel"] == "cross_entropy"
    assert [a["outcome"] for a in result["attempts"]] == ["failed", "passed"]
    assert set(result["attempts"][0]) >= {"outcome", "duration", "message"}
    assert (tmp_path / "cli.db").exists()
    assert Path(run["artifacts"], "p0.reportlog.jsonl").exists()


def test_ingest_runs_show(tmp_path):
    proc = tracker(
        tmp_path,
        "ingest",
        str(DATA / "reportlog_complete.jsonl"),
        "--suite",
        "transformers",
        "--runner",
        "gha-910b",
        "--commit",
        "abc123",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)["run"]
    assert (run["suite"], run["runner"], run["commit"], run["source"]) == (
        "transformers",
        "gha-910b",
        "abc123",
        "ingest",
    )
    listed = json.loads(tracker(tmp_path, "runs", "--suite", "transformers", "--json").stdout)
    assert [r["id"] for r in listed["runs"]] == [run["id"]]
    shown = tracker(tmp_path, "show", "last")
    assert shown.returncode == 0 and "test_poisons_device" in shown.stdout


def test_bad_upload_stores_nothing(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<testsuite><testcase name='x'>")
    proc = tracker(tmp_path, "ingest", str(bad), "--suite", "s", "--runner", "r")
    assert proc.returncode == 2
    assert "not well-formed XML" in proc.stderr
    assert json.loads(tracker(tmp_path, "runs", "--json").stdout) == {"runs": []}


def test_started_at_needs_an_offset(tmp_path):
    proc = tracker(
        tmp_path,
        "ingest",
        str(DATA / "junit_pytest.xml"),
        "--suite",
        "s",
        "--runner",
        "r",
        "--started-at",
        "2026-11-29T22:00:00",
    )
    assert proc.returncode == 2 and "time zone offset" in proc.stderr
    proc = tracker(
        tmp_path,
        "ingest",
        str(DATA / "junit_pytest.xml"),
        "--suite",
        "s",
        "--runner",
        "r",
        "--started-at",
        "2026-11-29T22:00:00+08:00",
        "--json",
    )
    assert json.loads(proc.stdout)["run"]["started_at"] == "2026-11-29T14:00:00Z"


SUITE = f"""
[runner]
name = "ci"
device = "cpu"
[[suites]]
name = "realities"
path = "{SUITES / "realities"}"
python = "{sys.executable}"
args = ["test_ids.py"]
"""


@pytest.mark.parametrize(
    ("config", "args", "message"),
    [
        (SUITE + "colour = 'red'\n", ["runs"], "suites.0.colour: unknown key"),
        ("bogus = 1\n", ["runs"], "bogus: unknown key"),
        (SUITE + "schedule = '61 * * * *'\n", ["runs"], "suites.0.schedule: not a valid cron"),
        (
            SUITE.replace('["test_ids.py"]', '["-n", "8"]'),
            ["runs"],
            "suites.0.args: pytest-xdist options",
        ),
        ('timezone = "Mars/Olympus"\n', ["runs"], "timezone: unknown time zone"),
        (
            SUITE.replace("realities'", "nowhere'").replace(
                str(SUITES / "realities"), "/no/such/dir"
            ),
            ["run", "realities"],
            "suites.0.path: /no/such/dir is not a directory",
        ),
        (SUITE, ["run", "other"], "suite 'other' is not in the config (configured: realities)"),
        ("[runner\n", ["runs"], "not valid TOML"),
        (SUITE + "ref = '--upload-pack=touch PWNED'\n", ["runs"], "suites.0.ref: String should"),
    ],
)
def test_config_errors_name_the_key(tmp_path, config, args, message):
    proc = tracker(tmp_path, *args, config=config)
    assert proc.returncode == 2, proc.stdout
    assert message in proc.stderr


def test_run_a_configured_suite(tmp_path):
    proc = tracker(tmp_path, "run", "realities", config=SUITE)
    assert proc.returncode == 0, proc.stderr
    assert "3 passed" in proc.stdout


def test_missing_device_is_an_infra_error(tmp_path):
    proc = tracker(
        tmp_path,
        "run",
        "realities",
        "--json",
        config=SUITE.replace('device = "cpu"', 'device = "npu"'),
    )
    assert proc.returncode == 4, proc.stderr
    run = json.loads(proc.stdout)["run"]
    assert run["status"] == "infra_error"
    assert "npu-smi" in run["message"]


def _marking_suite(tmp_path: Path, probe: str) -> str:
    """A suite whose one test leaves a mark, run by an interpreter that leaves one when pytest
    starts. Its probe (`python -c`) `waits` up to 30 s for that mark, `fails`, or runs as is."""
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_mark.py").write_text(
        f"def test_mark():\n    open({str(tmp_path / 'ran')!r}, 'w').close()\n"
    )
    started, waited = tmp_path / "pytest-started", tmp_path / "probe-saw-pytest"
    before_probe = {
        "waits": f"for i in $(seq 300); do [ -e {started} ] && break; sleep 0.1; done\n"
        f"[ -e {started} ] && touch {waited}\n",
        "fails": "echo no torch here; exit 1\n",
    }.get(probe, "")
    python = tmp_path / "python"
    python.write_text(
        f'#!/bin/sh\nif [ "$1" = "-c" ]; then\n{before_probe}:\n'
        f'else touch {started}; fi\nexec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    return f"""
[runner]
name = "ci"
device = "cpu"
[[suites]]
name = "marks"
path = "{tmp_path / "suite"}"
python = "{python}"
"""


def test_the_suite_is_collected_while_the_device_is_probed(tmp_path):
    """The probe (4-7 s on a GPU) no longer comes before the processes' collection."""
    proc = tracker(tmp_path, "run", "marks", "--json", config=_marking_suite(tmp_path, "waits"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "probe-saw-pytest").exists()  # pytest had started before the probe ended
    assert json.loads(proc.stdout)["run"]["counts"] == {"passed": 1}


@pytest.mark.parametrize(
    ("device", "probe", "started", "why"),
    [  # the processes started beside the probe collect, and nothing goes out to them
        ("cuda", "fails", True, "the suite's interpreter"),
        # an NPU's busy check would see them: they wait for the probe there
        ("npu", "", False, "npu-smi"),
    ],
)
def test_no_test_runs_on_a_device_the_probe_finds_unfit(tmp_path, device, probe, started, why):
    config = _marking_suite(tmp_path, probe).replace('"cpu"', f'"{device}"\ndevices = [0]')
    proc = tracker(tmp_path, "run", "marks", "--json", config=config)
    assert proc.returncode == 4, proc.stderr
    out = json.loads(proc.stdout)
    assert out["run"]["status"] == "infra_error" and why in out["run"]["message"]
    assert (tmp_path / "pytest-started").exists() == started and not (tmp_path / "ran").exists()
    assert out["results"] == []


def test_db_upgrade(tmp_path):
    proc = tracker(tmp_path, "db", "upgrade")
    assert proc.returncode == 0 and "newest schema" in proc.stdout


def test_ctrl_c_keeps_what_finished_and_leaves_no_process(tmp_path):
    config = SUITE.replace('args = ["test_ids.py"]', 'args = ["test_ids.py", "test_hang.py"]')
    config += "test_timeout = 120\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.db'}"
    (tmp_path / "tracker.toml").write_text(config)
    # a test run started in the background of a script inherits SIGINT ignored; Ctrl-C in a
    # terminal is what this test is about, so the tracker gets Python's own handler back
    ctrl_c = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv = ['tracker', 'run', 'realities']; runpy.run_module('tracker.cli', "
        "run_name='__main__')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", ctrl_c],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def ready() -> bool:
        return _passed(tmp_path) >= 3 and _started(tmp_path, "test_hang.py::test_hang")

    assert wait_until(ready, 60), "the ids never passed, or test_hang never started"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    shown = json.loads(tracker(tmp_path, "show", "last", "--json").stdout)
    assert shown["run"]["status"] == "interrupted"
    outcomes = {r["nodeid"]: r["outcome"] for r in shown["results"]}
    assert sum(o == "passed" for o in outcomes.values()) == 3
    assert outcomes["test_hang.py::test_after_hang"] == "not_run"
    said = tracker(tmp_path, "show", "last").stdout
    assert "not run     test_hang.py::test_after_hang" in said and "not_run" not in said
    assert not [
        p
        for p in Path("/proc").glob("[0-9]*/cmdline")
        if b"tracker_plugin" in _read(p) and str(tmp_path).encode() in _read(p)
    ]


def _started(folder: Path, nodeid: str) -> bool:
    """Whether our plugin has reported the test as started (it is running now, or was)."""
    mark = f'"e": "start", "nodeid": "{nodeid}"'
    return any(
        mark in log.read_text() for log in folder.glob("tracker-data/runs/*/*/p*.events.jsonl")
    )


def _passed(folder: Path) -> int:
    """Tests passed so far, from the reportlogs of the runs under `folder`."""
    reports = [
        json.loads(line)
        for log in folder.glob("tracker-data/runs/*/*/p*.reportlog.jsonl")
        for line in log.read_text().splitlines()
        if line.endswith("}")  # a line being written is left for the next look
    ]
    return sum(r.get("when") == "call" and r["outcome"] == "passed" for r in reports)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # the process ended meanwhile
        return b""


def test_config_typos_are_all_named_with_the_nearest_key(tmp_path):
    config = '[runner]\nnmae = "x"\n[[suites]]\nname = "a"\npath = "."\ntest_timout = 3\n'
    proc = tracker(tmp_path, "runs", config=config)
    assert proc.returncode == 2
    assert "runner.nmae: unknown key (did you mean name?)" in proc.stderr
    assert "suites.0.test_timout: unknown key (did you mean test_timeout?)" in proc.stderr


def test_serve_on_a_busy_port_is_a_usage_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        proc = tracker(tmp_path, "serve", "--port", port, "--no-scheduler")
    assert proc.returncode == 2  # not 3, which says "promotion not met"
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr


def test_every_command_says_what_it_does_in_one_line(tmp_path):
    for group in ([], ["quarantine"], ["db"]):
        listing = tracker(tmp_path, *group, "--help").stdout.split("Commands:")[1]
        lines = [line.strip() for line in listing.splitlines() if line.strip()]
        assert lines and all("..." not in line and len(line.split()) > 2 for line in lines), lines
    for command in ("run", "ingest", "flaky", "kernels", "promotion", "plan", "serve"):
        assert tracker(tmp_path, command, "--help").returncode == 0
    assert "--json" in tracker(tmp_path, "flaky", "--help").stdout


def test_ingest_of_a_directory_is_one_line_not_a_traceback(tmp_path):
    (tmp_path / "results").mkdir()
    proc = tracker(tmp_path, "ingest", "results", "--suite", "s", "--runner", "r")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "is a directory" in proc.stderr


def test_empty_answers_are_said_and_words_are_whole(tmp_path):
    from helpers import junit

    from tracker.words import plural

    assert (plural(1, "pass"), plural(17, "pytest process")) == ("1 pass", "17 pytest processes")
    (tmp_path / "j.xml").write_text(junit({"t/test_a.py::test_a": ("passed", None)}))
    assert tracker(tmp_path, "ingest", "j.xml", "--suite", "s", "--runner", "r").returncode == 0
    listed = tracker(tmp_path, "quarantine", "list", "--suite", "s")
    assert listed.returncode == 0 and "No test of s is quarantined." in listed.stdout
    proposed = tracker(tmp_path, "quarantine", "propose", "--suite", "s")
    assert proposed.returncode == 0 and proposed.stdout == ""  # stdout: commands only
    assert "Nothing to propose: no flaky test of s" in proposed.stderr


def test_an_ingest_only_suite_names_what_a_search_needs(tmp_path):
    from helpers import junit

    (tmp_path / "j.xml").write_text(junit({"t/test_a.py::test_a": ("failed", "boom")}))
    assert tracker(tmp_path, "ingest", "j.xml", "--suite", "ci", "--runner", "r").returncode == 0
    for command in (["bisect", "t/test_a.py::test_a"], ["polluter", "t/test_a.py::test_a"]):
        proc = tracker(tmp_path, *command, "--suite", "ci")
        assert proc.returncode == 2 and "add [[suites]] with name and path" in proc.stderr
    plan = tracker(tmp_path, "plan", "ci")
    assert plan.returncode == 2 and "add [[suites]] with name and path" in plan.stderr


def test_at_80_columns_names_stay_whole_and_messages_wrap_at_words(tmp_path):
    from helpers import junit

    long_kernel = "t/test_fused_linear_scaled_cross_entropy.py::test_a"
    message = "RuntimeError: " + " ".join(["out of resource: shared memory"] * 6)
    (tmp_path / "j.xml").write_text(junit({long_kernel: ("failed", message)}))
    assert tracker(tmp_path, "ingest", "j.xml", "--suite", "s", "--runner", "r").returncode == 0
    kernels = tracker(tmp_path, "kernels", "--suite", "s", process=True).stdout  # no terminal
    assert "fused_linear_scaled_cross_entropy " in kernels and "…" not in kernels
    assert max(len(line) for line in kernels.splitlines()) <= 80
    heads = " ".join(kernels.split("─")[0].split())  # named by what they count, some on 2 lines
    assert all(word in heads for word in ("pass", "rate", "flaky", "failing"))
    assert heads.count("tests") == 3
    shown = tracker(tmp_path, "show", "last").stdout.splitlines()
    message_lines = [line for line in shown if "shared" in line or "RuntimeError" in line]
    assert len(message_lines) > 1 and all(len(line) <= 80 for line in message_lines)
    assert all(not line.rstrip().endswith(("shar", "Runtim")) for line in message_lines)


def test_prose_keeps_a_long_id_whole_and_a_number_with_its_unit(monkeypatch):
    """A run's note names test ids longer than the line; Rich's wrapping folded them mid-id and
    parted "145.6" from "s" (`tracker show` at 80 columns on a real night)."""
    from importlib import import_module

    from rich.console import Console

    app = import_module("tracker.cli.app")  # the package's `app` is the Typer app
    console = Console(width=30, record=True, soft_wrap=True, highlight=False)
    monkeypatch.setattr(app, "out", console)
    long_id = "t/test_mlp.py::test_correctness[dtype0-2-256-256-512]"
    app.prose(f"the runs took exactly 145.6 s, and {long_id} failed twice\nat 8 slots", 2)
    lines = console.export_text().splitlines()
    assert lines == [
        "  the runs took exactly",
        "  145.6 s, and",
        f"  {long_id}",
        "  failed twice",
        "  at 8 slots",
    ]


def test_a_database_that_cannot_be_used_is_one_line_not_a_traceback(tmp_path):
    from helpers import TRACKER, junit

    (tmp_path / "j.xml").write_text(junit({"t/test_a.py::test_a": ("passed", None)}))
    (tmp_path / "folder").mkdir()
    for url, said in (
        (f"sqlite:///{tmp_path / 'j.xml' / 'x.db'}", "File exists"),  # its folder is a file
        (f"sqlite:///{tmp_path / 'folder'}", "the database cannot be used: unable to open"),
    ):
        env = {**os.environ, "TRACKER_DATABASE_URL": url}
        proc = subprocess.run(
            [*TRACKER, "ingest", "j.xml", "--suite", "s", "--runner", "r"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1
