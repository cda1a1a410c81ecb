"""How well the run plan's expected durations matched real nights, replayed offline from
stored device databases (no GPU needed): each night is planned from the nights before it on
its runner, as `tracker run` would have, and its expectations are set against what the night
recorded.

    python bench/plan_replay.py DB [DB ...] [--suite transformers] [--runner h200]
    PYTHONPATH=/tmp/before python bench/plan_replay.py DB ...   # another source tree's plan

Per night: its tests that ran at least 1 s or were expected to (first attempts, not cut); the
median factor between expected and real time (2.0: half or double); how many were expected
under 1 s and took 10 s or more; and the device chain (`Feed`): its tests, its expected
seconds and the seconds those tests took that night. A night seen in several databases (each
device call copies the history it planned with) is replayed once.
"""

from __future__ import annotations

import argparse
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
    feed = Feed({f"d{d}w{w}": str(d) for d in range(devices) for w in range(8)})
    plan.fill(feed, nodeids, expected, "test")
    chain = [g for c in feed.chains.values() for _, g, _ in c]
    chain_expected = sum(w for c in feed.chains.values() for w, *_ in c)
    chain_took = sum(took.get(n, 0.0) for g in chain for n in g)
    return (
        f"| #{run_id} | {info['kernel_cache']} | {len(pairs)} | {factor:.1f}x | {surprises} | "
        f"{len(chain)} | {chain_expected:.0f} s | {chain_took:.0f} s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("databases", nargs="+")
    parser.add_argument("--suite", default="transformers")
    parser.add_argument("--runner", default="h200")
    args = parser.parse_args()
    print("| night | cache | long tests | median factor | expected < 1 s, took >= 10 s "
          "| chain | chain expected | chain took |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    seen: set = set()
    for db in args.databases:
        for row in replay(f"sqlite:///{db}", args.suite, args.runner, seen):
            print(row)


if __name__ == "__main__":
    main()
