"""A timeout or crash beside other long tests on the same device counts only once a run alone
confirms it: the company (our own co-scheduling, or another tool's workers) may have caused it.
One rule for the runs we make (which rerun such a failure with the device to itself) and for
ingested ones (where an attempt alone in the file's timeline confirms).
"""

from __future__ import annotations

from tracker.models import MESSAGE_MAX
from tracker.records import (
    CROWDING,
    FAILING,
    LONG,
    UNCONFIRMED,
    AttemptRecord,
    RunRecord,
    bound,
    device_of,
)


def _span(a: AttemptRecord) -> tuple[float, float] | None:
    if a.started_at is None:
        return None
    start = a.started_at.timestamp()
    return start, start + a.duration


def company(attempt: AttemptRecord, attempts: list[AttemptRecord]) -> list[AttemptRecord]:
    """The long attempts that ran beside this one on its device."""
    span = _span(attempt)
    if span is None:
        return []
    device = device_of(attempt.worker)
    beside = []
    for other in attempts:
        if other is attempt or other.duration < LONG or device_of(other.worker) != device:
            continue
        other_span = _span(other)
        if other_span and other_span[0] < span[1] and other_span[1] > span[0]:
            beside.append(other)
    return beside


def contended(
    record: RunRecord, tests: dict[str, list[AttemptRecord]] | None = None
) -> dict[str, list[AttemptRecord]]:
    """Tests whose first attempt timed out or crashed beside long tests on the same device, with
    that company. `tests`: `record.by_test()`, when the caller has it."""
    out = {}
    for nodeid, attempts in (tests or record.by_test()).items():
        failed = attempts and attempts[0].outcome in CROWDING
        if failed and (beside := company(attempts[0], record.attempts)):
            out[nodeid] = beside
    return out


def settle(record: RunRecord) -> int:
    """Make a contended failure `unconfirmed` (no evidence either way) unless an attempt alone
    (no long test beside it on its device) failed too; the first attempt alone decides, as a
    rerun does. Returns how many tests were left unconfirmed or cleared."""
    tests = record.by_test()
    settled = 0
    for nodeid, beside in contended(record, tests).items():
        attempts = tests[nodeid]
        alone = next((a for a in attempts[1:] if not company(a, record.attempts)), None)
        if alone is not None and alone.outcome in FAILING:
            continue  # confirmed alone
        names = ", ".join(b.nodeid.rsplit("::", 1)[-1][:80] for b in beside[:3])
        why = "passed alone" if alone else "never run alone (the run's limit came first)"
        for a in attempts[: attempts.index(alone) if alone is not None else len(attempts)]:
            if a.outcome in CROWDING:
                a.message = bound(
                    f"unconfirmed: {a.outcome} after {a.duration:.0f} s beside {len(beside)} long "
                    f"test(s) on the same device ({names}); {why}. {a.message or ''}",
                    MESSAGE_MAX,
                )
                a.outcome = UNCONFIRMED
        settled += 1
    return settled
