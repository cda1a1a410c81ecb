"""The order a run hands its tests out in, and what that order predicts.

The slots pull from one queue, so the night ends when the last slot is done; handing out the
longest tests first (LPT) keeps the tail short. Each test's expected duration is learned from
the store: the median of its recent first attempts on this runner. A test that was cut (a
timeout, a crash, the run's limit) ran at least as long as it ran, so it is never "unknown" and
never last: cut tests go first among the long ones (`Feed` decides when the long ones go out
beside the short ones), expected to take at least its function's finished cases' median. A
test with no history takes the median of its function's other cases (the same kernel, other
parameters), else its file's, else the suite's: the longest case of a 1-GPU night, never
reached on the night before, took its file's median (a few seconds) and went out last among
the short tests (call AF, bench/README.md).
Durations are compared in whole seconds, so the many short tests keep the suite's order, and
so do the tests too short to move the run's end (under a twentieth of its ideal length,
`SHORT`): in suite order a file's tests share one process's compiled kernels.

A test that fills its device (`share.learn`) is expected to take its time alone: over the
ranking floor (`_rank`) it will run alone among its kind, in its device's chain (see `Feed`), on a
night with a warm compiled-kernel cache. On a cold night its time is mostly compiling, on the
CPU, which does not take turns: the heavy cases of three cold one-GPU nights took 280-290 s with
1-3 or 5 long tests beside them alike (bench/README.md, calls AE-AG), and the chain learned from
them held 156 tests in 3 lanes: replayed with AF's times, a third night finished 2,521 tests by
540 s with it, and 2,594 without it and with `SHORT` (bench/finished_by_replay.py; measured, call
AH: 2,592). A chain of tests only presumed to fill, for want of evidence, that is longer than the
run's ideal length runs in more lanes.
`simulate` replays the hand-out with the expected times to predict the run's end and how many
tests are done by each minute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from statistics import median

from tracker.records import CUT, LONG, Sample, file_of
from tracker.runner.feed import Feed
from tracker.runner.share import Sharing, blind, function_of

SHORT = 20  # a test under 1/SHORT of the run's ideal length keeps suite order


@dataclass(frozen=True)
class Estimate:
    seconds: float
    cut: bool = False  # a recent attempt was cut: `seconds` is a lower bound
    known: bool = True  # from the test's own history, not a prior
    blind: bool = False  # nothing of its file ran before: it goes out with the short tests
    fills: bool | None = None  # fills its device (share.learn); None: not known
    presumed: bool = False  # fills by default, for want of evidence (Sharing.presumed)
    untried: bool = False  # no warm night compared it with and without company (Sharing's)


def estimate(samples: list[tuple[float, str]]) -> Estimate | None:
    """(duration, outcome) of a test's recent first attempts -> its expected duration."""
    if not samples:
        return None
    done = [d for d, outcome in samples if outcome not in CUT]
    cut = [d for d, outcome in samples if outcome in CUT]
    seconds = median(done) if done else 0.0
    if cut:
        seconds = max(seconds, max(cut))
    return Estimate(seconds, cut=bool(cut))


def estimates(
    nodeids: list[str],
    history: dict[str, list[tuple[float, str]]],
    sharing: dict[str, Sharing] | None = None,
    warm: bool = True,
) -> dict:
    """Each test's Estimate; with `sharing`, on a `warm` night, a long test that fills its
    device is expected to take its time alone (it will not have company of its kind)."""
    known = {n: e for n in nodeids if (e := estimate(history.get(n, [])))}
    for nodeid, e in known.items():
        view = (sharing or {}).get(nodeid) if warm else None
        if view is not None and view.fills is not None:
            # with company it was cut, or slow: alone, tonight, it takes its time alone; never
            # more than its usual time (most runs of a test may find its kernels compiled)
            alone = min(view.alone, e.seconds) if view.fills and view.alone else e.seconds
            fills = view.fills and e.seconds >= LONG  # long with company, if not alone
            known[nodeid] = replace(e, seconds=alone, fills=fills, presumed=view.presumed,
                                    untried=fills and view.untried)  # fmt: skip
    finished: dict[str, list[float]] = {}
    for nodeid, e in known.items():
        if not e.cut:
            finished.setdefault(function_of(nodeid), []).append(e.seconds)
    for nodeid, e in known.items():
        # cut, it ran at least so long; the same kernel's finished cases say how long such a
        # case takes: a case cut by the run's limit after 26 s took ~280 s on other nights
        if e.cut and (others := finished.get(function_of(nodeid))):
            known[nodeid] = replace(e, seconds=max(e.seconds, median(others)))
    by_file: dict[str, list[float]] = {}
    by_function: dict[str, list[float]] = {}
    for nodeid, e in known.items():
        by_file.setdefault(file_of(nodeid), []).append(e.seconds)
        by_function.setdefault(function_of(nodeid), []).append(e.seconds)
    suite = median([e.seconds for e in known.values()]) if known else 0.0
    out = dict(known)
    for nodeid in nodeids:
        if nodeid not in out:
            prior = by_function.get(function_of(nodeid)) or by_file.get(file_of(nodeid))
            out[nodeid] = Estimate(median(prior) if prior else suite, known=False, blind=not prior)
    return out


def _rank(e: Estimate, floor: float = 1.0) -> int:
    """Whole seconds; 0 under `floor` seconds, a test that fills its device included: it goes
    out with the short ones, in suite order, too short to move the night's end however it
    shares. Chained, 114 presumed tests of a warm GPU night under the floor, 80 of them under a
    second, untried for want of a second warm night, went through one lane one at a time for
    140 s while the heavy cases behind them waited; xdist finished 24 more tests by 240 s (call
    AV). And test_mlp's 29 cases shown to fill (typical 0.4-6.2 s beside the heavy cases, under
    CK's 5.9 s floor) went out one by one to whichever slot asked, so 8 processes each tuned
    the same shapes' kernels: 472 s of slot time, against 199 s in xdist's workers, which run
    them in suite order (bench/README.md, calls CL-CN; measured: its cold nights CO and CQ led
    xdist's to 420 s, its warm night CR still trailed warm xdist by 1-3 at 300-420 s). A test
    whose file never ran is not ranked by the suite's median: a night cut in suite order knew
    only its first files, and on one slot the tests never reached then waited behind them
    again, night after night (bench/README.md, the cut scenario on one slot)."""
    return 0 if e.blind or e.seconds < floor else int(e.seconds)


def order(
    nodeids: list[str], expected: dict[str, Estimate], group: str = "test", floor: float = 1.0
) -> list:
    """Groups of tests in the order they are handed out: cut tests first, then longest first,
    down to `floor` seconds (`_rank`). `group = "file"` keeps a file's tests together, in suite
    order, in one slot."""
    if group == "file":
        files: dict[str, list[str]] = {}
        for nodeid in nodeids:
            files.setdefault(file_of(nodeid), []).append(nodeid)
        return sorted(
            files.values(),
            key=lambda g: (
                not any(expected[n].cut for n in g),
                -sum(expected[n].seconds for n in g),
            ),
        )
    # whole seconds: tests under a second (most of a suite) keep suite order, so a file's tests
    # stay together (its module fixtures are set up once) and order-dependence stays visible
    ranked = sorted(nodeids, key=lambda n: (not expected[n].cut, -_rank(expected[n], floor)))
    return [[n] for n in ranked]


def ranked(
    groups: list[list[str]], expected: dict[str, Estimate], group: str = "test", floor: float = 1.0
) -> int:
    """How many leading groups of `order` are ranked by duration (all of them with whole files);
    the rest are the short tests, in suite order, which the feed hands out in stretches."""
    if group == "file":
        return len(groups)
    return sum(1 for (n,) in groups if expected[n].cut or _rank(expected[n], floor) >= 1)


def fill(feed: Feed, nodeids: list[str], expected: dict[str, Estimate], group: str) -> None:
    """Hand the run's tests to the feed: ranked, weighed, the device-filling ones marked.
    Ranked down to a twentieth of the run's ideal length (`SHORT`): shorter ones cannot move
    its end by much, and in suite order a cold night compiles their kernels once per file
    instead of once per process (a test_dyt case took 23-25 s in the tracker's processes and
    0.0 s in xdist's worker that had run the file's earlier cases: call AG)."""
    span = sum(e.seconds for e in expected.values()) / max(len(feed.device), 1)
    floor = max(1.0, span / SHORT)
    groups = order(nodeids, expected, group, floor)
    count = ranked(groups, expected, group, floor)
    weights = [sum(expected[n].seconds for n in g) for g in groups]
    fills = [any(expected[n].fills for n in g) for g in groups[:count]]
    presumed = [any(expected[n].presumed for n in g) for g in groups[:count]]
    untried = [any(expected[n].untried for n in g) for g in groups[:count]]
    place = {n: i for i, n in enumerate(nodeids)}
    places = [place[g[0]] for g in groups[:count]]
    feed.fill(groups, count, weights, fills, presumed, places, untried)


@dataclass
class Prediction:
    end: float  # seconds from the first test to the last one's end
    busy: dict[str, float]  # each slot's busy seconds
    ends: list[float]  # each test's predicted end, in order
    lanes: dict[str, int]  # device -> the filling tests it runs at once
    chained: frozenset[str] = frozenset()  # the tests in the devices' chains


def simulate(
    nodeids: list[str],
    expected: dict[str, Estimate],
    slots: dict[str, str],
    group: str = "test",
    warm: bool = True,
    turns: bool = False,
) -> Prediction:
    """Run the hand-out with the expected times: `slots` maps each slot to its device. With
    `turns` (`in_turns`), the tests that fill their device take turns on it, as the model says
    they do. Predicted at full speed side by side instead, five warm H200 nights were predicted
    11-48 tests ahead of what they finished by each minute from the second, in turns 21 apart at
    most (bench/README.md, calls BL-BS)."""
    feed = Feed(slots, warm)
    fill(feed, nodeids, expected, group)
    chained = frozenset(n for chain in feed.chains.values() for g in chain for n in g.tests)
    shared = {n: 1.0 for n in nodeids if expected[n].fills} if turns else {}
    busy = dict.fromkeys(slots, 0.0)
    done = sorted(hand_out(feed, slots, lambda _, n: expected[n].seconds, shared, busy=busy))
    return Prediction(max(done, default=0.0), busy, done, feed.lanes, chained)


def in_turns(samples: list[Sample], warm: bool) -> bool:
    """Whether a night's prediction has its filling tests take turns: a warm night's, once a
    warm night has been seen. On a cold night they mostly compile, which does not take turns;
    on the first warm night after cold ones every test is only presumed to fill (`blind`), and
    in turns such a night was predicted 269 tests short of what it finished by 60 s (#10 of
    BC-BM's database)."""
    return warm and not blind(samples, warm)


def hand_out(
    feed: Feed,
    slots: dict[str, str],
    seconds: Callable[[str, str], float],
    turns: dict[str, float],
    start: float = 0.0,
    busy: dict[str, float] | None = None,
    started: list[tuple[float, str, str]] | None = None,
) -> list[float]:
    """Each test's end, handed out as the slots free up. The tests in `turns` take strict turns
    on their device: k of them at once each progress at 1/k (processor sharing), needing
    `seconds(slot, nodeid)` divided by their `turns` value (1.0: their time alone); the others
    take their `seconds`. Steps from one test's end to the next; `busy` sums each slot's
    seconds, `started` collects (when, slot, nodeid) as each test goes out."""
    running: dict[str, tuple[str, float]] = {}  # slot -> (nodeid, work left)
    now, ends, free = start, [], sorted(slots)
    while True:
        for name in free:
            if (nodeid := feed.take(name)) is not None:
                running[name] = (nodeid, seconds(name, nodeid) / turns.get(nodeid, 1.0))
                if started is not None:
                    started.append((now, name, nodeid))
        if not running:
            return ends
        at_once = Counter(slots[name] for name, (n, _) in running.items() if n in turns)
        rate = {name: 1 / at_once[slots[name]] if n in turns else 1.0
                for name, (n, _) in running.items()}  # fmt: skip
        step = min(left / rate[name] for name, (_, left) in running.items())
        now += step
        free = []
        for name, (nodeid, left) in sorted(running.items()):
            if busy is not None:
                busy[name] += step
            left -= step * rate[name]
            if left <= 1e-9:
                ends.append(now)
                free.append(name)
                del running[name]
            else:
                running[name] = (nodeid, left)
