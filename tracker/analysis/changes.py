"""What changed: between a run and the one before it (tests newly failing, fixed, newly flaky,
the environment under the kernels), and between runners of one suite (a test stable on one
device and flaky on another). The run page, the suite page and the API read the same answers.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlmodel import Session

from tracker import queries
from tracker.analysis.flaky import BROKEN, FLAKY_VERDICT, HISTORY_RUNS, NO_DATA, STABLE
from tracker.analysis.kernels import KERNEL_FAILING, KERNEL_NOT_RUN, KERNEL_STABLE
from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.records import FAILING, FLAKY, NOT_RUN, PASSED, SILENT
from tracker.words import plural, spoken

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
    "autotuning",  # "kept" or "per night" in that cache, else absent: how often a night tunes
)


def environment_diff(before: dict | None, now: dict | None) -> list[tuple[str, Any, Any]]:
    """(key, before, now) for each part of the probed environment that differs."""
    before, now = before or {}, now or {}
    return [(k, before.get(k), now.get(k)) for k in ENVIRONMENT_KEYS if before.get(k) != now.get(k)]


def with_cache(run: dict[str, Any]) -> dict[str, Any]:
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
        "environment": environment_diff(with_cache(earlier), with_cache(run)),
        "new_failures": sorted(n for n, o in now.items() if o in bad and before.get(n) not in bad),
        "fixed": sorted(n for n, o in now.items() if o == PASSED and before.get(n) in bad),
        "still_failing": sorted(n for n, o in now.items() if o in bad and before.get(n) in bad),
        # not run, cut or skipped now, or not in this run at all (an ingested log that ended
        # early): neither passed nor still failing
        "no_result": sorted(
            n for n, o in before.items() if o in bad and now.get(n, NOT_RUN) in SILENT
        ),
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


# What a run changed, as events: one list for the run page, the API and every alert destination.
CRITICAL, WARNING, INFO = "critical", "warning", "info"
EVENTS_LISTED = 20  # names listed per event; the rest are counted


def event(kind: str, level: str, text: str, tests: list[str] | None = None) -> dict[str, Any]:
    """One thing that changed, as every alert destination and the run page read it."""
    tests = tests or []
    more = len(tests) - EVENTS_LISTED
    return {
        "kind": kind,
        "level": level,
        "text": text,
        "tests": tests[:EVENTS_LISTED],
        "more": max(more, 0),
    }


def _states(scope: Scope) -> tuple[dict[str, str], dict[str, bool], dict[str, str], bool]:
    """Each test's verdict and quarantine, each kernel's status, the promotion verdict."""
    stats = scope.stats().values()
    verdicts = {s.nodeid: s.verdict for s in stats}
    quarantined = {s.nodeid: s.quarantined for s in stats}
    kernels = {k.kernel: k.status for k in scope.kernels()}
    return verdicts, quarantined, kernels, scope.promotion().met


def run_events(session: Session, settings: Settings, run: dict[str, Any]) -> list[dict[str, Any]]:
    """What `run` (`queries.run_info`) changed for its suite and runner: new failures and fixes
    against the run before; tests newly flaky or broken, quarantined tests grown healthy, kernels
    whose status moved and the promotion verdict, read from the analysis just before the run and
    with it (polluter searches and bisects are told of when made: `alerts.investigated`). Worked
    out once, when the run is stored
    (`alerts.record_run`): the analysis of a later day would answer differently."""
    started = datetime.fromisoformat(run["started_at"])
    scope = partial(Scope, session, settings, run["suite"], run["runner"])
    # the runs started up to this one's start: an upload a moment later, even one that started
    # before this one ended, or was stored while this was worked out, lends it nothing
    before = _states(scope(now=started - timedelta(microseconds=1)))
    after = _states(scope(now=started))
    (v0, _, k0, met0), (v1, q1, k1, met1) = before, after
    events: list[dict[str, Any]] = []
    changed = run_changes(session, run)
    if changed:
        if changed["new_failures"]:
            new = changed["new_failures"]
            events.append(event("new_failures", WARNING, plural(len(new), "new failure"), new))
        if changed["fixed"]:
            # not "fixed": most pass again at the same commit (a flaky test's good night)
            fixed, was = changed["fixed"], changed["previous"]
            text = f"{plural(len(fixed), 'test')} passed that failed in run #{was}"
            events.append(event("fixed", INFO, text, fixed))
    for verdict, kind, level in (
        (FLAKY_VERDICT, "newly_flaky", WARNING),
        (BROKEN, "newly_broken", CRITICAL),
    ):
        moved = sorted(n for n, v in v1.items() if v == verdict and v0.get(n) != verdict)
        if moved:
            # the verdict of the recent runs, not this run's outcome: a test this run fixed can
            # be newly flaky (it failed in some of them)
            text = f"{plural(len(moved), 'test')} newly {verdict}, by their recent runs"
            events.append(event(kind, level, text, moved))
    healthy = sorted(n for n, v in v1.items() if q1.get(n) and v == STABLE and v0.get(n) != STABLE)
    if healthy:
        text = f"{plural(len(healthy), 'quarantined test')} stable again: release?"
        events.append(event("quarantine_healthy", INFO, text, healthy))
    days = settings.analysis.flaky_window_days  # the window a kernel's status is read over
    for kernel in sorted(k1):
        was, now = k0.get(kernel), k1[kernel]
        if (
            was == now
            or now == KERNEL_NOT_RUN
            or (now, was) in ((KERNEL_STABLE, None), (KERNEL_STABLE, KERNEL_NOT_RUN))
        ):
            continue
        level = CRITICAL if now == KERNEL_FAILING else INFO
        # nothing of it before in the window (a new runner's first run): no "not run → failing"
        first = f"{now}, its first run on {run['runner']} in {days} days"
        moved = f"{spoken(was)} → {now}" if was else first
        events.append(event("kernel", level, f"kernel {kernel}: {moved}"))
    if met0 != met1:
        text = "promotion criterion met" if met1 else "promotion criterion no longer met"
        events.append(event("promotion", INFO if met1 else CRITICAL, text))
    return events


def level_of(events: list[dict[str, Any]]) -> str:
    """The most severe level among `events` (info when there are none)."""
    order = (INFO, WARNING, CRITICAL)
    return max((e["level"] for e in events), key=order.index, default=INFO)
