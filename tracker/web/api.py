"""JSON API under /api/v1 (OpenAPI at /docs), and the upload that ingests results from other CI."""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    Depends,
    File,
    Form,
    Header,
    HTTPException,
    Query,
    Request,
    UploadFile,
)
from pydantic import BaseModel, Field

from tracker import queries, store
from tracker.analysis.report import Scope
from tracker.config import ConfigError
from tracker.ingest import MAX_BYTES, IngestError, decode, load_run
from tracker.models import RunRequest
from tracker.web.deps import SessionDep, SettingsDep

router = APIRouter(prefix="/api/v1", tags=["api"])
UPLOAD_MAX = 256 * 1024 * 1024  # bytes on the wire (a gzip of a reportlog is far smaller)

RunnerQ = Annotated[str | None, Query(max_length=200)]


class RunOut(BaseModel):
    id: int
    status: str
    suite: str
    runner: str
    commit: str | None
    ref: str | None
    source: str
    started_at: str | None
    finished_at: str | None
    duration: float | None
    expected: int
    counts: dict[str, int]
    quarantined_failures: int = Field(
        0, description="failing or flaky tests that were quarantined: they did not decide status"
    )
    message: str | None
    artifacts: str | None = None
    environment: dict[str, Any] | None = None


class AttemptOut(BaseModel):
    number: int
    outcome: str
    duration: float
    isolated: bool
    worker: str | None
    message: str | None


class ResultOut(BaseModel):
    test_id: int
    nodeid: str
    kernel: str
    outcome: str
    duration: float
    quarantined: bool = False
    attempts: list[AttemptOut]


class RunDetailOut(BaseModel):
    run: RunOut
    results: list[ResultOut]


class RunsOut(BaseModel):
    runs: list[RunOut]


class SuiteOut(BaseModel):
    name: str
    runners: list[str]
    last_run: RunOut | None


class ScheduleOut(BaseModel):
    suite: str
    schedule: str | None
    timezone: str
    next_run: str | None


@router.get("/suites", response_model=list[SuiteOut])
def suites(session: SessionDep) -> list[dict[str, Any]]:
    by_suite: dict[str, list[str]] = {}
    for suite, runner in queries.suite_runner_pairs(session):
        by_suite.setdefault(suite, []).append(runner)
    return [
        {
            "name": s,
            "runners": r,
            "last_run": next(iter(queries.list_runs(session, s, None, 1)), None),
        }
        for s, r in by_suite.items()
    ]


@router.get("/suites/{suite}/runs", response_model=RunsOut)
def suite_runs(
    suite: str,
    session: SessionDep,
    runner: RunnerQ = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, Any]:
    return {"runs": queries.list_runs(session, suite, runner, limit)}


@router.get("/runs/{run_id}", response_model=RunDetailOut)
def run(run_id: int, session: SessionDep) -> dict[str, Any]:
    return queries.run_detail(session, run_id)


@router.get("/runs/{run_id}/results", response_model=list[ResultOut])
def run_results(
    run_id: int,
    session: SessionDep,
    outcome: Annotated[str | None, Query(max_length=20)] = None,
    kernel: Annotated[str | None, Query(max_length=200)] = None,
) -> list[dict]:
    return [
        r
        for r in queries.run_detail(session, run_id)["results"]
        if (not outcome or r["outcome"] == outcome) and (not kernel or r["kernel"] == kernel)
    ]


@router.get("/tests/{test_id}")
def test_detail(test_id: int, session: SessionDep, settings: SettingsDep) -> dict[str, Any]:
    info = queries.case_info(session, test_id)
    stats = Scope(session, settings, info["suite"]).stats().get(test_id)
    return {
        "test": info,
        "stats": stats.as_dict() if stats else None,
        "history": queries.case_history(session, test_id),
    }


def get_scope(
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    runner: RunnerQ = None,
    days: Annotated[int | None, Query(ge=1, le=365)] = None,
) -> Scope:
    """The analysis of a suite (optionally one runner) over a window of days."""
    return Scope(session, settings, suite, runner, days)


ScopeDep = Annotated[Scope, Depends(get_scope)]


@router.get("/suites/{suite}/flaky")
def flaky(scope: ScopeDep) -> dict[str, Any]:
    return scope.flaky_json()


@router.get("/suites/{suite}/kernels")
def kernels(scope: ScopeDep) -> dict[str, Any]:
    return scope.kernels_json()


@router.get("/suites/{suite}/clusters")
def clusters(scope: ScopeDep) -> dict[str, Any]:
    return scope.clusters_json()


@router.get("/suites/{suite}/promotion")
def promotion(scope: ScopeDep) -> dict[str, Any]:
    return {"suite": scope.suite, "runner": scope.runner, **scope.promotion().as_dict()}


@router.get("/schedule", response_model=list[ScheduleOut])
def schedule(settings: SettingsDep) -> list[dict[str, Any]]:
    """Each configured suite's cron and next run (the stored job's, once a scheduler ran)."""
    from tracker.scheduler import next_runs

    upcoming = next_runs(settings)
    return [
        {
            "suite": s.name,
            "schedule": s.schedule,
            "timezone": settings.timezone,
            "next_run": upcoming[s.name].isoformat() if upcoming.get(s.name) else None,
        }
        for s in settings.suites
    ]


def require_token(
    settings: SettingsDep, authorization: Annotated[str | None, Header()] = None
) -> None:
    """Bearer token from TRACKER_TOKEN, compared in constant time; no token set: no writes."""
    if not settings.token:
        raise HTTPException(403, "uploads are disabled: the server has no TRACKER_TOKEN set")
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.encode(), settings.token.encode()
    ):
        raise HTTPException(
            401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
        )


def _limit_body(request: Request) -> None:
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > UPLOAD_MAX:
        raise HTTPException(413, f"upload larger than {UPLOAD_MAX // 1024 // 1024} MB")


@router.post(
    "/suites/{suite}/runs",
    status_code=201,
    response_model=RunDetailOut,
    dependencies=[Depends(_limit_body), Depends(require_token)],
)
async def upload(
    suite: str,
    session: SessionDep,
    file: Annotated[UploadFile, File(description="reportlog JSONL (.gz ok), JUnit XML or a zip")],
    runner: Annotated[str, Form(min_length=1, max_length=200)],
    commit: Annotated[str | None, Form(max_length=100)] = None,
    started_at: Annotated[datetime | None, Form(description="ISO-8601 with offset")] = None,
) -> dict[str, Any]:
    if not 0 < len(suite) <= 200:
        raise HTTPException(422, "suite name must be 1-200 characters")
    raw = await file.read(UPLOAD_MAX + 1)
    if len(raw) > UPLOAD_MAX:
        raise HTTPException(413, f"upload larger than {UPLOAD_MAX // 1024 // 1024} MB")
    name = Path(file.filename or "upload").name[:100]
    try:
        if started_at is not None and started_at.tzinfo is None:
            raise IngestError("started_at needs a time zone offset")
        record = load_run(
            Path(name),
            suite=suite,
            runner=runner,
            commit=commit,
            started_at=started_at,
            text=decode(raw, name, MAX_BYTES),
        )
    except IngestError as exc:
        raise HTTPException(400, str(exc)) from None
    saved = store.save_run(session, record)
    return queries.run_detail(session, saved.id)


class TriggerOut(BaseModel):
    request_id: int
    suite: str
    runner: str
    state: str


@router.post(
    "/suites/{suite}/trigger",
    status_code=202,
    response_model=TriggerOut,
    dependencies=[Depends(require_token)],
)
def trigger(suite: str, session: SessionDep, settings: SettingsDep) -> dict[str, Any]:
    """Queue a run of a configured suite for the scheduler; refused (409) while one runs or
    waits."""
    try:
        settings.suite(suite)
    except ConfigError as exc:
        raise HTTPException(404, str(exc)) from None
    runner = settings.runner.name
    if queries.busy(session, suite, runner):
        raise HTTPException(409, f"{suite} is already running or queued on {runner}")
    request = RunRequest(suite=suite, runner=runner, state="queued", requested_at=datetime.now(UTC))
    session.add(request)
    session.commit()
    return {"request_id": request.id, "suite": suite, "runner": runner, "state": request.state}
