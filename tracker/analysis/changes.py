"""What changed: between a run and the one before it (tests newly failing, fixed, newly flaky,
the environment under the kernels), and between runners of one suite (a test stable on one
device and flaky on another). The run page, the suite page and the API read the same answers.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlmodel import Session

from tracker import queries
from tracker.analysis.flaky import HISTORY_RUNS, NO_DATA
from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.records import FAILING, FLAKY

# what a maintainer asks when failures begin: did the stack under the kernels change?
ENVIRONMENT_KEYS = (
    "device_model",
    "device_count",
    "driver",
    "cann",
    "torch",
    "torch_npu",
    "triton",
    "python",
    "suite_package",
    "kernel_cache",  # a run's own, not a probed fact: a cold night is slower, and not a slowdown
)


def environment_diff(before: dict | None, now: dict | None) -> list[tuple[str, Any, Any]]:
    """(key, before, now) for each part of the probed environment that differs."""
    before, now = before or {}, now or {}
    return [(k, before.get(k), now.get(k)) for k in ENVIRONMENT_KEYS if before.get(k) != now.get(k)]


def _with_cache(run: dict[str, Any]) -> dict[str, Any]:
    """The probed environment and the run's kernel cache state, compared together."""
    return {**(run["environment"] or {}), "kernel_cache": run["kernel_cache"]}


def run_changes(
    session: Session, run: dict[str, Any], against: int | None = None
) -> dict[str, Any] | None:
    """`run` (`queries.run_info`) against `against`, else the runner's run before it; None when
    there is none."""
    previous = against or queries.previous_run_id(session, run["id"])
    if previous is None:
        return None
    before = queries.final_outcomes(session, previous)
    now = queries.final_outcomes(session, run["id"])
    bad = set(FAILING)
    earlier = queries.run_info(session, previous)
    unprobed = [f"run #{r['id']}" for r in (earlier, run) if not r["environment"]]
    return {
        "previous": previous,
        "unknown": " and ".join(unprobed),
        "environment": environment_diff(_with_cache(earlier), _with_cache(run)),
        "new_failures": sorted(n for n, o in now.items() if o in bad and before.get(n) not in bad),
        "fixed": sorted(n for n, o in now.items() if o not in bad and before.get(n) in bad),
        "still_failing": sorted(n for n, o in now.items() if o in bad and before.get(n) in bad),
        "new_flaky": sorted(n for n, o in now.items() if o == FLAKY and before.get(n) != FLAKY),
    }


def compare_runners(
    session: Session, settings: Settings, suite: str, runners: list[str], days: int | None
) -> list[dict[str, Any]]:
    """Tests whose verdict differs between runners (stable on a2-8, flaky on a2-1): the
    device, not the test, may be the cause. A runner's verdict counts only from as many runs of
    the test as history needs to call one flaky (HISTORY_RUNS): one run of a test says "stable"
    of nearly anything. Each side shows its counts."""
    if len(runners) < 2:
        return []
    sides: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    names: dict[int, str] = {}
    for runner in runners:
        for test_id, stats in Scope(session, settings, suite, runner, days).stats().items():
            if stats.verdict != NO_DATA:
                sides[test_id][runner] = {
                    "verdict": stats.verdict,
                    "runs": stats.runs,
                    "failures": stats.failures,
                    "enough": stats.runs >= HISTORY_RUNS,
                }
                names[test_id] = stats.nodeid
    differing = []
    for test_id, side in sides.items():
        judged = {s["verdict"] for s in side.values() if s["enough"]}
        if sum(s["enough"] for s in side.values()) > 1 and len(judged) > 1:
            differing.append({"test_id": test_id, "nodeid": names[test_id], "sides": side})
    return sorted(differing, key=lambda row: row["nodeid"])[:100]
