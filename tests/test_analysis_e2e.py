"""End to end: runs made by the real runner or ingested from recorded files, then the verdicts
through the same CLI a maintainer uses."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import helpers
import pytest
from helpers import DATA, junit, tracker

from tracker.analysis.report import Scope
from tracker.db import session_scope

B = "test/transformers/test_mlp.py::test_falcon[bf16]"
C = "test/transformers/test_rope.py::test_rope[fp32]"
A = "test/transformers/test_rms_norm.py::test_rms[fp32]"
OOR = "OutOfResources: shared memory, Required: {}, Hardware limit: 65536"
NIGHTS = [  # (commit, {nodeid: (outcome, message)}), oldest first, one a night
    ("c0", {A: ("passed", None), B: ("failed", OOR.format(98304)), C: ("passed", None)}),
    ("c1", {A: ("passed", None), B: ("passed", None), C: ("passed", None)}),
    (
        "c2",
        {
            A: ("passed", None),
            B: ("failed", OOR.format(131072)),
            C: ("failed", "AssertionError: rope mismatch 0.031"),
        },
    ),
    (
        "c3",
        {
            A: ("passed", None),
            B: ("passed", None),
            C: ("failed", "AssertionError: rope mismatch 0.029"),
        },
    ),
]


@pytest.fixture(autouse=True)
def _cli_database(db_url, monkeypatch):
    """The CLI's verdicts, on SQLite and on PostgreSQL."""
    monkeypatch.setattr(helpers, "cli_database", db_url)


def ingest_nights(tmp_path, suite="transformers", nights=NIGHTS, runner="gha"):
    now = datetime.now(UTC)
    for i, (commit, cases) in enumerate(nights):
        path = tmp_path / f"night{i}.xml"
        path.write_text(junit(cases))
        started = (now - timedelta(days=len(nights) - 1 - i, minutes=5)).isoformat()
        proc = tracker(
            tmp_path,
            "ingest",
            str(path),
            "--suite",
            suite,
            "--runner",
            runner,
            "--commit",
            commit,
            "--started-at",
            started,
        )
        assert proc.returncode == 0, proc.stderr


@pytest.fixture
def nights(tmp_path):
    ingest_nights(tmp_path)
    return tmp_path


def test_flaky_broken_and_clusters(nights):
    data = json.loads(
        tracker(nights, "flaky", "--suite", "transformers", "--format", "json").stdout
    )
    assert [f["nodeid"] for f in data["flaky"]] == [B]
    assert data["flaky"][0]["evidence"]["history"] == {"flips": 3, "failures": 2, "runs": 4}
    assert data["flaky"][0]["failure_rate_interval"] == [0.15, 0.85]
    assert [(b["nodeid"], b["broken_since"], b["last_good"]) for b in data["broken"]] == [
        (C, "c2", "c1")
    ]
    runs = {
        r["commit"]: r["id"] for r in json.loads(tracker(nights, "runs", "--json").stdout)["runs"]
    }
    assert (data["broken"][0]["broken_run"], data["broken"][0]["good_run"]) == (
        runs["c2"],
        runs["c1"],
    )
    found = json.loads(tracker(nights, "clusters", "--suite", "transformers", "--json").stdout)
    sizes = {c["signature"]: c["size"] for c in found["clusters"]}
    assert sizes == {
        "OutOfResources: shared memory, Required: <n>, Hardware limit: <n>": 2,
        "AssertionError: rope mismatch <n>": 2,
    }


def test_kernel_table_markdown(nights):
    out = tracker(nights, "kernels", "--suite", "transformers", "--format", "markdown").stdout
    assert out.splitlines() == [
        "| Kernel | Status | Tests | Pass rate (14d) | Flaky | Failing |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
        "| mlp | 🟡 flaky | 1 | 50.0% | 1 | 0 |",
        "| rms_norm | ✅ stable | 1 | 100.0% | 0 | 0 |",
        "| rope | ❌ failing | 1 | 50.0% | 0 | 1 |",
    ]


def test_quarantine_keeps_running_but_stops_failing_runs(nights):
    for nodeid in (B, C):
        proc = tracker(
            nights,
            "quarantine",
            "add",
            "--suite",
            "transformers",
            nodeid,
            "--reason",
            "flaky on A2",
            "--by",
            "ci-bot",
        )
        assert proc.returncode == 0, proc.stderr
    deselect = tracker(nights, "flaky", "--suite", "transformers", "--format", "deselect").stdout
    # quoted: `[` is a glob to a shell
    assert deselect.splitlines() == [f"--deselect '{B}'", f"--deselect '{C}'"]
    path = nights / "again.xml"
    path.write_text(junit(NIGHTS[2][1]))
    run = json.loads(
        tracker(
            nights, "ingest", str(path), "--suite", "transformers", "--runner", "gha", "--json"
        ).stdout
    )["run"]
    assert run["status"] == "passed"  # both failures are quarantined
    assert run["counts"] == {"failed": 2, "passed": 1}  # and still recorded
    assert run["quarantined_failures"] == 2  # and "passed" does not hide them
    shown = tracker(nights, "show", "last").stdout
    assert "passed (2 quarantined failures)" in shown
    assert f"{B}  [quarantined]" in shown
    assert "passed (2 quarantined failures)" in tracker(nights, "runs", "--limit", "1").stdout
    detail = json.loads(tracker(nights, "show", "last", "--json").stdout)
    assert {r["nodeid"]: r["quarantined"] for r in detail["results"]} == {
        A: False,
        B: True,
        C: True,
    }
    listed = json.loads(
        tracker(nights, "quarantine", "list", "--suite", "transformers", "--json").stdout
    )
    assert [(q["nodeid"], q["by"]) for q in listed["quarantined"]] == [(B, "ci-bot"), (C, "ci-bot")]
    kernels = tracker(nights, "kernels", "--suite", "transformers", "--format", "json").stdout
    assert {k["kernel"]: k["status"] for k in json.loads(kernels)["kernels"]}["mlp"] == "stable"
    assert tracker(nights, "quarantine", "remove", "--suite", "transformers", B).returncode == 0
    assert tracker(nights, "quarantine", "remove", "--suite", "transformers", B).returncode == 2


def test_quarantine_refuses_ids_the_suite_never_recorded(nights):
    typo = B.replace("falcon", "falcom")
    proc = tracker(nights, "quarantine", "add", "--suite", "transformers", typo, "--reason", "x")
    assert proc.returncode == 2
    assert "never recorded" in proc.stderr and repr(B) in proc.stderr  # the likely meant id
    assert "quarantined" not in tracker(nights, "show", "last").stdout
    forced = [typo, "--reason", "from the old deselect list", "--force"]
    assert tracker(nights, "quarantine", "add", "--suite", "transformers", *forced).returncode == 0
    listed = tracker(nights, "quarantine", "list", "--suite", "transformers", "--json").stdout
    assert [q["nodeid"] for q in json.loads(listed)["quarantined"]] == [typo]


def test_promotion_exit_codes(tmp_path):
    green = [(f"g{i}", {A: ("passed", None), B: ("passed", None)}) for i in range(7)]
    ingest_nights(tmp_path, suite="green", nights=green)
    met = tracker(tmp_path, "promotion", "--suite", "green", "--json")
    assert met.returncode == 0, met.stdout
    verdict = json.loads(met.stdout)
    assert verdict["met"] and verdict["success_rate"] == 1.0
    assert verdict["success_rate_interval_95"][0] == pytest.approx(0.6457, abs=1e-4)  # 7/7
    assert verdict["p_rate_at_least_target"] == pytest.approx(1 - 0.95**8, abs=1e-4)
    ingest_nights(tmp_path)
    not_met = tracker(tmp_path, "promotion", "--suite", "transformers")
    assert not_met.returncode == 3
    assert "NOT MET" in not_met.stdout and "Not met: " in not_met.stdout
    assert re.search(r"\d+ of [\d,]+ runs? green \(\d+\.\d%, need 95%\)", not_met.stdout)
    assert "earliest" in not_met.stdout or "not within the next window" in not_met.stdout
    unknown = tracker(tmp_path, "promotion", "--suite", "nope")
    assert unknown.returncode == 2 and "no suite 'nope'" in unknown.stderr


def test_order_dependent_suspect_names_what_ran_before(run_suite, settings):
    run_suite("test_order.py", "test_ids.py")
    run_suite("test_order.py", "test_ids.py")
    with session_scope(settings.database_url) as session:
        stats = Scope(session, settings, "realities").stats()
    suspect = next(s for s in stats.values() if s.nodeid.endswith("test_b_needs_clean_state"))
    assert suspect.verdict == "flaky" and suspect.order_dependent
    assert len(suspect.evidence["rerun"]) == 2
    assert suspect.ran_before == ["test_order.py::test_a_leaves_state_behind"]
    others = [s for s in stats.values() if s.verdict != "stable"]
    assert others == [suspect]


def test_recorded_reportlog_cascade_is_device_fatal(tmp_path):
    proc = tracker(
        tmp_path, "ingest", str(DATA / "reportlog_complete.jsonl"), "--suite", "s", "--runner", "r"
    )
    assert proc.returncode == 0
    found = json.loads(tracker(tmp_path, "clusters", "--suite", "s", "--json").stdout)["clusters"]
    top = found[0]
    assert top["signature"] == "RuntimeError: device previously failed: error code is 507035"
    assert (top["size"], top["device_fatal"], len(top["cascade_runs"])) == (5, True, 1)


def test_the_cli_reads_at_80_columns_and_needs_no_suite_when_there_is_one(nights):
    long_id = "test/transformers/test_fused_linear_cross_entropy.py::test_correctness[" + (
        "dtype0-0.005-0.05-8-128-1024-4096-mean-100-True]"
    )
    flips = [(f"c{i}", {long_id: ("failed" if i % 2 else "passed", "boom")}) for i in range(4, 8)]
    ingest_nights(nights, nights=flips)
    flaky = tracker(nights, "flaky").stdout  # --suite: the only suite there is
    assert "…" not in flaky
    assert any(line.endswith(long_id) for line in flaky.splitlines())  # whole, on its own line
    assert f"   {B}" not in flaky and B in flaky
    runs = tracker(nights, "runs").stdout
    assert "…" not in runs and "c3" in runs and "timed_o" not in runs
    assert re.search(r"#\d+\s+\d{4}-\d\d-\d\d \d\d:\d\d UTC  failed", runs)  # zone named
    as_json = json.loads(tracker(nights, "flaky", "--json").stdout)
    assert as_json == json.loads(tracker(nights, "flaky", "--format", "json").stdout)
    assert json.loads(tracker(nights, "kernels", "--json").stdout)["kernels"]
    promotion = tracker(nights, "promotion")
    assert promotion.returncode == 3 and "{" not in promotion.stdout
    assert "runs: " in promotion.stdout and " failed" in promotion.stdout
    assert "Quarantine a test" in tracker(nights, "quarantine", "add", "--help").stdout
    clusters = tracker(nights, "clusters").stdout
    assert "2 failures in 1 test, 2 runs" in clusters and " 1 tests" not in clusters
    ingest_nights(nights, suite="other")
    two = tracker(nights, "flaky")
    assert (
        two.returncode == 2
        and "--suite is needed: the suites are other, transformers" in two.stderr
    )
