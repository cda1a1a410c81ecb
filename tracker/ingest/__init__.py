"""Results made elsewhere (a reportlog JSONL, plain or gzip; JUnit XML; a zip artifact holding one
of them) -> a RunRecord.

Files come from other machines and, over HTTP, from anyone with the token, so they are read as a
stream with every dimension bounded: bytes after decompression, the length of a line, the number
of lines and of results, the nesting of suites. Memory stays proportional to the results kept,
never to what a file claims, and a file past a limit is refused with the limit named. Everything is
parsed and checked (`tracker.validate`) before anything is stored, so a bad file stores nothing.
"""

from __future__ import annotations

import gzip
import io
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO

from tracker.ingest.confirm import settle
from tracker.ingest.junit import JUnitError, parse_junit
from tracker.ingest.reportlog import ReportLogError, parse_reportlog
from tracker.records import (
    RUN_FLAKY,
    RUN_INTERRUPTED,
    RUN_PASSED,
    FileResults,
    RunRecord,
    natural_order,
    summarize,
)
from tracker.validate import MAX_RESULTS, MAX_SECONDS, InvalidRecord, check_name, check_record

MAX_BYTES = 256 * 1024 * 1024  # uncompressed; a 10,000-test reportlog is ~40 MB
CUT_LOG = (
    "the report log ends before pytest's session did (no SessionFinish): tests that had not "
    "started by then are not in this run"
)
MAX_LINE = 8 * 1024 * 1024  # one reportlog record: a test's report with its captured output
MAX_LINES = 20 * MAX_RESULTS  # a test writes 3 reports; collectors and warnings add a few


class IngestError(ValueError):
    """The file cannot become a run; the message says why, for the person who sent it."""


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:.0f} MB"


class _Limited(io.RawIOBase):
    """Counts what is read through it and stops at `limit`: a gzip or zip bomb costs its limit,
    not its claim."""

    def __init__(self, inner: BinaryIO, limit: int, name: str) -> None:
        self.inner, self.limit, self.name, self.count = inner, limit, name, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.inner.readinto(buffer)
        self.count += n or 0
        if self.count > self.limit:
            raise IngestError(f"{self.name} is larger than {_mb(self.limit)} uncompressed")
        return n


def _open_layers(
    raw: BinaryIO, name: str, limit: int, stack: ExitStack, depth: int = 0
) -> io.BufferedReader:
    """The results stream inside any gzip or single-member zip wrapping, bounded."""
    if depth > 3:
        raise IngestError(f"{name}: archives nested more than 3 deep")
    stream = io.BufferedReader(_Limited(raw, limit, name), 1024 * 1024)
    head = stream.peek(4)[:4]
    if head[:2] == b"\x1f\x8b":
        inner = stack.enter_context(gzip.GzipFile(fileobj=stream, mode="rb"))
        return _open_layers(inner, name, limit, stack, depth + 1)
    if head == b"PK\x03\x04":
        if not raw.seekable():
            raise IngestError(f"{name}: a zip must be uploaded as a file")
        raw.seek(0)
        zf = stack.enter_context(zipfile.ZipFile(raw))
        members = [m for m in zf.infolist() if not m.is_dir()]
        if len(members) != 1:
            raise IngestError(
                f"{name}: a zip must hold exactly one results file, it holds {len(members)}"
            )
        inner = stack.enter_context(zf.open(members[0]))
        return _open_layers(inner, members[0].filename[:100], limit, stack, depth + 1)
    return stream


def _lines(stream: io.BufferedReader, name: str) -> Iterator[str]:
    for lineno in range(1, MAX_LINES + 2):
        line = stream.readline(MAX_LINE + 1)
        if not line:
            return
        if lineno > MAX_LINES:
            raise IngestError(f"{name}: more than {MAX_LINES:,} lines")
        if len(line) > MAX_LINE:
            raise IngestError(f"{name}: line {lineno} is longer than {_mb(MAX_LINE)}")
        try:
            yield line.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise IngestError(
                f"{name}: line {lineno} is not UTF-8 text (invalid byte at column {exc.start})"
            ) from None


def read_results(raw: BinaryIO, name: str, limit: int = MAX_BYTES) -> FileResults:
    """A results file from a binary stream (a local file, an upload's spool), whichever of the
    formats it is in, or an IngestError saying what is wrong with it."""
    with ExitStack() as stack:
        try:
            stream = _open_layers(raw, name, limit, stack)
            head = stream.peek(65536)[:65536]
            if not head.strip():
                raise IngestError(f"{name} is empty")
            if b"\x00" in head:
                raise IngestError(f"{name} is a binary file, not a reportlog or JUnit XML")
            first = head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
            if first == b"<":
                return parse_junit(stream, MAX_RESULTS)
            if first == b"{":
                parser = parse_reportlog(_lines(stream, name), MAX_RESULTS)
                return FileResults(
                    parser.attempts, parser.first_start, parser.last_stop, not parser.finished
                )
        except (JUnitError, ReportLogError) as exc:
            raise IngestError(f"{name}: {exc}") from None
        except (EOFError, OSError, zlib.error, zipfile.BadZipFile) as exc:
            raise IngestError(f"{name}: broken or truncated gzip or zip ({exc})") from None
    raise IngestError(f"{name}: neither a pytest reportlog (JSON lines) nor JUnit XML")


def read_path(path: Path, limit: int = MAX_BYTES) -> FileResults:
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise IngestError(f"{path} is a directory: give one results file")
        if size > limit:
            raise IngestError(f"{path.name} is {_mb(size)}, larger than the limit of {_mb(limit)}")
        with path.open("rb") as fh:
            return read_results(fh, path.name, limit)
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc.strerror}") from None


def load_run(
    path: Path,
    *,
    suite: str,
    runner: str,
    commit: str | None = None,
    started_at: datetime | None = None,
    stream: BinaryIO | None = None,
) -> RunRecord:
    """The run a results file describes (read from `stream` when given, else from `path`). Its
    collected set is what the file mentions; its duration is the wall span the file states (first
    test start to last test stop), else the sum of its test durations, as if they ran one after
    the other."""
    name = path.name
    try:  # before reading a byte: a bad name is a bad request, whatever the file holds
        check_name(suite, "suite")
        check_name(runner, "runner")
    except InvalidRecord as exc:
        raise IngestError(str(exc)) from None
    found = read_path(path) if stream is None else read_results(stream, name)
    attempts = found.attempts
    if not attempts:
        raise IngestError(f"{name}: holds no test results")
    collected = list(dict.fromkeys(a.nodeid for a in attempts))
    # each xdist worker is one process, its tests in the file's order (reports reach the log as
    # they happen); a file without workers is one process
    workers = sorted({a.worker or "" for a in attempts}, key=natural_order)
    process = {w: i for i, w in enumerate(workers)}
    positions = dict.fromkeys(workers, 0)
    for attempt in attempts:
        worker = attempt.worker or ""
        attempt.process, attempt.position = process[worker], positions[worker]
        positions[worker] += 1
    if started_at is not None and started_at.tzinfo is None:
        raise IngestError("--started-at needs a time zone offset, e.g. 2026-11-30T22:00:00+08:00")
    record = RunRecord(
        suite=suite,
        runner=runner,
        source="ingest",
        started_at=started_at or found.started_at or datetime.now(UTC),
        commit=commit,
        collected=collected,
        attempts=attempts,
    )
    try:
        check_record(record)  # before any arithmetic on the file's numbers
    except InvalidRecord as exc:
        raise IngestError(f"{name}: {exc}") from None
    if found.started_at and found.finished_at and found.finished_at >= found.started_at:
        span = found.finished_at - found.started_at
    else:
        span = timedelta(seconds=sum(a.duration for a in attempts))
    if span.total_seconds() > MAX_SECONDS:
        raise IngestError(f"{name}: its tests span {span.days:,} days; a run lasts under a year")
    record.started_at = record.started_at.astimezone(UTC)
    record.finished_at = record.started_at + span
    settle(record)  # a timeout beside other long tests (xdist) counts once confirmed alone
    if found.cut:  # a CI job's time limit, a lost runner: what did not start is not in the file
        record.message = CUT_LOG
        if summarize(record)[1] in (RUN_PASSED, RUN_FLAKY):  # not a whole pass: no evidence
            record.status = RUN_INTERRUPTED
    return record
