"""The promotion verdict and its projection, on runs placed across time zone day boundaries."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from fastapi.testclient import TestClient

from tracker import store
from tracker.analysis.flaky import CaseStats
from tracker.analysis.history import RunRow
from tracker.analysis.promotion import verdict
from tracker.analysis.report import Scope
from tracker.config import PromotionConfig
from tracker.db import session_scope
from tracker.records import AttemptRecord, RunRecord
from tracker.web.app import create_app

SHANGHAI = ZoneInfo("Asia/Shanghai")
# 23:00 on Nov 30 in Shanghai
NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)


def nightly(days: list[int], status: dict[int, str] | None = None) -> list[RunRow]:
    """A run at 22:00 Shanghai (14:00 UTC) on each given day of November."""
    status = status or {}
    return [
        RunRow(i, datetime(2026, 11, d, 14, 0, tzinfo=UTC), status.get(d, "passed"), "c", 1, {})
        for i, d in enumerate(days)
    ]


def test_seven_green_nights_meet_the_criterion():
    v = verdict(nightly(list(range(24, 31))), {}, PromotionConfig(), SHANGHAI, NOW)
    assert v.met and v.consecutive_days == 7 and v.rate == 1.0
    assert v.earliest is None


def test_six_nights_are_one_short():
    v = verdict(nightly(list(range(25, 31))), {}, PromotionConfig(), SHANGHAI, NOW)
    assert not v.met and v.consecutive_days == 6
    assert v.earliest == date(2026, 12, 1)


def test_a_failure_must_age_out_of_the_window():
    runs = nightly(list(range(17, 31)), {20: "failed"})  # 13/14 = 92.9% < 95%
    v = verdict(runs, {}, PromotionConfig(), SHANGHAI, NOW)
    assert not v.met and v.counts["failed"] == 1
    assert v.earliest == date(2026, 12, 4)  # the window then starts Nov 21


def test_run_just_after_midnight_local_counts_for_the_local_day():
    # 16:30 UTC Nov 29 = 00:30 Nov 30 in Shanghai: together with runs Nov 24..29 that is 7 days
    runs = nightly(list(range(24, 30)))
    runs.append(RunRow(99, datetime(2026, 11, 29, 16, 30, tzinfo=UTC), "passed", "c", 1, {}))
    v = verdict(runs, {}, PromotionConfig(), SHANGHAI, NOW)
    assert v.consecutive_days == 7 and v.met
    # in UTC the same runs cover only Nov 24..29: six days
    assert verdict(runs, {}, PromotionConfig(), ZoneInfo("UTC"), NOW).consecutive_days == 6


def test_flaky_and_interrupted_runs():
    runs = nightly(list(range(24, 31)), {27: "flaky", 28: "interrupted"})
    v = verdict(runs, {}, PromotionConfig(), SHANGHAI, NOW)
    assert v.counts["flaky"] == 1 and v.counts["interrupted"] == 1
    assert v.total == 6 and v.successes == 5  # interrupted left out, flaky counts against
    assert v.consecutive_days == 2  # the interrupted night does not count as a day with a run


def test_unquarantined_flaky_test_blocks_until_quarantined():
    stats = {
        1: CaseStats(
            1,
            "t.py::x",
            "x",
            runs=7,
            failures=1,
            verdict="flaky",
            last_failure=NOW - timedelta(days=2),
        )
    }
    runs = nightly(list(range(24, 31)))
    v = verdict(runs, stats, PromotionConfig(), SHANGHAI, NOW)
    assert not v.met and v.unquarantined_flaky == ["t.py::x"]
    assert v.earliest == date(2026, 12, 12)  # its last failure (Nov 28) leaves the 14-day window
    stats[1].quarantined = True
    assert verdict(runs, stats, PromotionConfig(), SHANGHAI, NOW).met


def test_min_confidence_is_a_stricter_gate():
    runs = nightly(list(range(24, 31)))
    strict = PromotionConfig(min_confidence=0.9)
    v = verdict(runs, {}, strict, SHANGHAI, NOW)
    assert not v.met  # 7/7: P(rate >= .95) = 1 - .95^8 = 0.34
    assert round(v.confidence, 2) == 0.34
    # 44 green runs give 1 - .95^45 = 0.90: with one run a night that takes longer than the window
    assert v.earliest is None
    assert "6 runs a night" in v.notes[1]
    twice = verdict(nightly(list(range(24, 31))) * 2, {}, PromotionConfig(), SHANGHAI, NOW)
    assert twice.notes[0].startswith("With 2 runs a night, 28 green runs")  # not "2.0 runs"


def test_each_runner_has_its_own_verdict(settings):
    """Seven green nights on a2-8; on a2-1 one night failed: met on one runner, not the other,
    and not across both (on the page, the API and the CLI's JSON alike)."""
    now = datetime.now(UTC)
    with session_scope(settings.database_url) as session:
        for night in range(7):
            for runner in ("a2-8", "a2-1"):
                failed = runner == "a2-1" and night == 3
                started = now - timedelta(days=night, hours=1)
                record = RunRecord("s", runner, "runner", started, started + timedelta(minutes=5))
                record.collected = ["t.py::a"]
                record.attempts = [AttemptRecord("t.py::a", "failed" if failed else "passed")]
                store.save_run(session, record)
        scope = Scope(session, settings, "s")
        per_runner = scope.runner_promotions()
        assert {name: v.met for name, v in per_runner.items()} == {"a2-1": False, "a2-8": True}
        assert not scope.promotion().met
        assert Scope(session, settings, "s", "a2-8").runner_promotions() == {}
    client = TestClient(create_app(settings))
    answer = client.get("/api/v1/suites/s/promotion").json()
    assert answer["runners"]["a2-8"]["counted_runs"] == 7
    assert answer["runners"]["a2-1"]["successes"] == 6
    page = client.get("/suites/s/promotion").text
    assert 'href="?runner=a2-1"' in page and "6/7" in page and "7/7" in page
