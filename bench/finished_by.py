"""Tests finished by each minute after a launch, from pytest reportlogs (the tracker's per-process
logs of a run, or one xdist log): each test counts once, at its first teardown.

    python bench/finished_by.py LAUNCH_EPOCH LOG... [--every 60] [--until 540]
"""

from __future__ import annotations

import argparse
import json


def first_stops(paths: list[str]) -> dict[str, float]:
    stops: dict[str, float] = {}
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("$report_type") == "TestReport" and r.get("when") == "teardown":
                    nodeid, stop = r["nodeid"], r.get("stop") or 0.0
                    stops[nodeid] = min(stop, stops.get(nodeid, stop))
    return stops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("launch", type=float)
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--every", type=int, default=60)
    parser.add_argument("--until", type=int, default=540)
    args = parser.parse_args()
    stops = sorted(s - args.launch for s in first_stops(args.logs).values())
    row = {
        t: sum(1 for s in stops if s <= t) for t in range(args.every, args.until + 1, args.every)
    }
    print(json.dumps({"finished": len(stops), "last_s": round(stops[-1], 1) if stops else None,
                      "first_s": round(stops[0], 1) if stops else None, "by_s": row}))  # fmt: skip


if __name__ == "__main__":
    main()
