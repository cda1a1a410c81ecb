"""Per-test judgement over a window: pass rate with its interval, flip rate, and a verdict with
its evidence (docs/design.md, "Evidence that a test is flaky").

- rerun: failed in suite order, passed on a rerun in the same run;
- same input: a pass and a failure of the first attempt on the same commit, runner and
  environment;
- history: >= 2 failures and >= 1 pass with at least two flips: one regression (or one fix) flips
  once, so a test that passed until commit X and failed on every run since is `broken`, not flaky.

Order-dependent suspects failed in suite order and passed on every isolated rerun; the tests that
ran before them in the same process are kept for a human or a bisect.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from tracker.analysis import history
from tracker.analysis.clusters import cascade_victims
from tracker.analysis.history import Observation
from tracker.analysis.stats import flip_rate, flips, wilson
from tracker.records import FAILING, FLAKY, PASSED

STABLE, FLAKY_VERDICT, BROKEN, FAILING_VERDICT, NO_DATA = (
    "stable",
    "flaky",
    "broken",
    "failing",
    "no_data",
)


@dataclass
class CaseStats:
    test_id: int
    nodeid: str
    kernel: str
    runs: int = 0  # runs in which the test's first attempt passed or failed
    failures: int = 0  # of those, failed (failed, error, crashed, timeout)
    sequence: list[bool] = field(default_factory=list)  # first attempts, oldest first: True = pass
    verdict: str = NO_DATA
    evidence: dict[str, Any] = field(default_factory=dict)
    # the first failing commit of a regression and the last good one; None when the commit did
    # not change across the break (or was not recorded): then no commit broke it
    broken_since: str | None = None
    last_good: str | None = None
    # the runs on either side of the break: their environments, compared, say what changed
    broken_run: int | None = None
    good_run: int | None = None
    order_dependent: bool = False
    ran_before: list[str] = field(default_factory=list)
    quarantined: bool = False
    last_failure: datetime | None = None

    def since(self) -> str:
        """Since when a broken or failing test fails, in words that claim no more than is known."""
        if self.verdict != BROKEN:
            return "failing on every run in the window"
        if self.broken_since:
            return f"broken since {self.broken_since} (last good {self.last_good})"
        return (
            f"broken since run #{self.broken_run} (last good run #{self.good_run}), with no "
            "commit change recorded between them: no commit is to blame"
        )

    @property
    def failure_rate(self) -> float:
        return self.failures / self.runs if self.runs else 0.0

    @property
    def failure_interval(self) -> tuple[float, float]:
        return wilson(self.failures, self.runs)

    @property
    def pass_rate(self) -> float | None:
        return 1 - self.failure_rate if self.runs else None

    @property
    def flip_rate(self) -> float:
        return flip_rate(self.sequence)

    def as_dict(self) -> dict[str, Any]:
        lo, hi = self.failure_interval
        return {
            "test_id": self.test_id,
            "nodeid": self.nodeid,
            "kernel": self.kernel,
            "verdict": self.verdict,
            "runs": self.runs,
            "failures": self.failures,
            "pass_rate": self.pass_rate,
            "failure_rate_interval": [round(lo, 4), round(hi, 4)],
            "flip_rate": round(self.flip_rate, 4),
            "evidence": self.evidence,
            "broken_since": self.broken_since,
            "last_good": self.last_good,
            "broken_run": self.broken_run,
            "good_run": self.good_run,
            "order_dependent": self.order_dependent,
            "ran_before": self.ran_before,
            "quarantined": self.quarantined,
        }


HISTORY_RUNS = 3  # the fewest runs in which history can show a test flaky: 2 failures, 1 pass


def judge(
    observations: list[Observation], cascade_share: float = 0.5, cascade_min: int = 5
) -> dict[int, CaseStats]:
    """Verdicts from the rows alone (no order-dependence detail: see `analyze`). A failure that
    is one victim of a cascade in its run (a poisoned device failing everything after it) is no
    evidence about the test, and is left out like a skip."""
    victims = cascade_victims(observations, cascade_share, cascade_min)
    stats: dict[int, CaseStats] = {}
    by_input: dict[tuple, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    rows_of: dict[int, list[Observation]] = defaultdict(list)
    for ob in observations:
        s = stats.setdefault(ob.test_id, CaseStats(ob.test_id, ob.nodeid, ob.kernel))
        if ob.first not in FAILING and ob.first != PASSED:
            continue  # skipped, xfailed, not run...: no evidence either way
        if (ob.run_id, ob.test_id) in victims:
            continue
        ok = ob.first == PASSED
        rows_of[ob.test_id].append(ob)
        s.runs += 1
        s.failures += not ok
        s.sequence.append(ok)
        if not ok:
            s.last_failure = ob.started_at
        if ob.commit:
            by_input[(ob.commit, ob.runner_id, ob.environment_id)][ob.test_id].append(ok)
        if ob.final == FLAKY:
            s.evidence.setdefault("rerun", []).append(ob.run_id)
    for (commit, runner, env), tests in by_input.items():
        for test_id, results in tests.items():
            if True in results and False in results:
                stats[test_id].evidence.setdefault("same_input", []).append(
                    {
                        "commit": commit,
                        "runner_id": runner,
                        "environment_id": env,
                        "passes": results.count(True),
                        "failures": results.count(False),
                    }
                )
    for test_id, s in stats.items():
        n_flips = flips(s.sequence)
        passes = s.runs - s.failures
        if s.failures >= 2 and passes >= 1 and n_flips >= 2:
            s.evidence["history"] = {"flips": n_flips, "failures": s.failures, "runs": s.runs}
        rows = rows_of[test_id]
        if not s.runs:
            s.verdict = NO_DATA
        elif s.evidence:
            s.verdict = FLAKY_VERDICT
        elif s.failures == 0:
            s.verdict = STABLE
        elif passes == 0:
            s.verdict = FAILING_VERDICT
        elif not s.sequence[-1] and n_flips == 1:
            first_fail = next(i for i, ob in enumerate(rows) if ob.first != PASSED)
            s.verdict = BROKEN
            bad, good = rows[first_fail], rows[first_fail - 1]
            s.broken_run, s.good_run = bad.run_id, good.run_id
            if bad.commit and good.commit and bad.commit != good.commit:
                s.broken_since, s.last_good = bad.commit, good.commit
        else:
            s.verdict = STABLE  # one failure long ago, fixed since: not enough to call flaky
    return stats


def analyze(
    session: Session,
    suite: int,
    runner: int | None,
    since: datetime,
    until: datetime,
    cascade_share: float = 0.5,
    cascade_min: int = 5,
) -> dict[int, CaseStats]:
    """Verdicts, order-dependence and quarantine state of every test seen in the window."""
    observations = history.observations(session, suite, runner, since, until)
    stats = judge(observations, cascade_share, cascade_min)
    pairs = {(run, s.test_id) for s in stats.values() for run in s.evidence.get("rerun", [])}
    attempts: dict[tuple[int, int], list[history.AttemptRow]] = defaultdict(list)
    for a in history.attempts_of(session, pairs):
        attempts[(a.run_id, a.test_id)].append(a)
    for s in stats.values():
        runs = s.evidence.get("rerun", [])
        suspect = [
            attempts[(r, s.test_id)]
            for r in runs
            if all(a.isolated and a.outcome == PASSED for a in attempts[(r, s.test_id)][1:])
        ]
        if runs and len(suspect) == len(runs):
            s.order_dependent = True
            first = suspect[-1][0]
            if first.process is not None and first.position is not None:
                s.ran_before = history.ran_before(
                    session, first.run_id, first.process, first.position
                )
    for test_id in history.quarantined(session, suite):
        if test_id in stats:
            stats[test_id].quarantined = True
    return stats


def ranked_flaky(stats: dict[int, CaseStats]) -> list[CaseStats]:
    """Flaky tests, most clearly failing first: the Wilson lower bound of the failure rate, so a
    test that failed 1 of 2 runs does not outrank one that failed 10 of 40."""
    flaky = [s for s in stats.values() if s.verdict == FLAKY_VERDICT]
    return sorted(flaky, key=lambda s: (-s.failure_interval[0], -s.failures, s.nodeid))
