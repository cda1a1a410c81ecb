"""A whole run pushed by a runner's tracker (`tracker show --json`'s shape) -> a RunRecord.

Unlike a results file, it carries what only the tracker's own runs have: the isolated reruns,
each attempt's process and position, the probed environment and a status the run was forced into
(infra_error, timed_out, interrupted). The final outcomes, counts and quarantine flags in it are
not trusted: the central store derives them again, with its own quarantine list.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tracker.models import ENV_COLUMNS
from tracker.records import (
    RUN_FORMAT,
    RUN_INFRA,
    RUN_INTERRUPTED,
    RUN_TIMED_OUT,
    AttemptRecord,
    RunRecord,
)
from tracker.validate import (
    MAX_ID,
    MAX_RESULTS,
    InvalidRecord,
    check_record,
    check_time,
    escape_controls,
)

FORCED = (RUN_INFRA, RUN_TIMED_OUT, RUN_INTERRUPTED)  # statuses that attempts cannot derive
# A push is read within the bounds of an upload (`upload_max_mb`, unzipped too), and refused
# before json.loads when it would build more objects than its size allows: a 495 KB gzip of
# `{},` repeated unzipped to 512 MB of empty objects and took the server past 12 GiB.
BYTES_PER_CONTAINER = 20  # a real push: ~400 bytes per object or list (3 MB, 8,000 of them)
MAX_CONTAINERS = 2_000_000  # ~200 MB of Python objects at most
ENV_KEYS, ENV_BYTES = 64, 4096  # an environment is a few dozen facts and a list of devices
ENV_DEPTH = 4  # a list of devices, each a dict of facts


class _In(BaseModel):
    # later versions of format 1 may add fields: a reader ignores what it does not know
    model_config = ConfigDict(extra="ignore")


class AttemptIn(_In):
    number: int = Field(ge=1, le=1000)
    outcome: str = Field(max_length=16)
    duration: float = Field(default=0.0, ge=0, allow_inf_nan=False)

    isolated: bool = False
    process: int | None = Field(default=None, ge=0, le=MAX_ID)
    position: int | None = Field(default=None, ge=0, le=MAX_ID)
    worker: str | None = Field(default=None, max_length=50)
    started_at: datetime | None = None
    message: str | None = None
    longrepr: str | None = None

    @field_validator("duration", mode="before")
    @classmethod
    def _not_a_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):  # JSON true is not 1.0 seconds
            raise ValueError("a duration is a number of seconds, not true or false")
        return value


class ResultIn(_In):
    nodeid: str = Field(min_length=1, max_length=20_000)
    attempts: list[AttemptIn] = Field(max_length=1000)


class OriginIn(_In):
    store: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")
    run: int = Field(ge=1, le=MAX_ID)


class RunIn(_In):
    origin: OriginIn
    status: str = Field(max_length=16)
    suite: str
    runner: str
    commit: str | None = None
    ref: str | None = None
    source: Literal["runner", "ingest"]
    started_at: datetime
    finished_at: datetime | None = None
    message: str | None = Field(default=None, max_length=20_000)
    host: str | None = Field(default=None, max_length=200)
    environment: dict[str, Any] | None = None
    kernel_cache: Literal["warm", "cold"] | None = None


class PushedRun(_In):
    format: str
    run: RunIn
    results: list[ResultIn] = Field(max_length=MAX_RESULTS)


@dataclass
class Pushed:
    record: RunRecord
    origin: str  # the pushing store's id
    origin_run: int  # the run's id in that store
    host: str | None


def decode(body: bytes, gzipped: bool, max_mb: int = 64) -> Any:
    """The JSON of a push, gunzipped within `max_mb`; InvalidRecord with the reason, before the
    memory is spent."""
    limit = max_mb * 1024 * 1024
    if gzipped:
        inflate = zlib.decompressobj(wbits=31)
        try:
            body = inflate.decompress(body, limit + 1)
        except zlib.error as exc:
            raise InvalidRecord(f"the body is not valid gzip ({exc})") from None
        if len(body) > limit or inflate.unconsumed_tail:
            raise InvalidRecord(f"the body is larger than {max_mb} MB unzipped")
    containers = body.count(b"{") + body.count(b"[")  # an upper bound: braces in strings count
    if containers > min(MAX_CONTAINERS, max(10_000, len(body) // BYTES_PER_CONTAINER)):
        raise InvalidRecord(
            f"the body holds {containers:,} objects and lists in {len(body):,} bytes: not a run"
        )
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidRecord(f"the body is not JSON ({exc})") from None
    except RecursionError:
        raise InvalidRecord("the body's JSON is nested too deep") from None


def _environment(env: dict[str, Any] | None) -> dict[str, Any] | None:
    """The probe's facts: at most ENV_KEYS, each at most ENV_BYTES of JSON (others dropped); those
    with a column of their own must be text (device_count: a number)."""
    if not env:
        return None
    kept = {
        escape_controls(key[:50]): _clean(value)
        for key, value in list(env.items())[:ENV_KEYS]
        if _json_size(value) <= ENV_BYTES
    }
    for key in ENV_COLUMNS:
        value, wanted = kept.get(key), int if key == "device_count" else str
        if value is not None and (not isinstance(value, wanted) or isinstance(value, bool)):
            del kept[key]
    if "device_kind" in kept and kept["device_kind"] is not None:
        kept["device_kind"] = kept["device_kind"][:16]
    return kept


def _json_size(value: Any) -> float:
    """Its size as JSON; a value JSON cannot hold (NaN), or nested deeper than ENV_DEPTH, counts
    as too big (a 900-deep value made every run sharing it answer 500)."""
    if _depth(value) > ENV_DEPTH:
        return math.inf
    try:
        return len(json.dumps(value, allow_nan=False))
    except ValueError:
        return math.inf


def _depth(value: Any, limit: int = ENV_DEPTH + 1) -> int:
    if limit <= 0 or not isinstance(value, list | dict):
        return 0
    inner = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(v, limit - 1) for v in inner), default=0)


def _clean(value: Any) -> Any:
    """Text in an environment value, its control characters made visible, at any depth."""
    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {escape_controls(str(k)): _clean(v) for k, v in value.items()}
    return value


def _utc(value: datetime | None, what: str) -> datetime | None:
    return check_time(value, what).astimezone(UTC) if value is not None else None


def read_pushed(data: Any) -> Pushed:
    """The run in a push, checked whole before anything is stored (InvalidRecord otherwise)."""
    if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
        given = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise InvalidRecord(f"unsupported format {given!r:.60}: this server reads {RUN_FORMAT}")
    try:
        pushed = PushedRun.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidRecord(
            f"{where}: {first['msg']} ({exc.error_count()} problem(s) in all)"
        ) from None
    run = pushed.run
    if run.status not in (*FORCED, "passed", "flaky", "failed"):
        raise InvalidRecord(f"a run with status {run.status!r:.20} cannot be pushed")
    record = RunRecord(
        suite=run.suite,
        runner=run.runner,
        source=run.source,
        started_at=_utc(run.started_at, "the run's start"),
        finished_at=_utc(run.finished_at, "the run's end"),
        commit=run.commit,
        ref=run.ref,
        collected=[r.nodeid for r in pushed.results],
        status=run.status if run.status in FORCED else None,
        message=run.message,
        environment=_environment(run.environment),
        # a folder on the runner's host: never a path the central server would read files from
        artifacts=None,
        kernel_cache=run.kernel_cache,
    )
    for result in pushed.results:
        for a in sorted(result.attempts, key=lambda a: a.number):
            record.attempts.append(
                AttemptRecord(
                    nodeid=result.nodeid,
                    outcome=a.outcome,
                    duration=a.duration,
                    message=a.message,
                    longrepr=a.longrepr,
                    started_at=a.started_at,
                    isolated=a.isolated,
                    process=a.process,
                    position=a.position,
                    worker=a.worker,
                )
            )
    check_record(record)
    host = escape_controls(run.host) if run.host else None
    return Pushed(record=record, origin=run.origin.store, origin_run=run.origin.run, host=host)
