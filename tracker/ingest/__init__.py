"""Results made elsewhere (a reportlog JSONL, plain or gzip; JUnit XML; a zip artifact holding one
of them) -> a RunRecord. Everything is read, bounded and parsed before anything is stored, so a bad
file stores nothing.
"""

from __future__ import annotations

import gzip
import io
import zipfile
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracker.ingest.junit import JUnitError, parse_junit
from tracker.ingest.reportlog import ReportLogError, parse_reportlog
from tracker.records import FileResults, RunRecord

MAX_BYTES = 512 * 1024 * 1024  # uncompressed; a 10,000-test reportlog is ~40 MB


class IngestError(ValueError):
    """The file cannot become a run; the message says why, for the person who sent it."""


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:.0f} MB"


def _read_bounded(stream: io.BufferedIOBase, limit: int, what: str) -> bytes:
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise IngestError(f"{what} is larger than {_mb(limit)} uncompressed")
    return data


def _decompress(raw: bytes, name: str, limit: int) -> bytes:
    if raw[:2] == b"\x1f\x8b":
        try:
            return _read_bounded(gzip.GzipFile(fileobj=io.BytesIO(raw)), limit, name)
        except (EOFError, OSError, zlib.error) as exc:
            raise IngestError(f"{name}: broken or truncated gzip ({exc})") from None
    if raw[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(raw)) as zf:
                members = [m for m in zf.infolist() if not m.is_dir()]
                if len(members) != 1:
                    raise IngestError(
                        f"{name}: a zip must hold exactly one results file, it holds {len(members)}"
                    )
                with zf.open(members[0]) as fh:
                    return _decompress(_read_bounded(fh, limit, name), members[0].filename, limit)
        except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
            raise IngestError(f"{name}: broken zip ({exc})") from None
    return raw


def decode(raw: bytes, name: str, limit: int = MAX_BYTES) -> str:
    """Bytes of an uploaded or local file -> its text, or an IngestError saying what is wrong."""
    if len(raw) > limit:
        raise IngestError(f"{name} is larger than {_mb(limit)}")
    data = _decompress(raw, name, limit)
    if not data.strip():
        raise IngestError(f"{name} is empty")
    if b"\x00" in data[:65536]:
        raise IngestError(f"{name} is a binary file, not a reportlog or JUnit XML")
    try:
        return data.decode("utf-8-sig")  # a byte order mark (xUnit.net, Windows tools) is no text
    except UnicodeDecodeError as exc:
        raise IngestError(f"{name}: not UTF-8 text (invalid byte at offset {exc.start})") from None


def read_file(path: Path, limit: int = MAX_BYTES) -> str:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc.strerror}") from None
    if size > limit:
        raise IngestError(f"{path.name} is {_mb(size)}, larger than the limit of {_mb(limit)}")
    return decode(path.read_bytes(), path.name, limit)


def parse_results(text: str, name: str) -> FileResults:
    head = text.lstrip()[:1]
    try:
        if head == "<":
            return parse_junit(text)
        if head == "{":
            parser = parse_reportlog(text)
            return FileResults(parser.attempts, parser.first_start, parser.last_stop)
    except (JUnitError, ReportLogError) as exc:
        raise IngestError(f"{name}: {exc}") from None
    raise IngestError(f"{name}: neither a pytest reportlog (JSON lines) nor JUnit XML")


def load_run(
    path: Path,
    *,
    suite: str,
    runner: str,
    commit: str | None = None,
    started_at: datetime | None = None,
    text: str | None = None,
) -> RunRecord:
    """The run a results file describes. Its collected set is what the file mentions; its
    duration is the wall span the file states (first test start to last test stop), else the
    sum of its test durations, as if they ran one after the other."""
    name = path.name
    text = read_file(path) if text is None else text
    found = parse_results(text, name)
    attempts = found.attempts
    if not attempts:
        raise IngestError(f"{name}: holds no test results")
    collected = list(dict.fromkeys(a.nodeid for a in attempts))
    for position, attempt in enumerate(attempts):  # one file: one process, in this order
        attempt.process, attempt.position = 0, position
    if started_at is not None and started_at.tzinfo is None:
        raise IngestError("--started-at needs a time zone offset, e.g. 2026-11-30T22:00:00+08:00")
    if found.started_at and found.finished_at and found.finished_at >= found.started_at:
        span = found.finished_at - found.started_at
    else:
        span = timedelta(seconds=sum(a.duration for a in attempts))
    started = (started_at or found.started_at or datetime.now(UTC)).astimezone(UTC)
    try:
        finished = started + span
    except OverflowError:
        raise IngestError(f"{name}: its times add up to no real time span") from None
    return RunRecord(
        suite=suite,
        runner=runner,
        source="ingest",
        started_at=started,
        finished_at=finished,
        commit=commit,
        collected=collected,
        attempts=attempts,
    )
