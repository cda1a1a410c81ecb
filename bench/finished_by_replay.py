"""Tests finished by each minute of a night the tracker has not run yet, replayed offline from a
stored device database (no GPU needed): the night is planned from the runs `--history` names, as
`tracker run` would plan it, and handed out to the slots with the times each test took on the
night `--times` names (its first attempts; a test cut there takes 1.05x its time before the cut,
or its time on another night if that was longer).

    python bench/finished_by_replay.py DB --history 1 2 --times 2 [--slots 8] [--devices 1]
    PYTHONPATH=/tmp/before python bench/finished_by_replay.py DB ...   # a tree with plan.hand_out

By default there is no model of contention: each test takes the time it took beside that
night's company, whatever company the replay gives it. `--contention` lets the tests that every
warm night in the database shows filling their device take strict turns there (`plan.hand_out`):
it judged AU's plan with AV's times within 4 tests at 180-240 s, where the default was 18-32
off, but neither shows AV's own loss from AU's times (bench/README.md, calls AW-AY). `--heavy S`
lets every test whose typical warm time is S s or more take strict turns instead, the same tests
whatever tree plans (on one H200 the heavy tests do: bench/capacity.py). Replayed without
either, call AF's own plan (history: AE) gave 1,641 / 2,366 / 2,419 / 2,501 / 2,579 tests by
60-300 s against 1,571 / 2,353 / 2,414 / 2,510 / 2,578 measured, and the same 2,596 by 540 s.
`--in-process` times each test by whether its slot has run its function before (on a cold night
the first case compiles the kernels; warm, it tunes them), from the nights with the replayed
night's cache state (and those that keep none): it reproduces AH's 788 s of test_mlp work (792 s
measured) and AI's stall (bench/README.md).
`--start`: the seconds from launch to the first test (the probe and the collection; 19 s on one
H200). `--trace S`: when and in which slot each test the night timed at S s or more goes out.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
from collections import defaultdict
from inspect import signature
from statistics import median

from tracker import queries
from tracker.db import session_scope
from tracker.records import CUT
from tracker.runner import plan, share
from tracker.runner.feed import Feed
from tracker.runner.share import function_of


def in_process(samples: list) -> tuple[dict[str, float], dict[str, float]]:
    """Each test's median first attempt when it was the first of its function in its slot's
    process that night, and when the process had run the function before: on a cold night the
    first compiles the kernels, the others mostly find them compiled (1.3-1.7 s against 50-54 s
    for test_mlp's llamamlp dtype2 cases, AF and AH). A slot's process stands for the slot."""
    seen: set[tuple[int, str, str]] = set()
    times: tuple[dict, dict] = (defaultdict(list), defaultdict(list))
    timed = [s for s in samples if s.number == 1 and s.started_at and s.outcome not in CUT]
    for s in sorted(timed, key=lambda s: s.started_at):
        key = (s.run, s.worker, function_of(s.nodeid))
        times[key in seen][s.nodeid].append(s.duration)
        seen.add(key)
    return tuple({n: median(v) for n, v in t.items()} for t in times)  # type: ignore[return-value]


def heavy(samples: list, seconds: float) -> set[str]:
    """The tests whose typical first attempt on warm nights took `seconds` or more: on one H200
    every such test measured took strict turns, alone or several at once (bench/capacity.py).
    The same set for every tree replayed, unlike `filling`, which is the tree's own judgement."""
    times: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        if s.warm and s.number == 1 and s.outcome not in CUT:
            times[s.nodeid].append(s.duration)
    return {n for n, t in times.items() if median(t) >= seconds}


def filling(samples: list) -> set[str]:
    """The tests that took turns on their device, as far as every warm night in the database
    shows (the model's own judgement with the most evidence there is, presumed ones left out):
    what the contention replay treats as taking turns."""
    warm = [s for s in samples if s.warm]
    learned = share.learn(warm, True) if warm else {}
    return {n for n, v in learned.items() if v.fills and not v.presumed}


def turns(samples: list, run: int, fillers: set[str]) -> dict[str, float]:
    """The filling tests each filling test ran beside on its device on night `run`, itself
    included, averaged over its time: its time there divided by this is the time it needs
    alone if filling tests take strict turns (processor sharing). Not `share._company`: that
    counts long attempts only, and a filling function's short cases take turns too (on AX-BA's
    nights, 367-393 of 424 filling tests would read otherwise)."""
    first = [s for s in samples if s.run == run and s.number == 1 and s.started_at]
    spans = [(s.started_at.timestamp(), s.duration, s.device, s.nodeid) for s in first
             if s.nodeid in fillers]  # fmt: skip
    out = {}
    for start, duration, device, nodeid in spans:
        end, overlap = start + duration, 0.0
        for other_start, other_duration, other_device, _ in spans:
            if other_device == device:
                overlap += max(
                    0.0, min(end, other_start + other_duration) - max(start, other_start)
                )
        out[nodeid] = max(overlap / max(duration, 1e-9), 1.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--history", type=int, nargs="+", required=True, help="run ids")
    parser.add_argument("--times", type=int, required=True, help="the run whose times to use")
    parser.add_argument("--suite", default="transformers")
    parser.add_argument("--runner", default="h200")
    parser.add_argument("--slots", type=int, default=8, help="per device")
    parser.add_argument(
        "--devices",
        type=int,
        default=1,
        help="replayed on this many devices, each test at its time on the night's one",
    )
    parser.add_argument("--start", type=float, default=19.0)
    parser.add_argument("--warm", action="store_true", help="plan a warm night (default cold)")
    parser.add_argument(
        "--heavy",
        type=float,
        help="the tests whose typical warm time is this many seconds or more take strict turns",
    )
    parser.add_argument(
        "--contention",
        action="store_true",
        help="filling tests of a device take strict turns (`plan.hand_out`)",
    )
    parser.add_argument(
        "--shortest-first",
        action="store_true",
        help="no plan: the night's times, shortest first (about the most any order finishes)",
    )
    parser.add_argument(
        "--trace",
        type=float,
        metavar="S",
        help="also print when each test the night timed at S s or more goes out, and where",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="time each test by whether its slot ran its function before (`in_process`)",
    )
    args = parser.parse_args()
    with session_scope(f"sqlite:///{args.db}") as session:
        samples = queries.recent_attempts(session, args.suite, args.runner, runs=100)
        nodeids = [r["nodeid"] for r in queries.run_results(session, args.times)[0]]
    took: dict[str, float] = {}
    for s in sorted(samples, key=lambda s: s.run == args.times):  # the night's own times last
        if s.number == 1:
            cut = s.outcome in CUT
            took[s.nodeid] = max(s.duration * 1.05, took.get(s.nodeid, 0.0)) if cut else s.duration
    if args.shortest_first:
        slots = args.slots * args.devices
        report(shortest_first([took.get(n, 0.0) for n in nodeids], slots, args.start))
        return
    history = [s for s in samples if s.run in args.history]
    cache = {"warm": args.warm} if "warm" in signature(plan.estimates).parameters else {}
    learned = share.first_attempts(history, args.warm), share.learn(history, args.warm)
    expected = plan.estimates(nodeids, *learned, **cache)  # an older tree: no `warm`
    same_cache = [s for s in samples if s.warm in (args.warm, None)]  # a warm night's, or a cold's
    first, after = in_process(same_cache) if args.in_process else ({}, {})
    slots = {f"d{d}w{w}": str(d) for d in range(args.devices) for w in range(args.slots)}
    feed = Feed(slots, args.warm) if "warm" in signature(Feed).parameters else Feed(slots)
    plan.fill(feed, nodeids, expected, "test")

    def seconds(name: str, nodeid: str) -> float:
        fn = function_of(nodeid)
        took_here = (after if fn in ran[name] else first).get(nodeid, took.get(nodeid))
        ran[name].add(fn)
        return expected[nodeid].seconds if took_here is None else took_here

    ran: dict[str, set[str]] = {name: set() for name in slots}  # functions run in each slot
    fillers = heavy(samples, args.heavy) if args.heavy else filling(samples)
    shared = turns(samples, args.times, fillers) if args.contention or args.heavy else {}
    started: list[tuple[float, str, str]] = []
    report(plan.hand_out(feed, slots, seconds, shared, args.start, started=started))
    if args.trace is not None:
        for at, slot, nodeid in started:
            if took.get(nodeid, 0.0) >= args.trace:
                print(f"{at:6.1f} s  {slot}  {took[nodeid]:6.1f} s  {nodeid}")


def shortest_first(seconds: list[float], slots: int, start: float) -> list[float]:
    """Each test's end, handed out shortest first to whichever slot is free first: with fixed
    times, on one slot no order finishes more tests by any minute, and on several few do."""
    free, ends = [start] * slots, []
    for took in sorted(seconds):
        ends.append(heapq.heappop(free) + took)
        heapq.heappush(free, ends[-1])
    return ends


def report(ends: list[float]) -> None:
    ends = sorted(ends)
    print(" | ".join(f"{t} s: {bisect.bisect_right(ends, t):,}" for t in range(60, 541, 60)))
    print(f"last test ends at {ends[-1]:.0f} s; {len(ends):,} tests")


if __name__ == "__main__":
    main()
