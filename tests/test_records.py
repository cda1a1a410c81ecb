"""The words of docs/design.md: final outcomes, run status, kernels, bounds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tracker.records import AttemptRecord, RunRecord, bound, final_outcome, kernel_of, summarize


def atts(*outcomes: str) -> list[AttemptRecord]:
    return [AttemptRecord("t.py::x", o) for o in outcomes]


@pytest.mark.parametrize(
    ("attempts", "final"),
    [
        ((), "not_run"),
        (("passed",), "passed"),
        (("failed", "passed"), "flaky"),
        (("crashed", "failed", "passed"), "flaky"),
        (("timeout", "passed"), "flaky"),
        (("failed", "failed"), "failed"),
        (("error", "passed"), "flaky"),
        (("skipped",), "skipped"),
        (("xpassed",), "xpassed"),
        (("interrupted",), "interrupted"),
    ],
)
def test_final_outcome(attempts, final):
    assert final_outcome(atts(*attempts)) == final


def run_of(*outcome_lists, collected=()) -> RunRecord:
    attempts = [AttemptRecord(f"t.py::t{i}", o) for i, os in enumerate(outcome_lists) for o in os]
    return RunRecord(
        "s", "r", "runner", datetime.now(UTC), collected=list(collected), attempts=attempts
    )


@pytest.mark.parametrize(
    ("record", "status"),
    [
        (run_of(["passed"], ["skipped"], ["xfailed"]), "passed"),
        (run_of(["passed"], ["failed", "passed"]), "flaky"),
        (run_of(["passed"], ["failed", "failed"]), "failed"),
        (run_of(["passed"], collected=["t.py::t0", "t.py::never"]), "failed"),
        (run_of(["passed"], ["interrupted"]), "interrupted"),
        (run_of(), "infra_error"),
    ],
)
def test_run_status(record, status):
    assert summarize(record)[1] == status


def test_kernel_names():
    assert kernel_of("test/transformers/test_rms_norm.py::test_x[a-b]") == "rms_norm"
    assert kernel_of("test/transformers/test_fused_linear_cross_entropy.py") == (
        "fused_linear_cross_entropy"
    )


def test_bound_keeps_head_and_tail():
    text = "HEAD" + "x" * 10_000 + "TAIL"
    cut = bound(text, 200)
    assert len(cut) <= 200 and cut.startswith("HEAD") and cut.endswith("TAIL")
    assert bound("short", 200) == "short"


def test_long_nodeids_stay_unique():
    a = AttemptRecord("t.py::x[" + "a" * 2000 + "1]", "passed")
    b = AttemptRecord("t.py::x[" + "a" * 2000 + "2]", "passed")
    assert a.nodeid != b.nodeid and len(a.nodeid) < 1100
