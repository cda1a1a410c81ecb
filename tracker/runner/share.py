"""How tests share a device, learned from the runs before.

Some kernel tests fill a GPU or NPU: started together, they take turns on it, so running two at
once is no faster than one after the other, and each one's time stretches until the per-test
timeout turns the wait into a false failure. Others (the many short tests, and long tests that
wait on the CPU, a lock-free sleep, a compiler) share a device well. Which is which is read from
each runner's own history, never from a list:

- a test's time alone is the fastest it finished without company in recent runs;
- each attempt of a long test had company: the other long tests that ran on the same device at
  the same time, counted as the share of its time they overlapped it (`company` 1.0: one other
  long test beside it all along);
- an attempt with company of at least half a test that took at least 1.5x its time alone was
  slowed by it: the device did not do both at once.

A test function (its parametrized cases pooled: they run the same kernel) fills its device when
at least a quarter of its attempts with company were slowed, and shares it otherwise. One never
seen with company is unknown, and the run lets it share: its timeline then says. One only ever
seen with company has no time alone to compare with; it runs as if it filled the device (alone
among the long tests) until it has one: on a GPU, the heavy tests of a first night all had
company, and letting them share again is what made them take turns.
Runs with a warm compiled-kernel cache are preferred, so that compiling is not read as waiting.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tracker.records import CRASHED, CUT, INTERRUPTED, LONG, Sample

BUSY = 0.5  # company, in tests, from which an attempt says how the test shares
SLOWED = 1.5  # time with company / time alone, from which the company slowed it


@dataclass(frozen=True)
class Sharing:
    """The model's view of one test."""

    alone: float | None  # seconds, the fastest it finished; None: it never did
    fills: bool | None  # None: never ran with company
    busy: int = 0  # its function's attempts with company
    slowed: int = 0  # of which slowed

    @property
    def kind(self) -> str:
        return {True: "fills", False: "shares", None: "unknown"}[self.fills]


def function_of(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def preferred(samples: list[Sample]) -> list[Sample]:
    """The samples of warm-cache runs when there are any: a cold run's times include compiling."""
    warm = [s for s in samples if s.warm]
    return warm or samples


def first_attempts(samples: list[Sample]) -> dict[str, list[tuple[float, str]]]:
    """(duration, outcome) of each test's first attempts: what the plan's estimates read."""
    out: dict[str, list[tuple[float, str]]] = defaultdict(list)
    by_test: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.number == 1:
            by_test[s.nodeid].append(s)
    for nodeid, own in by_test.items():
        out[nodeid] = [(s.duration, s.outcome) for s in preferred(own)]
    return dict(out)


def _company(samples: list[Sample]) -> dict[int, float]:
    """Index of each timed long attempt -> the long tests beside it on its device, in tests."""
    spans: dict[tuple[int, str], list[tuple[float, float, int]]] = defaultdict(list)
    for i, s in enumerate(samples):
        if s.started_at is not None and s.duration >= LONG:
            start = s.started_at.timestamp()
            spans[(s.run, s.device)].append((start, start + s.duration, i))
    overlap: dict[int, float] = defaultdict(float)
    for group in spans.values():
        group.sort()
        for a, (_, end, i) in enumerate(group):
            for other_start, other_end, j in group[a + 1 :]:
                if other_start >= end:
                    break
                both = min(end, other_end) - other_start
                overlap[i] += both
                overlap[j] += both
    return {i: overlap[i] / max(end - start, 1e-9) for g in spans.values() for start, end, i in g}


def learn(samples: list[Sample]) -> dict[str, Sharing]:
    """Each test's time alone and whether it fills its device (see the module's docstring)."""
    samples = preferred(samples)
    company = _company(samples)
    alone: dict[str, float] = {}
    for i, s in enumerate(samples):
        if s.outcome not in CUT and company.get(i, 0.0) < BUSY:
            alone[s.nodeid] = min(s.duration, alone.get(s.nodeid, s.duration))
    busy: dict[str, int] = defaultdict(int)  # per function: attempts with company
    slowed: dict[str, int] = defaultdict(int)  # of which slowed, against a time alone
    for i, s in enumerate(samples):
        if company.get(i, 0.0) < BUSY or s.outcome in (CRASHED, INTERRUPTED):
            continue
        fn = function_of(s.nodeid)
        busy[fn] += 1
        if (quiet := alone.get(s.nodeid)) is not None:
            slowed[fn] += s.duration >= SLOWED * quiet
    known = {function_of(n) for n in alone}
    # a test never seen alone: if it took turns, its time alone was its time / (1 + company)
    guess: dict[str, float] = {}
    for i, s in enumerate(samples):
        if s.nodeid not in alone and s.outcome not in CUT and i in company:
            share = s.duration / (1 + company[i])
            guess[s.nodeid] = min(share, guess.get(s.nodeid, share))
    out: dict[str, Sharing] = {}
    for nodeid in {s.nodeid for s in samples}:
        fn = function_of(nodeid)
        if not busy[fn]:
            fills = None
        elif fn not in known:  # only ever seen with company: alone until its time alone is known
            fills = True
        else:
            fills = slowed[fn] >= max(1, busy[fn] / 4)
        out[nodeid] = Sharing(alone.get(nodeid, guess.get(nodeid)), fills, busy[fn], slowed[fn])
    return out
