"""The promotion verdict (docs/design.md, "Promotion criterion"): may the fork's CI move upstream?

Runs count as the upstream CI would have seen them: only `passed` is a success; `flaky`,
`failed`, `timed_out` and `infra_error` count against; `interrupted` runs (the tracker itself
died) are left out, and so is their day. Days are calendar days in the configured time zone, and
the streak of days with a run may end today or, before tonight's run, yesterday.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tracker.analysis.flaky import FLAKY_VERDICT, CaseStats
from tracker.analysis.history import RunRow
from tracker.analysis.stats import prob_rate_at_least, runs_needed, wilson
from tracker.config import PromotionConfig
from tracker.records import RUN_INTERRUPTED, RUN_PASSED
from tracker.words import percent, plural

COUNTED = ("passed", "flaky", "failed", "timed_out", "infra_error")


def window_start(today: date, days: int, tz: ZoneInfo) -> datetime:
    """The first instant (UTC) of the window of `days` calendar days ending with `today`."""
    first = today - timedelta(days=days - 1)
    return datetime.combine(first, time.min, tzinfo=tz).astimezone(UTC)


def local_day(moment: datetime, tz: ZoneInfo) -> date:
    return moment.astimezone(tz).date()


def streak(days: set[date], today: date) -> int:
    """Consecutive days with a run, ending today, or yesterday while today's run is still due."""
    day = today if today in days else today - timedelta(days=1)
    n = 0
    while day in days:
        n += 1
        day -= timedelta(days=1)
    return n


@dataclass
class Verdict:
    met: bool
    today: date
    window_days: int
    counts: dict[str, int]
    successes: int
    total: int
    consecutive_days: int
    unquarantined_flaky: list[str]
    config: PromotionConfig
    earliest: date | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float | None:
        return self.successes / self.total if self.total else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.successes, self.total)

    @property
    def confidence(self) -> float:
        return prob_rate_at_least(self.successes, self.total, self.config.min_success_rate)

    def parts(self) -> list[dict[str, Any]]:
        c = self.config
        parts = [
            {
                "name": "consecutive days with a run",
                "required": f">= {c.consecutive_days}",
                "measured": self.consecutive_days,
                "ok": self.consecutive_days >= c.consecutive_days,
            },
            {
                "name": f"run success rate over {self.window_days} days",
                "required": f">= {c.min_success_rate:.0%}",
                "measured": None if self.rate is None else round(self.rate, 4),
                "ok": self.rate is not None and self.rate >= c.min_success_rate,
                "rate": True,
            },
            {
                "name": "un-quarantined flaky tests in the window",
                "required": "0",
                "measured": len(self.unquarantined_flaky),
                "ok": not self.unquarantined_flaky,
            },
        ]
        if c.min_confidence is not None:
            parts.append(
                {
                    "name": f"P(true rate >= {c.min_success_rate:.0%})",
                    "required": f">= {c.min_confidence}",
                    "measured": round(self.confidence, 4),
                    "ok": self.confidence >= c.min_confidence,
                }
            )
        return parts

    def shown(self, part: dict[str, Any]) -> str | None:
        """A part's measured value as the pages, the CLI and the report show it: a rate as a
        percentage beside its ">= 95%" (the report printed 0.5 there); None: no runs."""
        measured = part["measured"]
        if measured is None:
            return None
        return percent(measured) if part.get("rate") else str(measured)

    def standing(self) -> str:
        """How the verdict stands beside other runners' (the CLI's and the report's per-runner
        lines)."""
        days = plural(self.consecutive_days, "day")
        return f"{days} in a row with a run, {self.successes} of {plural(self.total, 'run')} green"

    def _said(self) -> list[tuple[bool, str]]:
        """Each part of the criterion in words, with its numbers: (met, text), met as in
        `parts`."""
        c = self.config
        flaky = len(self.unquarantined_flaky)
        texts = [
            f"{self.consecutive_days} of {c.consecutive_days} days in a row with a run",
            f"{self.successes} of {plural(self.total, 'run')} green"
            + (f" ({percent(self.rate)}, need {c.min_success_rate:.0%})" if self.total else ""),
            f"{plural(flaky, 'flaky test')} not quarantined"
            if flaky
            else "no flaky test left unquarantined",
            f"P(rate >= {c.min_success_rate:.0%}) {self.confidence:.2f}, need {c.min_confidence}",
        ]
        return [(p["ok"], text) for p, text in zip(self.parts(), texts, strict=False)]

    def headline(self) -> str:
        """The verdict in one line, with its reasons: what the overview, the suite page, the
        badge's title and the CLI all say."""
        said = self._said()
        if self.met:
            return "Met: " + ", ".join(text for _, text in said)
        when = (
            f"earliest {self.earliest.isoformat()} if every coming run passes"
            if self.earliest
            else "not within the next window"
        )
        return "Not met: " + ", ".join(text for ok, text in said if not ok) + f"; {when}"

    def summary(self) -> dict[str, Any]:
        """The verdict in one row (a runner's, beside the others)."""
        return {
            "met": self.met,
            "consecutive_days": self.consecutive_days,
            "successes": self.successes,
            "counted_runs": self.total,
            "success_rate": self.rate,
            "unquarantined_flaky": len(self.unquarantined_flaky),
            "earliest_date": self.earliest.isoformat() if self.earliest else None,
            "headline": self.headline(),
        }

    def as_dict(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {
            "met": self.met,
            "today": self.today.isoformat(),
            "window_days": self.window_days,
            "parts": self.parts(),
            "runs": self.counts,
            "successes": self.successes,
            "counted_runs": self.total,
            "success_rate": self.rate,
            "success_rate_interval_95": [round(lo, 4), round(hi, 4)],
            "p_rate_at_least_target": round(self.confidence, 4),
            "earliest_date": self.earliest.isoformat() if self.earliest else None,
            "unquarantined_flaky": self.unquarantined_flaky,
            "notes": self.notes,
            "headline": self.headline(),
        }


def verdict(
    runs: list[RunRow],
    stats: dict[int, CaseStats],
    config: PromotionConfig,
    tz: ZoneInfo,
    now: datetime | None = None,
) -> Verdict:
    now = now or datetime.now(UTC)
    today = local_day(now, tz)
    start = window_start(today, config.window_days, tz)
    in_window = [r for r in runs if start <= r.started_at <= now]
    counts = Counter(r.status for r in in_window)
    counted = [r for r in in_window if r.status != RUN_INTERRUPTED]
    days = {local_day(r.started_at, tz) for r in counted}
    flaky = sorted(
        s.nodeid for s in stats.values() if s.verdict == FLAKY_VERDICT and not s.quarantined
    )
    v = Verdict(
        met=False,
        today=today,
        window_days=config.window_days,
        counts={k: counts.get(k, 0) for k in (*COUNTED, RUN_INTERRUPTED)},
        successes=sum(r.status == RUN_PASSED for r in counted),
        total=len(counted),
        consecutive_days=streak(days, today),
        unquarantined_flaky=flaky,
        config=config,
    )
    v.met = all(p["ok"] for p in v.parts())
    if not v.met:
        v.earliest = _earliest(counted, stats, config, tz, today)
    v.notes = _notes(v, counted, days)
    return v


def _earliest(
    counted: list[RunRow],
    stats: dict[int, CaseStats],
    config: PromotionConfig,
    tz: ZoneInfo,
    today: date,
) -> date | None:
    """The first day on which the criterion holds if every coming run passes, at the pace of
    the runs so far (at least one a day), and nobody quarantines anything."""
    by_day = Counter(local_day(r.started_at, tz) for r in counted)
    per_day = max(1, round(len(counted) / len(by_day))) if by_day else 1
    fails_by_day = Counter(local_day(r.started_at, tz) for r in counted if r.status != RUN_PASSED)
    last_flaky = max(
        (
            local_day(s.last_failure, tz)
            for s in stats.values()
            if s.verdict == FLAKY_VERDICT and not s.quarantined and s.last_failure
        ),
        default=None,
    )
    first_new = today if today not in by_day else today + timedelta(days=1)
    horizon = config.window_days + config.consecutive_days + 1
    for ahead in range(horizon + 1):
        day = today + timedelta(days=ahead)
        first = day - timedelta(days=config.window_days - 1)
        future = [first_new + timedelta(days=i) for i in range((day - first_new).days + 1)]
        days = {d for d in by_day if first <= d <= day} | set(future)
        total = sum(n for d, n in by_day.items() if first <= d <= day) + per_day * len(future)
        fails = sum(n for d, n in fails_by_day.items() if first <= d <= day)
        ok = total > 0 and (total - fails) / total >= config.min_success_rate
        ok = ok and streak(days, day) >= config.consecutive_days
        ok = ok and (last_flaky is None or last_flaky < first)
        if ok and config.min_confidence is not None:
            ok = prob_rate_at_least(total - fails, total, config.min_success_rate) >= (
                config.min_confidence
            )
        if ok:
            return day
    return None


def _notes(v: Verdict, counted: list[RunRow], days: set[date]) -> list[str]:
    target = v.config.min_success_rate
    per_night = len(counted) / len(days) if days else 1
    nights = v.window_days
    lower_all_green = wilson(round(per_night * nights), round(per_night * nights))[0]
    need = runs_needed(target)
    return [
        f"With {'one run' if per_night == 1 else f'{round(per_night, 1):g} runs'} a night, "
        f"{round(per_night * nights)} green runs out of "
        f"{round(per_night * nights)} only show the true success rate is above "
        f"{lower_all_green:.1%} (Wilson 95% lower bound).",
        f"For the lower bound itself to reach {target:.0%} takes {need} green runs in a row: "
        f"{math.ceil(need / nights)} runs a night over {nights} days.",
    ]
