"""How tests share a device, learned from the runs before.

Some kernel tests fill a GPU or NPU: started together, they take turns on it, so running two at
once is no faster than one after the other, and each one's time stretches until the per-test
timeout turns the wait into a false failure. Others (the many short tests, and long tests that
wait on the CPU, a lock-free sleep, a compiler) share a device well. Which is which is read from
each runner's own history, never from a list:

- each attempt of a long test had company: the other long tests that ran on the same device at
  the same time, counted as the share of its time they overlapped it (`company` 1.0: one other
  long test beside it all along);
- a test's quiet time is the fastest it finished with its least company in recent runs (alone,
  when it ever ran alone);
- an attempt with enough more company than that for strict turns to at least double its time
  ((1 + its company) / (1 + its least) >= 2) says how the test shares; with less, the slowdown
  turns would give it is within a night's noise: fused_moe's cases, seen only beside 4-7 long
  tests on one H200, were judged to share for want of a 1.5x slowdown beside 6 instead of 5
  (at most 7/6 in turns), ran 6-7 at once, and took turns there, as they do alone: 2 and 4
  copies at once ran 0.98-1.00x as fast as one after another (bench/capacity.py);
- such an attempt that took at least 1.5x its quiet time, and at least 1/1.4 of the slowdown
  strict turns would give it, was slowed by it: the device did not do both at once. Run
  together, tests slowed less do 1.4x or more the work per second of one after another: on a
  device that runs two at once at full speed, four at once each took 2x, and judged filling
  for that, they ran one after another, 13.8 s a night against xdist's 10.1 s (bench/README.md,
  `warmpair`);
- where cases of a test function seen about alone (less than half a test of company) were also
  seen with more, only theirs are judged: a quiet time that already had company cannot tell a
  device that ran both at full speed from one that took turns (`warmpair`'s cases first seen in
  pairs read as slowed beside three, where the cases first seen alone did not).

A test function (its parametrized cases pooled: they run the same kernel) fills its device when at
least a quarter of its attempts with more company were slowed, and shares it otherwise. One never
seen with company is unknown, and the run lets it share: its timeline then says. One only ever seen
with the same company has nothing to compare with; it runs as if it filled the device (alone among
the long tests) until it has: on a GPU, the heavy tests of a first night all had company, and
letting them share again is what made them take turns. Where the store keeps the cache's state, a
warm night is stricter: a test no warm night has seen both ways is `untried` and presumed to fill,
in its device's chain, and waits for a lane while a case of its kernel runs (see `Feed`): letting
the unknown heavy cases of a warm GPU night share put 7 of them on the device at once, where they
took turns until the run's limit cut them all (calls AR and AS). A filling test never seen alone
took turns: on a warm night its time alone is estimated as its time / (1 + company). (Judging only
against a time alone kept most long tests of a busy GPU, which never run alone, filling for good: a
chain of 39 such tests, one at a time, ended a night 250 s after everything else.)
How tests share a device is learned from runs with a warm compiled-kernel cache where there are
any, so that compiling is not read as waiting. Expected durations come from runs with the same
cache state as tonight's: with a cold cache every test also compiles its kernels (3x the time on
a GPU, mostly on the CPU), and a plan made from warm nights sent a cold night's compiling tests
out as if they took seconds. Compiling does not take turns on the device, so a cold night's
time alone is the test's typical time with its least company, undivided: replayed on 13 real
cold nights (bench/plan_replay.py), the fastest times, divided, were 1.5-19x off a test's real
time (median), the typical ones, undivided, 1.3-3.5x.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import median

from tracker.records import CRASHED, CUT, INTERRUPTED, LONG, Sample

BUSY = 0.5  # company, in tests, under which a test ran about alone
SLOWED = 1.5  # time with company / time alone, from which the company slowed it
FASTER = 1.4  # work per second of tests run together / one after another, from which they share
TELLS = 2.0  # the slowdown strict turns would give an attempt, from which it says anything


@dataclass(frozen=True)
class Sharing:
    """The model's view of one test."""

    alone: float | None  # seconds, the fastest it finished; None: it never did
    fills: bool | None  # None: never ran with company
    busy: int = 0  # its function's attempts with company
    slowed: int = 0  # of which slowed
    untried: bool = False  # a warm night, and no warm one compared it with and without company
    turns: bool = False  # `alone` is its time beside others / (1 + them): never seen about alone

    @property
    def presumed(self) -> bool:
        """Filling by default: no attempt with more company than its least says either way."""
        return bool(self.fills) and not self.busy

    @property
    def kind(self) -> str:
        return {True: "fills", False: "shares", None: "unknown"}[self.fills]


def function_of(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def preferred(samples: list[Sample], warm: bool = True) -> list[Sample]:
    """The samples of runs whose cache was as warm as tonight's, when there are any."""
    same = [s for s in samples if bool(s.warm) == warm]
    return same or samples


def cache_gaps(samples: list[Sample]) -> tuple[set[tuple[int, str]], set[str] | None]:
    """Where a warm cache lacked a test's kernels: (run, test) of each warm night's attempts of
    a test no night since the cache was last empty (the cold night that filled it, and after)
    had finished; and the tests whose kernels it holds now (None: no cold night in the window,
    not known). A cut test compiled only part of its kernels, if any: on one H200 the 8 heavy
    cases a cold night's limit cut (it cuts them every night) ran on the warm night after it in
    166-291 s, compiling as well as taking turns (calls BZ, CA), and such times had the plan
    expect a fused_moe case at 103 s alone against 28 s measured alone. `tracker plan` says so;
    the hand-out does not act on it: sent out before the device's chain, such cases took 183-266
    s each on the next warm night, which finished 7-12 fewer tests than CA from 180 to 360 s
    (call CD), since a warm process also tunes their kernels again, on the device (call CE).
    Runs in the order of their ids, which grow with time; a run that keeps no cache state (an
    ingested one) says nothing."""
    runs: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        runs[s.run].append(s)
    gaps: set[tuple[int, str]] = set()
    cached: set[str] | None = None
    for run in sorted(runs):
        cache = runs[run][0].warm
        if cache is False:
            cached = set()
        elif cache and cached is not None:
            gaps |= {(run, s.nodeid) for s in runs[run] if s.nodeid not in cached}
        if cache is not None and cached is not None:
            cached |= {s.nodeid for s in runs[run] if s.outcome not in CUT}
    return gaps, cached


def first_attempts(samples: list[Sample], warm: bool = True) -> dict[str, list[tuple[float, str]]]:
    """(duration, outcome) of each test's first attempts: what the plan's estimates read."""
    out: dict[str, list[tuple[float, str]]] = defaultdict(list)
    by_test: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.number == 1:
            by_test[s.nodeid].append(s)
    for nodeid, own in by_test.items():
        out[nodeid] = [(s.duration, s.outcome) for s in preferred(own, warm)]
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


def _alone(
    samples: list[Sample], typical: bool = False
) -> tuple[dict[int, float], dict[str, float], dict[str, float], dict[str, float]]:
    """Each attempt's company (`_company`); each test's least company when it finished, its
    quiet time (the fastest it finished with about that little company) and, for one never
    seen with less than half a test of company, its time alone if it took turns: time / (1 +
    company).

    `typical`: the median of those instead of the fastest, from long attempts only: what a
    night's plan expects. The fastest is a kernel that another test had already compiled and
    tuned in the same process: replayed on 15 real nights (bench/plan_replay.py), it expected
    9-35 tests a night under 1 s that then took 10 s or more."""
    company = _company(samples)
    finished = [(i, s) for i, s in enumerate(samples)
                if s.outcome not in CUT and (s.duration >= LONG or not typical)]  # fmt: skip
    least: dict[str, float] = {}
    for i, s in finished:
        least[s.nodeid] = min(company.get(i, 0.0), least.get(s.nodeid, float("inf")))
    quiet: dict[str, list[float]] = defaultdict(list)
    guess: dict[str, list[float]] = defaultdict(list)
    for i, s in finished:
        if company.get(i, 0.0) < least[s.nodeid] + BUSY:
            quiet[s.nodeid].append(s.duration)
        if least[s.nodeid] >= BUSY:
            guess[s.nodeid].append(s.duration / (1 + company.get(i, 0.0)))
    pick = median if typical else min
    return (company, least, {n: pick(v) for n, v in quiet.items()},
            {n: pick(v) for n, v in guess.items()})  # fmt: skip


def blind(samples: list[Sample], warm: bool = True) -> bool:
    """A warm night whose history holds only cold runs: nothing says any test shares the device.
    A test that compiled beside others was not slowed by them, however it uses the device once
    compiled. Trusting the cold nights, the first warm night on one H200 started 7 heavy cases
    within 30 s that the cold nights had judged to share; they took turns for 140 s and none of
    them finished, while xdist got 16 more tests done by 240 s (bench/README.md, call AO)."""
    return warm and bool(samples) and all(s.warm is False for s in samples)


def learn(samples: list[Sample], warm: bool = True) -> dict[str, Sharing]:
    """Each test's time alone and whether it fills its device (see the module's docstring).
    Whether it fills is judged on warm runs where there are any; its time alone is read from
    runs as warm as tonight's (`warm`): cold, a fused_moe case took 40-48 s alone, warm 14 s.

    On a night `blind` to sharing, every test is presumed to fill until a warm night says."""
    judged = preferred(samples)
    presume = blind(samples, warm)
    known = warm and any(s.warm is not None for s in samples)  # the store keeps cache state
    company, least, quiet, guess = _alone(judged)
    # function -> its attempts with more company than the test's least: (company, least, attempt)
    compared: dict[str, list[tuple[float, float, Sample]]] = defaultdict(list)
    for i, s in enumerate(judged):
        together, fewest = company.get(i, 0.0), least.get(s.nodeid, 0.0)
        if 1 + together >= TELLS * (1 + fewest) and s.outcome not in (CRASHED, INTERRUPTED):
            compared[function_of(s.nodeid)].append((together, fewest, s))
    busy: dict[str, int] = defaultdict(int)  # per function: attempts with more company
    slowed: dict[str, int] = defaultdict(int)  # of which slowed, against the quiet time
    for fn, attempts in compared.items():
        # the cases seen about alone say it better, where they say anything (module docstring)
        attempts = [a for a in attempts if least.get(a[2].nodeid, BUSY) < BUSY] or attempts
        for together, fewest, s in attempts:
            busy[fn] += 1
            base = quiet.get(s.nodeid)
            if base is None:  # cut with company and never finished with less: nothing says it
                slowed[fn] += s.outcome in CUT  # did not take turns
                continue
            in_turns = (1 + together) / (1 + fewest)  # its slowdown, had they taken turns
            bar = SLOWED if s.outcome in CUT else max(SLOWED, in_turns / FASTER)  # cut: at least
            slowed[fn] += s.duration >= bar * base
    guessed = {function_of(n) for n in guess}
    *_, quiet_tonight, guess_tonight = _alone(preferred(samples, warm), typical=True)
    out: dict[str, Sharing] = {}
    for nodeid in {s.nodeid for s in samples}:
        fn = function_of(nodeid)
        # only ever seen with the same company: as if it filled, until more says
        fills = slowed[fn] >= max(1, busy[fn] / 4) if busy[fn] else (fn in guessed or None)
        evidence = busy[fn], slowed[fn]
        untried = presume or (known and not busy[fn])
        if untried and not fills:
            fills, evidence = True, (0, 0)  # presumed
        guessed_alone = guess_tonight.get(nodeid) if fills and warm else None
        alone = guessed_alone or quiet_tonight.get(nodeid)
        out[nodeid] = Sharing(alone, fills, *evidence, untried=untried, turns=bool(guessed_alone))
    return out
