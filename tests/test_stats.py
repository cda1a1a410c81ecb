"""Statistics on hand-computed values."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from tracker.analysis.promotion import local_day, streak, window_start
from tracker.analysis.stats import flip_rate, flips, prob_rate_at_least, runs_needed, wilson


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [
        (14, 14, 0.7847, 1.0),  # 14 green nights: only "above ~78%"
        (5, 10, 0.2366, 0.7634),
        (0, 10, 0.0, 0.2775),
        (95, 100, 0.8882, 0.9785),
    ],
)
def test_wilson(k, n, lo, hi):
    got = wilson(k, n)
    assert got == pytest.approx((lo, hi), abs=1e-4)


def test_wilson_all_green_is_n_over_n_plus_z2():
    for n in (1, 7, 14, 73):
        assert wilson(n, n)[0] == pytest.approx(n / (n + 1.959963984540054**2))


def test_beta_posterior():
    # Beta(1,1) prior, 14/14: P(rate >= .95) = 1 - .95^15
    assert prob_rate_at_least(14, 14, 0.95) == pytest.approx(1 - 0.95**15)
    # 9/10 -> Beta(10, 2): P(X >= .9) = P(Bin(11, .9) <= 9)
    expected = 1 - 11 * 0.9**10 * 0.1 - 0.9**11
    assert prob_rate_at_least(9, 10, 0.9) == pytest.approx(expected)
    assert prob_rate_at_least(0, 0, 0.5) == pytest.approx(0.5)
    assert prob_rate_at_least(2000, 2000, 0.95) == pytest.approx(1.0)
    assert prob_rate_at_least(1900, 2000, 0.95) == pytest.approx(0.5, abs=0.03)


def test_flip_rate():
    assert flips([True, False, True, True]) == 2
    assert flip_rate([True, False, True, True]) == pytest.approx(2 / 3)
    assert flip_rate([True] * 5 + [False] * 5) == pytest.approx(1 / 9)  # a regression: one flip
    assert flip_rate([True]) == 0.0


def test_runs_needed_for_a_meaningful_95_percent():
    assert runs_needed(0.95) == 73  # n / (n + z^2) >= .95
    assert math.ceil(runs_needed(0.95) / 14) == 6  # runs a night over two weeks


SHANGHAI = ZoneInfo("Asia/Shanghai")


def test_days_in_asia_shanghai():
    # 16:30 UTC on Nov 29 is 00:30 on Nov 30 in Shanghai (UTC+8, no DST)
    assert local_day(datetime(2026, 11, 29, 16, 30, tzinfo=UTC), SHANGHAI) == date(2026, 11, 30)
    assert local_day(datetime(2026, 11, 29, 15, 59, tzinfo=UTC), SHANGHAI) == date(2026, 11, 29)
    # a 14-day window ending Nov 30 starts at Nov 17 00:00 in Shanghai = Nov 16 16:00 UTC
    assert window_start(date(2026, 11, 30), 14, SHANGHAI) == datetime(2026, 11, 16, 16, tzinfo=UTC)


def test_streak_ends_today_or_yesterday():
    days = {date(2026, 11, d) for d in (24, 25, 26, 27, 28, 29)}
    assert streak(days, date(2026, 11, 30)) == 6  # tonight's run still due
    assert streak(days | {date(2026, 11, 30)}, date(2026, 11, 30)) == 7
    assert streak(days, date(2026, 12, 1)) == 0


def test_rates_by_their_names():
    from datetime import UTC, datetime

    from tracker.analysis.history import RunRow
    from tracker.analysis.rates import rates

    t = datetime(2026, 11, 30, tzinfo=UTC)
    runs = [  # the example suite's run: 22 passed, 1 flaky (failed first), 1 skipped, 1 xfailed
        RunRow(1, t, "flaky", "c", 1, {"passed": 22, "flaky": 1, "skipped": 1, "xfailed": 1}),
        RunRow(2, t, "passed", "c", 1, {"passed": 23, "skipped": 2}),
        RunRow(3, t, "timed_out", "c", 1, {"passed": 3, "interrupted": 1, "not_run": 9}),
        RunRow(4, t, "interrupted", "c", 1, {"passed": 5, "failed": 5}),  # left out
    ]
    r = rates(runs, 14)
    assert (r.green, r.runs) == (1, 3) and round(r.green_runs, 4) == 0.3333
    assert (r.passed, r.ran) == (48, 49)  # the flaky test failed its first attempt
    assert (
        rates(runs[:1], 7).green_runs == 0.0
        and round(rates(runs[:1], 7).test_pass_rate, 3) == 0.957
    )
    assert rates([], 7).green_runs is None and rates([], 7).test_pass_rate is None
