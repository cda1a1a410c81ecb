"""The runner against a fixture suite that behaves like a real NPU/GPU runner: every test runs
real pytest subprocesses, and checks the exact final outcome and attempt list of each test."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from helpers import SUITES, outcomes

from tracker.analysis.report import Scope
from tracker.db import session_scope
from tracker.web.app import create_app

# the runner side: a runner host keeps its own SQLite store
pytestmark = pytest.mark.sqlite_only

OUTCOMES = {
    "test_outcomes.py::test_pass": ("passed", ["passed"]),
    "test_outcomes.py::test_fail": ("failed", ["failed", "failed"]),
    "test_outcomes.py::test_fixture_error": ("error", ["error", "error"]),
    "test_outcomes.py::test_skip": ("skipped", ["skipped"]),
    "test_outcomes.py::test_xfail": ("xfailed", ["xfailed"]),
    "test_outcomes.py::test_xpass": ("xpassed", ["xpassed"]),
}
FLAKY = {"test_flaky.py::test_fails_first_time": ("flaky", ["failed", "passed"])}
ORDER = {
    "test_order.py::test_a_leaves_state_behind": ("passed", ["passed"]),
    "test_order.py::test_b_needs_clean_state": ("flaky", ["failed", "passed"]),
}
ABORT = {
    "test_abort.py::test_before_abort": ("passed", ["passed"]),
    "test_abort.py::test_abort": ("crashed", ["crashed", "crashed"]),
    "test_abort.py::test_after_abort": ("passed", ["passed"]),
    "test_abort.py::test_after_abort_too": ("passed", ["passed"]),
}
HANG = {
    "test_hang.py::test_hang": ("timeout", ["timeout", "timeout"]),
    "test_hang.py::test_hard_hang": ("timeout", ["timeout", "timeout"]),
    "test_hang.py::test_after_hang": ("passed", ["passed"]),
}
POISON = {
    "test_poison.py::test_poisons_device": ("failed", ["failed", "failed"]),
    **{f"test_poison.py::test_after_poison[{i}]": ("passed", ["passed"]) for i in range(5)},
}
IDS = {
    f"test_ids.py::test_hostile_id[{name}]": ("passed", ["passed"])
    for name in (
        '<script>alert("x")</script>',
        'it\'s "quoted" & <b>bold</b>',
        "\\xf1and\\xfa-\\u4e2d\\u6587-\\U0001f680",  # pytest escapes non-ASCII ids
    )
}
OUTPUT = {
    "test_output.py::test_prints_megabytes": ("passed", ["passed"]),
    "test_output.py::test_fails_with_huge_message": ("failed", ["failed", "failed"]),
}
FAST = {  # many quick tests, a process that ends right after them: no test left "running"
    **{f"test_fast.py::test_skipped_fast[{i}]": ("skipped", ["skipped"]) for i in range(300)},
    **{f"test_fast.py::test_passes_fast[{i}]": ("passed", ["passed"]) for i in range(300)},
}
BEHAVIOURS = {
    "test_outcomes.py": (OUTCOMES, "failed"),
    "test_flaky.py": (FLAKY, "flaky"),
    "test_order.py": (ORDER, "flaky"),
    "test_abort.py": (ABORT, "failed"),
    "test_hang.py": (HANG, "failed"),
    "test_poison.py": (POISON, "failed"),
    "test_ids.py": (IDS, "passed"),
    "test_output.py": (OUTPUT, "failed"),
    "test_fast.py": (FAST, "passed"),
}


@pytest.mark.parametrize("file", list(BEHAVIOURS))
def test_each_behaviour_alone(run_suite, file):
    expected, status = BEHAVIOURS[file]
    detail = run_suite(file)
    assert outcomes(detail) == expected
    assert detail["run"]["status"] == status
    assert detail["run"]["expected"] == len(expected)


def test_all_behaviours_together(run_suite):
    detail = run_suite()
    expected = {k: v for table, _ in BEHAVIOURS.values() for k, v in table.items()}
    assert outcomes(detail) == expected
    run = detail["run"]
    assert run["status"] == "failed"
    assert run["expected"] == len(expected) == sum(run["counts"].values())
    assert run["environment"]["device_kind"] == "cpu"
    assert run["commit"].startswith("content:")


def test_crash_and_timeout_keep_evidence(run_suite):
    detail = run_suite("test_abort.py", "test_hang.py", reruns=0)
    by_id = {r["nodeid"]: r for r in detail["results"]}
    crash = by_id["test_abort.py::test_abort"]["attempts"][0]
    assert crash["message"] == "the test process died (signal SIGABRT)"
    hard = by_id["test_hang.py::test_hard_hang"]["attempts"][0]
    assert hard["message"].startswith("no result after")
    soft = by_id["test_hang.py::test_hang"]["attempts"][0]
    assert "Timeout" in soft["message"]


def test_timeout_in_reporting_is_a_timeout_not_a_crash(run_suite, tmp_path):
    # pytest-timeout's limit covers a test's reporting too: its alarm in a reporting hook ends
    # pytest with an internal error (exit 3), which is the test running out of its time
    suite = tmp_path / "slow_report"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        "import time\n\n\ndef pytest_runtest_logreport(report):\n"
        "    if report.when == 'call' and report.nodeid.endswith('slowly'):\n"
        "        time.sleep(60)\n"
    )
    (suite / "test_report.py").write_text(
        "def test_reported_slowly():\n    pass\n\n\ndef test_after():\n    pass\n"
    )
    detail = run_suite(suite="slow_report", suite_path=suite, reruns=0)
    assert outcomes(detail) == {
        "test_report.py::test_reported_slowly": ("timeout", ["timeout"]),
        "test_report.py::test_after": ("passed", ["passed"]),
    }


def test_poisoned_process_is_restarted_not_cascaded(run_suite):
    detail = run_suite("test_poison.py", reruns=0)
    assert "device-fatal error" in detail["run"]["message"]
    workers = {r["nodeid"]: r["attempts"][0]["worker"] for r in detail["results"]}
    assert len(set(workers.values())) == 1  # same slot, fresh process


def test_messages_and_tracebacks_are_bounded(run_suite):
    detail = run_suite("test_output.py", reruns=0)
    failing = next(r for r in detail["results"] if r["outcome"] == "failed")
    assert len(failing["attempts"][0]["message"]) <= 1000


def test_run_timeout_keeps_what_finished(run_suite):
    # the limit falls in test_hard_hang (after test_hang's 5 s, before its 7 s watchdog) for a
    # start of up to ~7 s: under -n 6 on 2 cores a start took over 4 s, and a 6 s limit then
    # cut test_hang before its own timeout
    detail = run_suite(
        "test_hang.py", "test_outcomes.py", test_timeout=5, run_timeout=12, reruns=0,
        rerun_reserve=0,  # test_hang's timeout would otherwise stop the tests at 10.8 s
    )  # fmt: skip
    assert detail["run"]["status"] == "timed_out"
    got = outcomes(detail)
    assert got["test_hang.py::test_hang"] == ("timeout", ["timeout"])
    # cut by the run's limit, not by its own: no failure of the test
    assert got["test_hang.py::test_hard_hang"] == ("interrupted", ["interrupted"])
    cut = next(r for r in detail["results"] if r["nodeid"] == "test_hang.py::test_hard_hang")
    assert "the run's time limit" in cut["attempts"][0]["message"]
    assert got["test_outcomes.py::test_pass"] == ("not_run", [])
    assert detail["run"]["expected"] == 9


def test_a_failure_is_rerun_beside_the_tests_still_running(run_suite, settings):
    """A night that runs to its limit (every cold night on one GPU) reran no failure: now a
    failure is rerun at once, in a process of its own beside the test still running, which
    goes on to the run's limit."""
    detail = run_suite(  # test_hard_hang holds the one slot until the run's limit
        "test_flaky.py", "test_hang.py", deselect=["test_hang.py::test_hang"],
        test_timeout=60, run_timeout=16,
    )  # fmt: skip
    run = detail["run"]
    assert run["status"] == "timed_out" and "run_timeout of 16 s reached" in run["message"]
    got = outcomes(detail)
    assert (
        got["test_flaky.py::test_fails_first_time"] == FLAKY["test_flaky.py::test_fails_first_time"]
    )
    by_id = {r["nodeid"]: r["attempts"] for r in detail["results"]}
    first, rerun = by_id["test_flaky.py::test_fails_first_time"]
    assert (first["worker"], rerun["worker"]) == ("w0", "w1")  # w1: the spare slot
    assert got["test_hang.py::test_hard_hang"] == ("interrupted", ["interrupted"])
    assert "the run's time limit" in by_id["test_hang.py::test_hard_hang"][0]["message"]
    assert got["test_hang.py::test_after_hang"] == ("not_run", [])
    # the run page: the spare slot is named for what it did, not counted as idle
    page = TestClient(create_app(settings)).get(f"/runs/{run['id']}").text
    text = " ".join(page.split())
    assert re.search(
        r"Idle share per slot: w0 \d+%\. w1 only reran failures, beside the tests\.", text
    )
    assert re.search(r"Tests by outcome.*not run 1", text)  # named as people say it


def test_a_slot_with_no_test_left_reruns_failures_beside_the_spare(run_suite):
    """A night that runs to its limit: the spare slot alone reran failures one after the other
    while the other slots had nothing left to run (call AQ: 7 of 13 never rerun)."""
    detail = run_suite(
        suite="reruns", suite_path=SUITES / "reruns", workers_per_device=2, test_timeout=60,
        run_timeout=25,
    )  # fmt: skip
    by_id = {r["nodeid"]: r["attempts"] for r in detail["results"]}
    assert by_id["test_a_hold.py::test_hold"][0]["outcome"] == "interrupted"
    reruns = [a for n, tries in by_id.items() if "fails_once" in n for a in tries[1:]]
    # (a rerun the limit cuts is `interrupted`: on a loaded machine the last one may be)
    assert sum(a["outcome"] == "passed" for a in reruns) >= 3
    assert len({a["worker"] for a in reruns}) == 2  # the spare, and the slot with no test left


def test_each_failure_gets_its_reruns_once(run_suite):
    """`reruns = 2`: the first rerun runs beside the tests when it can, the rest after them, and
    none twice (a rerun beside counts as the first). Whether it can depends on how soon the
    tests end, so only the workers' names are asserted, not which ran what."""
    detail = run_suite("test_outcomes.py", "-k", "test_fail or test_pass", reruns=2)
    got = outcomes(detail)
    assert got["test_outcomes.py::test_fail"] == ("failed", ["failed"] * 3)
    assert got["test_outcomes.py::test_pass"] == ("passed", ["passed"])
    attempts = next(r["attempts"] for r in detail["results"] if r["nodeid"].endswith("test_fail"))
    assert {a["worker"] for a in attempts} <= {"w0", "w1"}


def test_a_timeout_stops_the_tests_to_be_confirmed_alone(run_suite, tmp_path):
    """A timeout beside other tests counts once it times out alone too: at the reserve (12 s)
    the running tests stop, since tests were left, and it gets its device to itself."""
    suite = tmp_path / "crowded"
    suite.mkdir()
    (suite / "test_a.py").write_text(
        "import time\n\n\ndef test_times_out():\n    time.sleep(600)\n"
    )
    (suite / "test_b.py").write_text(
        "import time\n\nimport pytest\n\n\n@pytest.mark.parametrize('i', range(40))\n"
        "def test_step(i):\n    time.sleep(1.2)\n"
    )
    detail = run_suite(
        suite_path=suite, test_timeout=4, run_timeout=24, rerun_reserve=0.5, workers_per_device=2
    )
    run = detail["run"]
    assert run["status"] == "timed_out" and "its last 50% to the reruns" in run["message"]
    got = outcomes(detail)
    assert got["test_a.py::test_times_out"] == ("timeout", ["timeout", "timeout"])
    steps = [r for r in detail["results"] if r["nodeid"].startswith("test_b.py")]
    cut = [r for r in steps if r["outcome"] == "interrupted"]
    assert cut and all("to keep the rest of its time for reruns" in r["attempts"][0]["message"]
                       for r in cut)  # fmt: skip
    assert any(r["outcome"] == "not_run" for r in steps)


def test_a_night_that_ends_within_its_reserve_ends_as_it_would_have(run_suite, tmp_path):
    """A failure (not a timeout) keeps no time for its rerun: the last test, running when the
    reserve begins (10 s), ends as it would have, and the night is whole, not `timed_out`."""
    suite = tmp_path / "late"
    suite.mkdir()
    (suite / "test_a.py").write_text("def test_fails():\n    assert False\n")
    (suite / "test_b.py").write_text("import time\n\n\ndef test_slow():\n    time.sleep(10)\n")
    detail = run_suite(suite_path=suite, test_timeout=60, run_timeout=20, rerun_reserve=0.5)
    assert detail["run"]["status"] == "failed"
    got = outcomes(detail)
    assert got["test_b.py::test_slow"] == ("passed", ["passed"])
    assert got["test_a.py::test_fails"] == ("failed", ["failed", "failed"])


def test_a_failure_the_limit_left_without_its_rerun_is_named(run_suite, tmp_path):
    """A failure whose rerun the run's limit came before reads like a confirmed one: the run
    says which (call AL: 4 test_mlp failures). The first attempt ends 10 s after the start,
    its rerun could not end before 20 s."""
    suite = tmp_path / "late_failure"
    suite.mkdir()
    (suite / "test_a.py").write_text(
        "import time\n\n\ndef test_slow_failure():\n    time.sleep(10)\n    assert False\n"
    )
    detail = run_suite(suite_path=suite, test_timeout=60, run_timeout=20, rerun_reserve=0)
    run = detail["run"]
    assert run["status"] == "timed_out"
    assert outcomes(detail)["test_a.py::test_slow_failure"][1][0] == "failed"
    assert "1 failure without a finished rerun, the run's limit came first" in run["message"]
    assert "test_a.py::test_slow_failure" in run["message"]
    passing = run_suite(suite_path=suite, test_timeout=60, run_timeout=40, rerun_reserve=0)
    assert "finished rerun" not in (passing["run"]["message"] or "")  # rerun in time: no such note


def test_two_workers_share_the_suite(run_suite):
    # group = "file": test_order.py stays in one process, in order, so its order-dependent
    # failure shows (pulled one by one, its two tests may land in different processes)
    detail = run_suite("test_fast.py", "test_order.py", workers_per_device=2, group="file")
    workers = {r["attempts"][0]["worker"] for r in detail["results"]}  # first: reruns aside
    assert workers == {"w0", "w1"}
    assert outcomes(detail)["test_order.py::test_b_needs_clean_state"][0] == "flaky"


def test_collection_error_is_recorded(run_suite):
    # three processes collect the suite (there is no separate collection): the error is kept once
    detail = run_suite(suite="broken_collection", workers_per_device=3)
    got = outcomes(detail)
    assert got["test_syntax_error.py"] == ("error", ["error"])
    assert got["test_fine.py::test_ok"] == ("passed", ["passed"])
    assert detail["run"]["status"] == "failed"
    assert not list(Path(detail["run"]["artifacts"]).glob("collect.*"))


def test_a_suite_that_cannot_be_collected_is_an_infra_error(run_suite):
    detail = run_suite("-p", "no_such_plugin_anywhere", workers_per_device=2)
    assert detail["run"]["status"] == "infra_error"
    assert detail["run"]["message"].startswith("collection failed: ")
    assert "no_such_plugin_anywhere" in detail["run"]["message"]


def test_nothing_collected_is_an_infra_error(run_suite):
    detail = run_suite("-k", "no_such_test_name")
    assert detail["run"]["status"] == "infra_error"
    assert "no tests" in detail["run"]["message"]


def test_reports_read_before_the_start_event_do_not_leave_a_test_running():
    from tracker.runner.process import Watch

    line = (
        '{{"$report_type": "TestReport", "nodeid": "t.py::{0}", "when": "{1}", '
        '"outcome": "skipped", "duration": 0.0, "longrepr": ["t.py", 1, "Skipped: no"]}}'
    )
    watch = Watch()
    watch.event({"e": "start", "nodeid": "t.py::a", "t": 0})
    # both reports of `b` are read before the start event of `b`
    for nodeid in ("a", "b"):
        watch.report(line.format(nodeid, "setup"))
        watch.report(line.format(nodeid, "teardown").replace("skipped", "passed"))
    watch.event({"e": "start", "nodeid": "t.py::b", "t": 0})
    assert watch.running() is None
    assert [a.outcome for a in watch.done] == ["skipped", "skipped"]


def _git(path, *args):
    subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)


def test_git_checkout_is_moved_to_ref_and_its_commit_recorded(run_suite, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(SUITES / "realities", repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(
        repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "one", "--allow-empty"
    )
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "suite")
    _git(repo, "tag", "v1")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    _git(repo, "rm", "-q", "test_ids.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "drop ids")
    detail = run_suite("test_ids.py", suite_path=repo, ref="v1")
    assert detail["run"]["commit"] == head
    assert detail["run"]["counts"] == {"passed": 3}
    broken = run_suite("test_ids.py", suite_path=repo, ref="no-such-ref")
    assert broken["run"]["status"] == "infra_error"
    assert broken["run"]["message"].startswith("checkout failed")


def test_pytest_output_is_bounded(tmp_path):
    from tracker.runner.artifacts import bound_output

    out = tmp_path / "p0.out"
    out.write_bytes(b"HEAD" + b"x" * 5_000_000 + b"TAIL")
    bound_output(out, limit=1000)
    data = out.read_bytes()
    assert data.startswith(b"HEAD") and data.endswith(b"TAIL") and len(data) < 1100


def test_run_limit_cut_does_not_fail_its_kernel(run_suite, settings):
    detail = run_suite(
        "test_hang.py",
        test_timeout=2,  # the watchdog (4 s) comes after the run's limit
        run_timeout=4,
        reruns=0,
        deselect=["test_hang.py::test_hang"],
    )
    assert detail["run"]["status"] == "timed_out"
    assert outcomes(detail)["test_hang.py::test_hard_hang"][0] == "interrupted"
    cut = next(r for r in detail["results"] if r["nodeid"] == "test_hang.py::test_hard_hang")
    assert "the run's time limit" in cut["attempts"][0]["message"]  # nothing failed: no reserve
    with session_scope(settings.database_url) as session:
        scope = Scope(session, settings, "realities")
        kernels = {k.kernel: k.status for k in scope.kernels()}
        assert kernels == {"hang": "not run"}
        assert scope.broken() == [] and scope.flaky() == []


def test_processes_the_run_limit_stops_before_their_first_test_are_no_fault(run_suite, tmp_path):
    """A process the run's limit stops while it collects (or a rerun process just started, at
    a real night's end: call AL) is not reported as pytest ending before running any test."""
    suite = tmp_path / "slow_start"
    suite.mkdir()
    (suite / "conftest.py").write_text("import time\ntime.sleep(30)\n")
    (suite / "test_a.py").write_text("def test_a():\n    pass\n")
    detail = run_suite(suite_path=suite, run_timeout=3, reruns=0)
    assert detail["run"]["status"] == "infra_error"
    assert detail["run"]["message"] == "collection failed: not within the run's time limit"


def test_a_process_starting_beside_another_never_sees_half_a_plugin(tmp_path):
    """Processes start at once (a rerun beside the restart after a device-fatal error): each
    must import the whole plugin, or it runs its whole file instead of its one test."""
    import threading

    from tracker.runner.process import PLUGIN_SOURCE, plugin_dir

    whole = PLUGIN_SOURCE.read_bytes()
    seen: set[bytes] = set()
    done = threading.Event()

    def start_processes() -> None:
        for _ in range(200):
            seen.add((plugin_dir(tmp_path) / "tracker_plugin.py").read_bytes())

    def import_it() -> None:  # what a process started meanwhile reads
        while not done.is_set():
            if (plugin := tmp_path / "plugin" / "tracker_plugin.py").exists():
                seen.add(plugin.read_bytes())

    reader = threading.Thread(target=import_it)
    reader.start()
    starters = [threading.Thread(target=start_processes) for _ in range(4)]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    done.set()
    reader.join()
    assert seen == {whole}
