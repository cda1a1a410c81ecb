"""Ingest every file of a folder the way `tracker ingest` does (parse, then store in a fresh
SQLite database) and print what each became, so the counts can be read against the XML.

    python bench/peer_junit.py ../shared/peer-junit/files [--details]

One line per file: the run's status, tests, final-outcome counts and duration; or `rejected`
and the one-line reason a user would get. For JUnit files, a second line puts the totals the
file's own header declares (tests, failures, errors, skipped) beside the testcase elements it
holds, to read the counts against. A traceback is a bug of the tracker and is printed as
such. `--details` adds every non-passing test with its attempts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import traceback
from pathlib import Path

import defusedxml.ElementTree as SafeET

from tracker import store
from tracker.db import migrate, session_scope
from tracker.ingest import IngestError, load_run


def declared(path: Path) -> str | None:
    """The header's totals: the root <testsuites> if it states them, else the sum over the
    top-level <testsuite>s; and the number of <testcase> elements."""
    try:
        root = SafeET.parse(path, forbid_dtd=True).getroot()
    except Exception:
        return None
    if root.tag not in ("testsuites", "testsuite"):
        return None
    heads = [root] if root.get("tests") is not None else root.findall("testsuite")
    keys = ("tests", "failures", "errors", "skipped")
    total = dict.fromkeys(keys, 0)
    for head in heads:
        for key in keys:
            value = head.get(key) or (head.get("skips") if key == "skipped" else None) or "0"
            total[key] += int(float(value)) if value.replace(".", "", 1).isdigit() else 0
    cases = sum(1 for _ in root.iter("testcase"))
    return ", ".join(f"{k} {v}" for k, v in total.items()) + f"; {cases} <testcase> elements"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--details", action="store_true", help="list every non-passing test")
    args = ap.parse_args()
    files = sorted(p for p in args.folder.iterdir() if p.is_file())
    tally = {"stored": 0, "rejected": 0, "traceback": 0}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/peer.db"
        migrate(url)
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
            if header := declared(path):
                print(f"    header: {header}")
            if args.details:
                for nodeid, attempts in record.by_test().items():
                    outcomes = [a.outcome for a in attempts]
                    if outcomes != ["passed"]:
                        print(f"      {'/'.join(outcomes):<24} {nodeid[:110]}")
    print(f"\n{len(files)} files: " + ", ".join(f"{v} {k}" for k, v in tally.items()))
    return 1 if tally["traceback"] else 0


if __name__ == "__main__":
    sys.exit(main())
