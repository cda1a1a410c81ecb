"""The analysis as the CLI and the web ask for it: by suite and runner name, over a window of
calendar days in the configured time zone."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlmodel import Session

from tracker import queries
from tracker.analysis import history
from tracker.analysis.clusters import Cluster, clusters, signature
from tracker.analysis.flaky import BROKEN, FAILING_VERDICT, CaseStats, analyze, ranked_flaky
from tracker.analysis.kernels import KernelRow, kernel_table
from tracker.analysis.promotion import Verdict, local_day, verdict, window_start
from tracker.analysis.rates import Day, Rates, daily, rates
from tracker.analysis.trends import Night, kernel_rates, nights, outcomes
from tracker.config import Settings
from tracker.records import FAILING


class StateCache:
    """Answers that change only when a run of the suite is added, starts or ends, the quarantine
    changes, or the day turns (streaks, windows): README badges polled all day and pages opened
    every morning then cost a few cheap queries instead of a 14-day analysis."""

    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._data: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._computing: dict[tuple, threading.Lock] = {}  # one computation per key at a time

    def get(self, scope: Scope, what: tuple, compute: Callable[[], Any]) -> Any:
        if scope.pinned:  # an explicit `now` (tests, benchmarks) always computes
            return compute()
        key = (
            scope.settings.database_url,
            scope.suite_id,
            scope.runner_id,
            what,
            local_day(scope.now, scope.tz),
            *scope.stamp(),
        )
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
            gate = self._computing.setdefault(key, threading.Lock())
        # readers of a key being computed wait for that answer instead of each computing it
        # again: after a push, 50 readers repeated the whole analysis at once
        with gate:
            with self._lock:
                if key in self._data:
                    return self._data[key]
            try:
                value = compute()
            finally:
                with self._lock:
                    self._computing.pop(key, None)
            with self._lock:
                self._data[key] = value
                while len(self._data) > self.size:
                    self._data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


cache = StateCache()


class Scope:
    """Suite, optional runner, window: resolved once, shared by every question."""

    def __init__(
        self,
        session: Session,
        settings: Settings,
        suite: str,
        runner: str | None = None,
        days: int | None = None,
        now: datetime | None = None,
    ) -> None:
        self.session, self.settings = session, settings
        self.suite, self.runner = suite, runner
        self.suite_id = history.suite_id(session, suite)
        self.runner_id = history.runner_id(session, runner)
        self.tz = ZoneInfo(settings.timezone)
        self.pinned = now is not None
        self.now = now or datetime.now(UTC)
        self.days = days or settings.analysis.flaky_window_days
        self.since = window_start(local_day(self.now, self.tz), self.days, self.tz)
        self._stats: dict[int, CaseStats] | None = None
        self._stamp: tuple | None = None

    def stamp(self) -> tuple:
        if self._stamp is None:
            self._stamp = queries.state_stamp(self.session, self.suite_id)
        return self._stamp

    def stats(self) -> dict[int, CaseStats]:
        if self._stats is None:
            self._stats = self._analyze(self.since)
        return self._stats

    def _analyze(self, since: datetime) -> dict[int, CaseStats]:
        a = self.settings.analysis
        return cache.get(
            self,
            ("stats", since),
            lambda: analyze(
                self.session,
                self.suite_id,
                self.runner_id,
                since,
                self.now,
                a.cascade_share,
                a.cascade_min,
            ),
        )

    def flaky(self) -> list[CaseStats]:
        return ranked_flaky(self.stats())

    def broken(self) -> list[CaseStats]:
        """Broken since a commit, or failing on every run of the window."""
        return sorted(
            (s for s in self.stats().values() if s.verdict in (BROKEN, FAILING_VERDICT)),
            key=lambda s: s.nodeid,
        )

    def kernels(self) -> list[KernelRow]:
        return kernel_table(self.stats())

    def head(self) -> dict[str, Any]:
        return {"suite": self.suite, "runner": self.runner, "window_days": self.days}

    def flaky_json(self) -> dict[str, Any]:
        """With each test's latest polluter search and bisection, where one was made (the
        bisection's first bad commit sits next to `broken_since`)."""
        flaky, broken = self.flaky(), self.broken()
        ids = [s.test_id for s in [*flaky, *broken]]
        found = {
            kind: queries.investigations(self.session, ids, kind) for kind in ("polluter", "bisect")
        }

        def entry(s: CaseStats) -> dict[str, Any]:
            return s.as_dict() | {k: v[s.test_id] for k, v in found.items() if s.test_id in v}

        return {
            **self.head(),
            "flaky": [entry(s) for s in flaky],
            "broken": [entry(s) for s in broken],
        }

    def kernels_json(self) -> dict[str, Any]:
        return {**self.head(), "kernels": [k.as_dict() for k in self.kernels()]}

    def clusters_json(self, top: int = 100) -> dict[str, Any]:
        return {**self.head(), "clusters": [c.as_dict() for c in self.clusters()[:top]]}

    def clusters(self) -> list[Cluster]:
        a = self.settings.analysis

        def compute() -> list[Cluster]:
            obs = history.observations(
                self.session, self.suite_id, self.runner_id, self.since, self.now
            )
            return clusters(obs, a.cascade_share, a.cascade_min)

        return cache.get(self, ("clusters", self.since), compute)

    def occurrences(self, key: str) -> tuple[Cluster, list[history.Observation]]:
        """A failure cluster and every first-attempt failure in it, newest first."""
        found = next((c for c in self.clusters() if c.key == key), None)
        if found is None:
            raise queries.NotFound(f"no failure cluster {key!r} in the last {self.days} days")
        obs = history.observations(
            self.session, self.suite_id, self.runner_id, self.since, self.now
        )
        return found, sorted(
            (o for o in obs if o.first in FAILING and signature(o.message) == found.signature),
            key=lambda o: (o.started_at, o.run_id),
            reverse=True,
        )

    def rates(self, days: int) -> Rates:
        """Green runs and the test pass rate over the last `days` local days."""
        since = window_start(local_day(self.now, self.tz), days, self.tz)
        return rates(
            history.runs(self.session, self.suite_id, self.runner_id, since, self.now), days
        )

    def daily(self, days: int) -> list[Day]:
        """Green runs day by day over the last `days` local days (the suite page's trend)."""
        since = window_start(local_day(self.now, self.tz), days, self.tz)
        runs = history.runs(self.session, self.suite_id, self.runner_id, since, self.now)
        return daily(runs, local_day(since, self.tz), days, self.tz)

    def nights(self) -> list[Night]:
        """Each run of the window, oldest first: the trend charts' points."""
        return nights(
            history.runs(self.session, self.suite_id, self.runner_id, self.since, self.now)
        )

    def kernel_trend(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Each kernel's (passed, ran) per run of the window."""

        def compute() -> dict[str, dict[int, tuple[int, int]]]:
            return kernel_rates(self.session, self.suite_id, self.runner_id, self.since, self.now)

        return cache.get(self, ("kernel_trend", self.since), compute)

    def outcomes(self, test_ids: list[int], run_ids: list[int]) -> dict[int, dict]:
        """test id -> run id -> (final outcome, quarantined): the grid's cells, the strips."""
        return outcomes(self.session, test_ids, run_ids)

    def recent(self, test_ids: list[int], runs: int = 15) -> dict[str, Any]:
        """The tests' outcomes in the scope's last `runs` runs, oldest first: the history strip
        beside each test in a table (None: not in that run)."""
        last = [n.run_id for n in self.nights()[-runs:]]
        found = self.outcomes(test_ids, last)
        return {
            "runs": last,
            "outcomes": {t: [found.get(t, {}).get(r, (None,))[0] for r in last] for t in test_ids},
        }

    def runners(self) -> list[str]:
        """The runners with runs of the suite: a page scoped to none of them pools them all."""
        return [r for _, r in queries.suite_runner_pairs(self.session, self.suite)]

    def runner_promotions(self) -> dict[str, Verdict]:
        """Each runner's own verdict, when the scope is every runner: the suite may be stable
        on a2-8 and not on a2-1, and the move upstream is decided per runner size."""
        if self.runner is not None:
            return {}
        names = self.runners()
        now = self.now if self.pinned else None
        return {
            name: Scope(self.session, self.settings, self.suite, name, self.days, now).promotion()
            for name in names
        }

    def promotion(self) -> Verdict:
        config = self.settings.promotion
        since = window_start(local_day(self.now, self.tz), config.window_days, self.tz)
        runs = history.runs(self.session, self.suite_id, self.runner_id, since, self.now)
        stats = self.stats() if config.window_days == self.days else self._analyze(since)
        return verdict(runs, stats, config, self.tz, self.now)
