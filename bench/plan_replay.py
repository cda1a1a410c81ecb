"""How well the run plan's expected durations matched real nights, replayed offline from
stored device databases (no GPU needed): each night is planned from the nights before it on
its runner, as `tracker run` would have, and its expectations are set against what the night
recorded.

    python bench/plan_replay.py DB [DB ...] [--suite transformers] [--runner h200]
    PYTHONPATH=/tmp/before python bench/plan_replay.py DB ...   # another source tree's plan

Per night: its tests that ran at least 1 s or were expected to (first attempts, not cut); the
median factor between expected and real time (2.0: half or double); how many were expected
under 1 s and took 10 s or more; and the device chain (`Feed`): its tests, its expected
seconds and the seconds those tests took that night; then the tests done by each minute after the
first test, as `tracker plan` predicts them (the filling tests in turns on a warm night once a
warm one has been seen: `plan.simulate`), less those the night finished, while it ran; and the
same with the filling tests side by side at full speed (the prediction before calls BL-BN). A
night seen in several databases (each device call copies the history it planned with) is
replayed once.
"""

from __future__ import annotations

import argparse
import bisect
import math
from statistics import median

from tracker import queries
from tracker.db import session_scope
from tracker.records import CUT, LONG
from tracker.runner import plan, share
from tracker.runner.feed import Feed


def replay(url: str, suite: str, runner: str, seen: set) -> list[str]:
    rows = []
    with session_scope(url) as session:
        runs = queries.list_runs(session, suite, runner, 100)
        samples = queries.recent_attempts(session, suite, runner, runs=100)
        for run in sorted(runs, key=lambda r: r["started_at"]):
            key = str(run["started_at"])
            before = _before(runs, run)
            history = [s for s in samples if s.run in before]
            if key in seen or not history:
                continue
            seen.add(key)
            info = queries.run_info(session, run["id"])
            nodeids = [r["nodeid"] for r in queries.run_results(session, run["id"])[0]]
            rows.append(_night(run["id"], info, nodeids, history, samples))
    return rows


def _before(runs: list[dict], run: dict) -> set[int]:
    """The ten runs before `run`: what its plan read (`recent_attempts`' window)."""
    older = sorted((r for r in runs if r["started_at"] < run["started_at"]),
                   key=lambda r: r["started_at"])  # fmt: skip
    return {r["id"] for r in older[-10:]}


def _night(run_id: int, info: dict, nodeids: list[str], history: list, samples: list) -> str:
    warm = info["kernel_cache"] == "warm"
    expected = plan.estimates(
        nodeids, share.first_attempts(history, warm), share.learn(history, warm), warm
    )
    took = {
        s.nodeid: s.duration
        for s in samples
        if s.run == run_id and s.number == 1 and s.outcome not in CUT
    }
    pairs = [(expected[n].seconds, took[n]) for n in nodeids
             if n in took and max(expected[n].seconds, took[n]) >= LONG]  # fmt: skip
    factor = median(2 ** abs(math.log2(max(e, 0.01) / max(t, 0.01))) for e, t in pairs)
    surprises = sum(1 for e, t in pairs if e < LONG and t >= 10)
    devices = max(1, int((info["environment"] or {}).get("device_count") or 1))
    slots = {f"d{d}w{w}": str(d) for d in range(devices) for w in range(8)}
    feed = Feed(slots)
    plan.fill(feed, nodeids, expected, "test")
    chain = [g.tests for c in feed.chains.values() for g in c]
    chain_expected = sum(g.seconds for c in feed.chains.values() for g in c)
    chain_took = sum(took.get(n, 0.0) for g in chain for n in g)
    first = [s for s in samples if s.run == run_id and s.number == 1 and s.started_at]
    t0 = min(s.started_at.timestamp() for s in first)
    ends = sorted(s.started_at.timestamp() - t0 + s.duration for s in first if s.outcome not in CUT)
    last = max(s.started_at.timestamp() - t0 + s.duration for s in first)
    minutes = range(60, int(last) + 1, 60)  # while the night ran

    def off(turns: bool) -> str:
        got = plan.simulate(nodeids, expected, slots, "test", warm, turns).ends
        return " / ".join(f"{bisect.bisect_right(got, t) - bisect.bisect_right(ends, t):+d}"
                          for t in minutes)  # fmt: skip

    turns = plan.in_turns(history, warm)  # as `tracker plan` predicts
    return (
        f"| #{run_id} | {info['kernel_cache']} | {len(pairs)} | {factor:.1f}x | {surprises} | "
        f"{len(chain)} | {chain_expected:.0f} s | {chain_took:.0f} s | {off(turns)} | "
        f"{off(False) if turns else 'the same'} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("databases", nargs="+")
    parser.add_argument("--suite", default="transformers")
    parser.add_argument("--runner", default="h200")
    args = parser.parse_args()
    print("| night | cache | long tests | median factor | expected < 1 s, took >= 10 s "
          "| chain | chain expected | chain took | done by each minute, predicted - measured "
          "| the same, filling tests side by side |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    seen: set = set()
    for db in args.databases:
        for row in replay(f"sqlite:///{db}", args.suite, args.runner, seen):
            print(row)


if __name__ == "__main__":
    main()
