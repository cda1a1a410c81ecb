"""Ingest every file of a folder the way `tracker ingest` does (parse, then store in a fresh
SQLite database) and print what each became, so the counts can be read against the XML.

    python bench/peer_junit.py ../shared/peer-junit/files [--details]

One line per file: the run's status, tests, final-outcome counts and duration; or `rejected`
and the one-line reason a user would get. A traceback is a bug of the tracker and is printed as
such. `--details` adds every non-passing test with its attempts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import traceback
from pathlib import Path

from tracker import store
from tracker.db import session_scope
from tracker.ingest import IngestError, load_run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--details", action="store_true", help="list every non-passing test")
    args = ap.parse_args()
    files = sorted(p for p in args.folder.iterdir() if p.is_file())
    tally = {"stored": 0, "rejected": 0, "traceback": 0}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/peer.db"
        for path in files:
            try:
                record = load_run(path, suite=path.stem[:200], runner="peer")
                with session_scope(url) as session:
                    run = store.save_run(session, record)
            except IngestError as exc:
                tally["rejected"] += 1
                print(f"{path.name}\n    rejected: {exc}")
                continue
            except Exception:
                tally["traceback"] += 1
                print(f"{path.name}\n    TRACEBACK\n{traceback.format_exc()}")
                continue
            tally["stored"] += 1
            counts = ", ".join(f"{k} {v}" for k, v in run.counts.items())
            seconds = (run.finished_at - run.started_at).total_seconds()
            print(f"{path.name}\n    {run.status}: {run.expected} tests ({counts}), {seconds:g} s")
            if args.details:
                for nodeid, attempts in record.by_test().items():
                    outcomes = [a.outcome for a in attempts]
                    if outcomes != ["passed"]:
                        print(f"      {'/'.join(outcomes):<24} {nodeid[:110]}")
    print(f"\n{len(files)} files: " + ", ".join(f"{v} {k}" for k, v in tally.items()))
    return 1 if tally["traceback"] else 0


if __name__ == "__main__":
    sys.exit(main())
