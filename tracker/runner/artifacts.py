"""The run folder: what each pytest process leaves in it, under which name, and how a run is
read back from it. One place for the layout, which the supervisor writes, the recovery of a
killed run reads again and the run page shows (`outputs`), so that the web needs nothing else
of the runner.

Per process `pN`: `pN.select` (the tests it was given), `pN.reportlog.jsonl` (pytest-reportlog),
`pN.events.jsonl` (our plugin's start and collection events), `pN.out` (its output, bounded),
`pN.inbox` (what a pulling process was handed); `phases.json` for the run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tracker.ingest.reportlog import parse_reportlog
from tracker.records import AttemptRecord, bound_nodeid

OUTPUT_TAIL = 8_000
OUTPUT_MAX = 4 * 1024 * 1024  # pytest output kept per process: its head and its tail
FILES = ("select", "reportlog.jsonl", "events.jsonl", "out", "inbox")


def process_files(workdir: Path, name: str) -> tuple[Path, ...]:
    """A process's files, in the order of FILES."""
    return tuple(workdir / f"{name}.{ext}" for ext in FILES)


def output_tail(path: Path, limit: int = OUTPUT_TAIL) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - limit))
            return fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def bound_output(path: Path, limit: int = OUTPUT_MAX) -> None:
    """A test printing gigabytes must not fill the runner's disk: keep the head and the tail."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size <= limit:
        return
    with path.open("rb") as fh:
        head = fh.read(limit // 4)
        fh.seek(size - (limit - limit // 4))
        tail = fh.read()
    cut = f"\n… [{size - len(head) - len(tail)} bytes of output cut] …\n".encode()
    path.write_bytes(head + cut + tail)


def outputs(artifacts: str | None, limit: int = 20_000) -> list[tuple[str, str]]:
    """The tail of each pytest process's output of a run, for the run page."""
    folder = Path(artifacts) if artifacts else None
    if folder is None or not folder.is_dir():
        return []
    files = sorted(folder.glob("*.out"), key=lambda p: (len(p.name), p.name))
    return [(f.stem, output_tail(f, limit)) for f in files]


def _number(path: Path) -> int:
    return int(re.sub(r"\D", "", path.name.split(".")[0]) or 0)


def read_back(artifacts: str | None) -> tuple[list[str], list[AttemptRecord]]:
    """What a run's folder says happened, for a run whose tracker was killed: the collection
    (the first one reported) and every attempt, in process order."""
    folder = Path(artifacts) if artifacts else None
    if folder is None or not folder.is_dir():
        return [], []
    collected: list[str] = []
    for events in sorted(folder.glob("p*.events.jsonl"), key=_number):
        for line in events.read_text(encoding="utf-8", errors="replace").splitlines():
            event = json.loads(line) if line.strip().startswith("{") else {}
            if event.get("e") == "collected" and not collected:
                collected = event["nodeids"]
    expected, seen = {bound_nodeid(n) for n in collected}, set()
    attempts: list[AttemptRecord] = []
    for path in sorted(folder.glob("p*.reportlog.jsonl"), key=_number):
        with path.open(encoding="utf-8", errors="replace") as fh:
            parser = parse_reportlog(fh)
        for position, attempt in enumerate(parser.attempts):
            attempt.process, attempt.position = _number(path), position
            # every pulling process reports the collection errors: keep them once
            if attempt.nodeid in expected or attempt.nodeid not in seen:
                seen.add(attempt.nodeid)
                attempts.append(attempt)
    return collected, attempts
