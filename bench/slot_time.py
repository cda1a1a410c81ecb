"""Slot time per test function: a stored tracker night against another tool's results file for
the same suite (an xdist report log, gzipped or not), side by side. Slot time is every attempt's
duration summed (setup, call and teardown; reruns included): what a function cost the night's
slots, whatever ran beside it. A kernel that each process tunes anew costs more slot time the
more processes run its cases: on CK's warm night test_mlp cost 472 s of slot time in the
tracker's 8 processes against 199 s in CJ's xdist (bench/README.md, calls CL-CN).

    xz -dc bench/data/h200-nights-CI-CK.db.xz > /tmp/ck.db
    python bench/slot_time.py /tmp/ck.db 30 bench/data/h200-xdist-warm-CJ.jsonl.gz [--top 12]

`finished` counts the cases that ended (passed, failed, skipped, xfailed...) in each; a tool
stopped by a time limit leaves the cases it was running out of its file, so compare the slot
time of functions both finished.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from tracker import queries
from tracker.db import session_scope
from tracker.ingest import read_path
from tracker.records import CUT
from tracker.runner.share import function_of


def per_function(attempts: list[tuple[str, float, str]]) -> dict[str, tuple[float, set[str]]]:
    """(nodeid, duration, outcome) -> function: (slot seconds, the cases that ended)."""
    seconds: dict[str, float] = defaultdict(float)
    ended: dict[str, set[str]] = defaultdict(set)
    for nodeid, took, outcome in attempts:
        seconds[function_of(nodeid)] += took
        if outcome not in CUT:
            ended[function_of(nodeid)].add(nodeid)
    return {fn: (seconds[fn], ended[fn]) for fn in seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path, help="a tracker database (sqlite)")
    parser.add_argument("run", type=int, help="the tracker night's run id")
    parser.add_argument("other", type=Path, help="the other tool's results file")
    parser.add_argument("--top", type=int, default=12, help="rows, most extra slot time first")
    args = parser.parse_args()
    with session_scope(f"sqlite:///{args.db}") as session:
        attempts = queries.run_attempt_times(session, args.run)  # a runner's: every one timed
    ours = per_function([(a["nodeid"], a["duration"], a["outcome"]) for a in attempts])
    other = read_path(args.other)
    theirs = per_function([(a.nodeid, a.duration, a.outcome) for a in other.attempts])
    none = (0.0, set())
    names = sorted(set(ours) | set(theirs),
                   key=lambda f: theirs.get(f, none)[0] - ours.get(f, none)[0])  # fmt: skip
    print("| function | tracker slot s (finished) | other slot s (finished) |")
    print("| --- | ---: | ---: |")
    for fn in names[: args.top]:
        (a, ended_a), (b, ended_b) = ours.get(fn, none), theirs.get(fn, none)
        print(f"| {fn} | {a:,.0f} ({len(ended_a)}) | {b:,.0f} ({len(ended_b)}) |")
    total = [sum(v[0] for v in side.values()) for side in (ours, theirs)]
    print(f"| all | {total[0]:,.0f} | {total[1]:,.0f} |")


if __name__ == "__main__":
    main()
