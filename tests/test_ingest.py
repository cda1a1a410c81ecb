"""Ingest of recorded reportlog and JUnit files, including cut-off and hostile ones."""

from __future__ import annotations

import gzip
import io
import json
import re
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import DATA

from tracker.ingest import CUT_LOG, IngestError, load_run, read_path, read_results
from tracker.ingest.junit import parse_junit
from tracker.records import summarize

REPORTLOG = DATA / "reportlog_complete.jsonl"
JUNIT = DATA / "junit_pytest.xml"

# Plain pytest, no tracker: no reruns, and the poisoned process fails every later test.
RECORDED = {
    "test_outcomes.py::test_pass": "passed",
    "test_outcomes.py::test_fail": "failed",
    "test_outcomes.py::test_fixture_error": "error",
    "test_outcomes.py::test_skip": "skipped",
    "test_outcomes.py::test_xfail": "xfailed",
    "test_outcomes.py::test_xpass": "xpassed",
    'test_ids.py::test_hostile_id[<script>alert("x")</script>]': "passed",
    'test_ids.py::test_hostile_id[it\'s "quoted" & <b>bold</b>]': "passed",
    "test_ids.py::test_hostile_id[\\xf1and\\xfa-\\u4e2d\\u6587-\\U0001f680]": "passed",
    "test_flaky.py::test_fails_first_time": "failed",
    "test_poison.py::test_poisons_device": "failed",
    **{f"test_poison.py::test_after_poison[{i}]": "failed" for i in range(5)},
}


def load(path: Path, **kw):
    return load_run(path, suite="s", runner="r", **kw)


def _report(nodeid, when, worker, start, stop, outcome="passed") -> str:
    """One xdist worker's TestReport line, with its times."""
    fields = {"nodeid": nodeid, "when": when, "outcome": outcome, "worker_id": worker}
    times = {"duration": stop - start, "start": start, "stop": stop}
    return json.dumps({"$report_type": "TestReport", **fields, **times})


def finals(record) -> dict[str, str]:
    return summarize(record)[0]


def test_reportlog_outcomes():
    record = load(REPORTLOG)
    assert finals(record) == RECORDED
    assert summarize(record)[1] == "failed"
    assert record.started_at.year == 2026 and record.started_at.tzinfo is not None
    cascade = [a for a in record.attempts if "test_after_poison" in a.nodeid]
    assert all("507035" in a.message for a in cascade)


def test_gzipped_reportlog(tmp_path):
    gz = tmp_path / "log.jsonl.gz"
    gz.write_bytes(gzip.compress(REPORTLOG.read_bytes()))
    assert finals(load(gz)) == RECORDED


def test_junit_agrees_with_reportlog():
    record = load(JUNIT)
    # JUnit has no xpass marker: a non-strict xpass is a plain pass there
    assert finals(record) == {**RECORDED, "test_outcomes.py::test_xpass": "passed"}
    assert record.started_at == datetime(2026, 11, 30, 1, 28, 51, 973397, tzinfo=UTC)


def test_log_cut_off_mid_run(tmp_path):
    lines = REPORTLOG.read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if "test_fail" in ln and '"setup"' in ln)
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(lines[: cut + 1]) + lines[cut + 1][:40])  # and half a line
    record = load(path)
    assert finals(record) == {
        "test_outcomes.py::test_pass": "passed",
        "test_outcomes.py::test_fail": "interrupted",
    }
    assert summarize(record)[1] == "interrupted"
    assert record.message == CUT_LOG


def test_a_log_cut_between_tests_is_not_a_pass(tmp_path):
    """Killed between two tests (a CI job's time limit): every test in the file passed, and
    the run still says it is not whole, since the tests after the cut are not in it."""
    lines = REPORTLOG.read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if "test_fail" in ln and '"setup"' in ln)
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(lines[:cut]))
    record = load(path)
    assert finals(record) == {"test_outcomes.py::test_pass": "passed"}
    assert summarize(record)[1] == "interrupted" and record.message == CUT_LOG
    whole = load(REPORTLOG)  # a failure still fails a cut run: it is evidence
    assert whole.message is None and summarize(whole)[1] == "failed"
    path.write_text("".join(ln for ln in lines if "SessionFinish" not in ln))
    assert summarize(load(path))[1] == "failed" and load(path).message == CUT_LOG


GITHUB_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4" timestamp="2026-11-29T22:00:00">
<testcase classname="test.transformers.test_rms_norm" name="test_correctness[f32-4]" time="1.5"/>
<testcase classname="test.transformers.test_mlp.TestFalcon" name="test_mlp[bf16]" time="3.0">
  <flakyFailure message="OutOfResources: shared memory">Triton OutOfResources</flakyFailure>
</testcase>
<testcase classname="test.transformers.test_rope" name="test_rope" time="0.1">
  <rerunFailure message="AssertionError: 1 != 2">trace</rerunFailure>
  <failure message="AssertionError: 1 != 2">trace</failure>
</testcase>
<testcase classname="test.transformers.test_geglu" name="test_big" time="900.1">
  <failure message="Failed: Timeout (&gt;900.0s) from pytest-timeout.">stack</failure>
</testcase>
<testcase classname="test.transformers.test_geglu" name="test_skip" time="0">
  <skipped type="pytest.skip" message="no bf16"/>
</testcase>
</testsuite></testsuites>"""


def test_junit_from_a_github_actions_job(tmp_path):
    path = tmp_path / "results.xml"
    path.write_text(GITHUB_JUNIT)
    record = load(path)
    by_test = {n: [a.outcome for a in atts] for n, atts in record.by_test().items()}
    assert by_test == {
        "test/transformers/test_rms_norm.py::test_correctness[f32-4]": ["passed"],
        "test/transformers/test_mlp.py::TestFalcon::test_mlp[bf16]": ["failed", "passed"],
        "test/transformers/test_rope.py::test_rope": ["failed", "failed"],
        "test/transformers/test_geglu.py::test_big": ["timeout"],
        "test/transformers/test_geglu.py::test_skip": ["skipped"],
    }
    assert finals(record)["test/transformers/test_mlp.py::TestFalcon::test_mlp[bf16]"] == "flaky"


def test_zipped_artifact(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("results.xml", GITHUB_JUNIT)
    path = tmp_path / "artifact.zip"
    path.write_bytes(buf.getvalue())
    assert len(finals(load(path))) == 5


def test_rerun_reports_of_pytest_rerunfailures(tmp_path):
    base = '{"$report_type": "TestReport", "nodeid": "t.py::x", "duration": 0.1, '
    lines = [
        base + '"when": "setup", "outcome": "passed", "longrepr": null}',
        base + '"when": "call", "outcome": "rerun", "longrepr": "E   AssertionError: no"}',
        base + '"when": "setup", "outcome": "passed", "longrepr": null}',
        base + '"when": "call", "outcome": "passed", "longrepr": null}',
        base + '"when": "teardown", "outcome": "passed", "longrepr": null}',
        '{"$report_type": "SessionFinish", "exitstatus": 0}',
    ]
    path = tmp_path / "rerun.jsonl"
    path.write_text("\n".join(lines) + "\n")
    record = load(path)
    assert [a.outcome for a in record.attempts] == ["failed", "passed"]
    assert record.attempts[0].message == "AssertionError: no"
    assert finals(record) == {"t.py::x": "flaky"}


BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<testsuite><testcase classname="a" name="&lol3;"/></testsuite>"""
XXE = """<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<testsuite><testcase classname="a" name="&x;"/></testsuite>"""


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (BOMB.encode(), "forbidden construct"),
        (XXE.encode(), "forbidden construct"),
        (b"<testsuite><testcase name='a'>", "not well-formed XML"),
        (b"<html><body>502 Bad Gateway</body></html>", "root element is <html>"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00" * 100, "binary file"),
        (b'{"$report_type": "SessionStart"}\n\xff\xfe bad bytes\n', "not UTF-8"),
        (b'{"not": "a report"}\n{"x": 1}\n', "not a pytest-reportlog record"),
        (
            b'{"$report_type": "SessionStart"}\n{broken json\n{"$report_type": "SessionFinish"}\n',
            "line 2: not JSON",
        ),
        (b"hello world", "neither a pytest reportlog"),
        (b"", "is empty"),
        (b"\n  \n", "is empty"),
        (gzip.compress(REPORTLOG.read_bytes())[:200], "truncated gzip"),
        (b'{"$report_type": "SessionStart"}\n', "holds no test results"),
    ],
)
def test_bad_files_are_rejected(tmp_path, content, expected):
    path = tmp_path / "upload.bin"
    path.write_bytes(content)
    with pytest.raises(IngestError, match=expected):
        load(path)


def test_two_gigabyte_file_is_refused_without_reading(tmp_path):
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as fh:
        fh.truncate(2 * 1024**3)  # sparse: costs no disk
    with pytest.raises(IngestError, match="larger than the limit"):
        read_path(path)


def test_gzip_bomb_is_stopped_at_the_limit():
    bomb = gzip.compress(b'{"$report_type": "SessionStart"}\n' * 300_000)
    with pytest.raises(IngestError, match="larger than 1 MB uncompressed"):
        read_results(io.BytesIO(bomb), "bomb.gz", limit=1024 * 1024)


def test_junit_nodeid_without_file_attribute():
    attempts = parse_junit(
        '<testsuite name="pytest">'
        '<testcase classname="tests.unit.TestA.TestB" name="test_x[1]"/></testsuite>'
    ).attempts
    assert attempts[0].nodeid == "tests/unit.py::TestA::TestB::test_x[1]"


def junit_finals(xml: str, tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "junit.xml"
    path.write_text(xml, encoding="utf-8")
    return finals(load(path))


def test_junit_outcome_is_the_worst_result_element(tmp_path):
    # pytest writes <skipped> then <error> for a skipped test whose teardown errors
    assert junit_finals(
        """<testsuite name="s">
        <testcase classname="c" name="skip_then_error"><skipped/><error message="teardown"/>
        </testcase>
        <testcase classname="c" name="all_three"><skipped/><failure/><error/></testcase>
        <testcase classname="c" name="skip_then_failure"><skipped/><failure/></testcase>
        </testsuite>""",
        tmp_path,
    ) == {
        "s::c::skip_then_error": "error",
        "s::c::all_three": "error",
        "s::c::skip_then_failure": "failed",
    }


def test_junit_status_attribute(tmp_path):
    assert junit_finals(
        """<testsuite name="factorial">
        <testcase name="off" status="disabled"/>
        <testcase name="gtest_off" status="notrun"/>
        <testcase name="ran" status="run"/>
        <testcase name="bad" status="failed"/>
        <testcase name="threw" status="errored"/>
        <testcase name="off_but_failed" status="disabled"><failure message="x"/></testcase>
        </testsuite>""",
        tmp_path,
    ) == {
        "factorial::off": "skipped",
        "factorial::gtest_off": "skipped",
        "factorial::ran": "passed",
        "factorial::bad": "failed",
        "factorial::threw": "error",
        "factorial::off_but_failed": "failed",  # a failure element is never dropped
    }


def test_junit_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "xunit.xml"
    path.write_bytes(
        b"\xef\xbb\xbf" + b'<testsuites><testsuite name="a"><testcase name="t"/>'
        b"</testsuite></testsuites>"
    )
    assert finals(load(path)) == {"a::t": "passed"}


def test_junit_same_names_in_different_suites_are_different_tests(tmp_path):
    # jest-junit: one <testsuite> per file, no file attribute, classname == name
    assert junit_finals(
        """<testsuites>
        <testsuite name="a.test.js"><testcase classname="adds" name="adds"/></testsuite>
        <testsuite name="b.test.js"><testcase classname="adds" name="adds">
          <failure>Error: expected 3</failure></testcase></testsuite>
        <testsuite name="outer"><testsuite name="inner">
          <testcase classname="K" name="t"/></testsuite></testsuite>
        </testsuites>""",
        tmp_path,
    ) == {"a.test.js::adds": "passed", "b.test.js::adds": "failed", "outer::inner::K::t": "passed"}


def test_junit_retries_of_other_tools(tmp_path):
    path = tmp_path / "retries.xml"
    path.write_text(
        """<testsuite name="org.x.T">
        <testcase classname="org.x.T" name="testng_retry"><skipped/></testcase>
        <testcase classname="org.x.T" name="testng_retry"><failure message="boom"/></testcase>
        <testcase classname="org.x.T" name="pass_then_fail"/>
        <testcase classname="org.x.T" name="pass_then_fail"><failure message="late"/></testcase>
        <testcase classname="org.x.T" name="always"><failure/></testcase>
        <testcase classname="org.x.T" name="always"><error/></testcase>
        <testcase classname="org.x.T" name="surefire"><rerunFailure/><rerunFailure/></testcase>
        <testcase classname="org.x.T" name="skipped_retry"><skipped/></testcase>
        <testcase classname="org.x.T" name="skipped_retry"/>
        </testsuite>"""
    )
    record = load(path)
    by_test = {n: [a.outcome for a in atts] for n, atts in record.by_test().items()}
    assert by_test["org.x.T::testng_retry"] == ["skipped", "failed"]
    assert finals(record) == {
        "org.x.T::testng_retry": "failed",
        "org.x.T::pass_then_fail": "flaky",
        "org.x.T::always": "failed",
        "org.x.T::surefire": "flaky",
        "org.x.T::skipped_retry": "passed",
    }


def test_junit_testcases_without_names_stay_apart(tmp_path):
    assert junit_finals(
        """<testsuites><testsuite><testcase/><testcase><skipped/></testcase>
        <testcase><failure/></testcase><testcase><error/></testcase></testsuite></testsuites>""",
        tmp_path,
    ) == {
        "(testcase 1)": "passed",
        "(testcase 2)": "skipped",
        "(testcase 3)": "failed",
        "(testcase 4)": "error",
    }


def test_junit_suite_level_error_is_a_result(tmp_path):
    # a Java class that failed to load: the <error> sits on the suite, there is no testcase
    assert junit_finals(
        """<testsuite name="gda.XTest" tests="1" errors="1">
        <error message="gda/DAServer" type="java.lang.NoClassDefFoundError">trace</error>
        </testsuite>""",
        tmp_path,
    ) == {"gda.XTest": "error"}


def test_junit_garbage_times_keep_the_results(tmp_path):
    assert junit_finals(
        """<testsuite name="s" time="1967986371"><testcase name="a" time="-345345"/>
        <testcase name="b" time="NaN"/><testcase name="c" time="1,234.5"/></testsuite>""",
        tmp_path,
    ) == {"s::a": "passed", "s::b": "passed", "s::c": "passed"}


def test_ingested_duration_is_the_wall_span(tmp_path):
    # 8 xdist workers: 16 tests of 60 s each in 2 minutes of wall time
    lines = []
    for i in range(16):
        start = 1_780_000_000 + 60 * (i // 8)
        for when in ("setup", "call", "teardown"):
            lines.append(
                json.dumps(
                    {
                        "$report_type": "TestReport",
                        "nodeid": f"t.py::x[{i}]",
                        "when": when,
                        "outcome": "passed",
                        "duration": 60.0 if when == "call" else 0.0,
                        "start": start,
                        "stop": start + 60,
                    }
                )
            )
    path = tmp_path / "xdist.jsonl"
    path.write_text("\n".join(lines) + "\n")
    record = load(path)
    assert (record.finished_at - record.started_at).total_seconds() == 120
    # a pytest JUnit file: the suite's timestamp and time are the session's wall span
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest" time="480.5" timestamp="2026-11-29T22:00:00+08:00">'
        + "".join(f'<testcase classname="t" name="x{i}" time="60"/>' for i in range(40))
        + "</testsuite></testsuites>"
    )
    record = load(junit)
    assert record.started_at == datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    assert (record.finished_at - record.started_at).total_seconds() == 480.5
    # an explicit start moves the span, it does not change it
    moved = load(junit, started_at=datetime(2026, 11, 30, tzinfo=UTC))
    assert (moved.finished_at - moved.started_at).total_seconds() == 480.5


def test_junit_nested_too_deep_is_refused(tmp_path):
    path = tmp_path / "deep.xml"
    path.write_text("<testsuites>" + "<testsuite>" * 5000 + "</testsuite>" * 5000 + "</testsuites>")
    with pytest.raises(IngestError, match="nested more than 100 deep"):
        load(path)


def test_an_xdist_reportlog_keeps_each_workers_order_and_times(tmp_path, settings):
    import subprocess
    import sys

    from fastapi.testclient import TestClient
    from helpers import SUITES

    from tracker.db import session_scope
    from tracker.store import save_run
    from tracker.web.app import create_app

    log = tmp_path / "xdist.jsonl"
    args = ["-n", "2", "-p", "xdist", f"--report-log={log}", "-q", "test_fast.py", "test_slow.py"]
    subprocess.run([sys.executable, "-m", "pytest", *args], cwd=SUITES / "dispatch", check=True)
    record = load(log)
    by_worker: dict[str, list] = {}
    for a in record.attempts:
        by_worker.setdefault(a.worker, []).append(a)
    assert set(by_worker) == {"gw0", "gw1"}
    for process, worker in enumerate(("gw0", "gw1")):
        own = by_worker[worker]
        assert {a.process for a in own} == {process}
        assert [a.position for a in own] == list(range(len(own)))  # each worker's own order
        starts = [a.started_at for a in own]
        assert None not in starts and starts == sorted(starts)
    with session_scope(settings.database_url) as session:
        run_id = save_run(session, record).id
    page = TestClient(create_app(settings)).get(f"/runs/{run_id}").text
    assert re.search(r"Idle share per slot: gw0 \d+%, gw1 \d+%\.", page.replace("\n", " "))


def test_an_xdist_worker_that_died_in_a_test_is_its_crash(tmp_path):
    """xdist reports a worker's death as a `???` report of the test it was running ("worker 'gw0'
    crashed while running ...", in JUnit an error "on setup"), then goes on in a new worker: the
    test crashed (evidence, to be confirmed alone where long tests shared its device). The
    reportlog read it as cut by the log's end (`interrupted`, no evidence, the run interrupted),
    JUnit as an error."""
    import subprocess
    import sys

    from helpers import SUITES

    log, xml = tmp_path / "xdist.jsonl", tmp_path / "xdist.xml"
    args = ["-n", "2", "-p", "xdist", f"--report-log={log}", f"--junitxml={xml}", "test_abort.py"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args], cwd=SUITES / "realities", capture_output=True
    )
    assert b"crashed while running" in run.stdout
    finals = {
        "test_abort.py::test_before_abort": "passed",
        "test_abort.py::test_abort": "crashed",
        "test_abort.py::test_after_abort": "passed",
        "test_abort.py::test_after_abort_too": "passed",
    }
    record = load(log)
    (crash,) = [a for a in record.attempts if a.nodeid == "test_abort.py::test_abort"]
    assert crash.outcome == "crashed" and crash.worker in ("gw0", "gw1")
    assert crash.message == f"worker '{crash.worker}' crashed while running '{crash.nodeid}'"
    assert summarize(record)[:2] == (finals, "failed")
    assert summarize(load(xml))[:2] == (finals, "failed")


def test_a_test_the_log_cut_kept_its_worker_busy_until_the_end(tmp_path, settings):
    """A worker on a heavy test when the log was cut has only that test's setup report: the test
    ran at least until the log's last report, and the worker was busy, not idle (AY's xdist
    night, ingested, showed two workers 89-93% idle that ran one cut case each)."""
    from fastapi.testclient import TestClient

    from tracker.db import session_scope
    from tracker.store import save_run
    from tracker.web.app import create_app

    t0 = 1_796_226_000.0
    lines = [
        _report("t.py::test_heavy", "setup", "gw1", t0 + 1, t0 + 1.1),  # then the cut
        *(
            _report(f"t.py::test_light[{i}]", when, "gw0", t0 + i + a, t0 + i + b)
            for i in range(10)
            for when, a, b in (("setup", 0, 0.1), ("call", 0.1, 0.4), ("teardown", 0.4, 0.5))
        ),
    ]
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines) + "\n")
    record = load(path)
    heavy = next(a for a in record.attempts if a.nodeid == "t.py::test_heavy")
    assert heavy.outcome == "interrupted" and heavy.worker == "gw1"
    assert heavy.duration == pytest.approx(9.5 - 1, abs=0.01)  # to the last report's stop
    with session_scope(settings.database_url) as session:
        run_id = save_run(session, record).id
    page = TestClient(create_app(settings)).get(f"/runs/{run_id}").text
    idle = re.search(r"Idle share per slot: gw0 \d+%, gw1 (\d+)%\.", page.replace("\n", " "))
    assert idle and int(idle.group(1)) < 15


def test_an_xdist_crash_beside_a_long_test_counts_once_confirmed_alone(tmp_path):
    """xdist's report of a crash has no times (0): the test ran from its setup at least until the
    reports before it, so a long test on another worker ran beside it, and the crash is
    `unconfirmed` unless a run alone crashed too (as a timeout beside long tests is)."""

    t0 = 1_796_226_000.0
    crash = {"$report_type": "TestReport", "nodeid": "t.py::test_dies", "when": "???"}
    crash |= {"outcome": "failed", "duration": 0, "start": 0, "stop": 0}
    crash["longrepr"] = "worker 'gw0' crashed while running 't.py::test_dies'"
    lines = [
        _report("t.py::test_dies", "setup", "gw0", t0, t0 + 0.1),
        *(_report("t.py::test_long", w, "gw1", t0 + a, t0 + b) for w, a, b in
          (("setup", 0, 0.1), ("call", 0.1, 30), ("teardown", 30, 30.1))),
        json.dumps(crash),
    ]  # fmt: skip
    path = tmp_path / "crash.jsonl"
    path.write_text("\n".join(lines) + "\n")
    dies = next(a for a in load(path).attempts if a.nodeid == "t.py::test_dies")
    assert dies.outcome == "unconfirmed" and dies.duration == pytest.approx(30.1, abs=0.01)
    assert "beside 1 long test(s) on the same device (test_long)" in dies.message


def test_a_junit_file_without_times_draws_no_timeline(tmp_path, settings):
    from fastapi.testclient import TestClient

    from tracker.db import session_scope
    from tracker.store import save_run
    from tracker.web.app import create_app

    xml = tmp_path / "j.xml"
    xml.write_text('<testsuite><testcase classname="t" name="a" time="1.5"/></testsuite>')
    with session_scope(settings.database_url) as session:
        run_id = save_run(session, load(xml)).id
    page = TestClient(create_app(settings)).get(f"/runs/{run_id}").text
    assert "No timeline: the file gives no start times for its tests." in page
    assert '<svg class="timeline"' not in page
