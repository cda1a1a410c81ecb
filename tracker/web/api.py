"""JSON API under /api/v1 (OpenAPI at /docs), and the upload that ingests results from other CI."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    File,
    Form,
    HTTPException,
    Query,
    Request,
    Response,
    UploadFile,
)
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from tracker import alerts, queries, store
from tracker.analysis import changes, history
from tracker.analysis.report import Scope
from tracker.analysis.testcase import test_data
from tracker.config import ConfigError, Settings
from tracker.db import session_scope
from tracker.ingest import IngestError, load_run
from tracker.ingest.pushed import decode, read_pushed
from tracker.records import RUN_FORMAT
from tracker.schedule import next_runs
from tracker.validate import MAX_ID, InvalidRecord
from tracker.web.deps import (
    NOT_FOUND,
    Problem,
    RowId,
    RunnerQ,
    ScopeDep,
    SessionDep,
    SettingsDep,
    SuiteName,
)
from tracker.web.render import plain

router = APIRouter(prefix="/api/v1", tags=["api"])


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
    host: str | None = None
    environment: dict[str, Any] | None = None


class AttemptOut(BaseModel):
    number: int
    outcome: str
    duration: float
    isolated: bool
    process: int | None = None
    position: int | None = None
    worker: str | None
    started_at: str | None = None
    message: str | None
    longrepr: str | None = None


class ResultOut(BaseModel):
    test_id: int
    nodeid: str
    kernel: str
    outcome: str
    duration: float
    quarantined: bool = False
    attempts: list[AttemptOut]


class RunDetailOut(BaseModel):
    format: str = Field(RUN_FORMAT, description="the version of this shape")
    run: RunOut
    results: list[ResultOut]
    total: int = Field(description="results in the run; `results` holds one page of them")


PAGE_MAX = 1000
LimitQ = Annotated[int, Query(ge=1, le=PAGE_MAX)]
OffsetQ = Annotated[int, Query(ge=0, le=2**31)]


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


@router.get("/suites/{suite}/runs", response_model=RunsOut, responses=NOT_FOUND)
def suite_runs(
    suite: SuiteName,
    session: SessionDep,
    runner: RunnerQ = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, Any]:
    history.suite_id(session, suite)  # 404 for a suite never stored
    history.runner_id(session, runner)
    return {"runs": queries.list_runs(session, suite, runner, limit)}


@router.get("/runs/{run_id}", response_model=RunDetailOut, responses=NOT_FOUND)
def run(
    run_id: RowId, session: SessionDep, limit: LimitQ = PAGE_MAX, offset: OffsetQ = 0
) -> dict[str, Any]:
    """The run and one page of its results (`limit`, `offset`; `total` says how many)."""
    return queries.run_detail(session, run_id, limit=limit, offset=offset)


@router.get("/runs/{run_id}/results", response_model=list[ResultOut], responses=NOT_FOUND)
def run_results(
    run_id: RowId,
    session: SessionDep,
    outcome: Annotated[str | None, Query(max_length=20)] = None,
    kernel: Annotated[str | None, Query(max_length=200)] = None,
    limit: LimitQ = PAGE_MAX,
    offset: OffsetQ = 0,
) -> list[dict]:
    queries.run_info(session, run_id)  # 404 for a run that does not exist
    return queries.run_results(
        session, run_id, outcome=outcome, kernel=kernel, limit=limit, offset=offset
    )[0]


@router.get("/runs/{run_id}/changes", responses=NOT_FOUND)
def run_changes(
    run_id: RowId,
    session: SessionDep,
    against: Annotated[
        int | None, Query(ge=1, le=MAX_ID, description="default: the one before")
    ] = None,
) -> dict[str, Any]:
    """What changed since the runner's run before (or `against`): tests newly failing, fixed,
    still failing and newly flaky, and each part of the environment that differs; the run
    page's "Since run #N". `changes` is null for a runner's first run. `events`: what the run
    changed, worked out when it was stored (verdicts, kernels, promotion), as its alerts said
    it; null for a run stored before alerts existed."""
    run = queries.run_info(session, run_id)
    if against is not None:
        queries.run_info(session, against)  # 404 for a run that does not exist
    alert = queries.run_alert(session, run_id)
    return {
        "run": run_id,
        "changes": changes.run_changes(session, run, against),
        "events": alert["events"] if alert else None,
    }


@router.get("/tests/{test_id}", responses=NOT_FOUND)
def test_detail(test_id: RowId, session: SessionDep, settings: SettingsDep) -> dict[str, Any]:
    """The test page's data: verdict and evidence, history, polluter search, first bad commit."""
    return plain(test_data(session, settings, test_id))


@router.get("/suites/{suite}/flaky", responses=NOT_FOUND)
def flaky(scope: ScopeDep) -> dict[str, Any]:
    return scope.flaky_json()


@router.get("/suites/{suite}/kernels", responses=NOT_FOUND)
def kernels(scope: ScopeDep) -> dict[str, Any]:
    return scope.kernels_json()


@router.get("/suites/{suite}/clusters", responses=NOT_FOUND)
def clusters(scope: ScopeDep) -> dict[str, Any]:
    return scope.clusters_json()


@router.get("/suites/{suite}/runners", responses=NOT_FOUND)
def runner_differences(scope: ScopeDep, session: SessionDep, settings: SettingsDep) -> dict:
    """Tests whose verdict differs between the suite's runners (stable on one device, flaky on
    another), each side with its runs and failures; the suite page's "Runners disagree"."""
    names = scope.runners()
    rows = changes.compare_runners(session, settings, scope.suite, names, scope.days)
    return {"suite": scope.suite, "runners": names, "days": scope.days, "differing": rows}


@router.get("/suites/{suite}/daily", responses=NOT_FOUND)
def daily_green(
    suite: SuiteName,
    session: SessionDep,
    settings: SettingsDep,
    runner: RunnerQ = None,
    days: Annotated[int, Query(ge=1, le=365)] = 30,
) -> dict[str, Any]:
    """Green runs day by day over the last `days` local days (the configured time zone): the
    suite page's trend. A day with no run has `runs` 0 and `green_rate` null."""
    scope = Scope(session, settings, suite, runner, days)
    return {"suite": suite, "runner": runner, "days": days,
            "daily": [d.as_dict() for d in scope.daily(days)]}  # fmt: skip


@router.get("/suites/{suite}/promotion", responses=NOT_FOUND)
def promotion(scope: ScopeDep) -> dict[str, Any]:
    """The verdict for the suite (or `runner`); across runners, also each runner's own."""
    runners = {name: v.summary() for name, v in scope.runner_promotions().items()}
    return {
        "suite": scope.suite,
        "runner": scope.runner,
        **scope.promotion().as_dict(),
        "runners": runners,
    }


@router.get("/schedule", response_model=list[ScheduleOut])
def schedule(settings: SettingsDep) -> list[dict[str, Any]]:
    """Each configured suite's cron and next run (the stored job's, once a scheduler ran)."""

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


WRITE = {
    401: {"model": Problem, "description": "missing or wrong bearer token"},
    403: {"model": Problem, "description": "the server has no TRACKER_TOKEN: writes are off"},
}


@router.post(
    "/suites/{suite}/runs",
    status_code=201,
    response_model=RunDetailOut,
    responses={
        **WRITE,
        400: {"model": Problem, "description": "the file or a field is not valid: the reason"},
        413: {"model": Problem, "description": "the body is larger than `upload_max_mb`"},
    },
)
def upload(
    request: Request,
    suite: SuiteName,
    session: SessionDep,
    settings: SettingsDep,
    file: Annotated[
        UploadFile,
        File(
            description="reportlog JSONL (.gz ok), JUnit XML or a zip; not empty",
            json_schema_extra={"minLength": 1},  # an empty file is a 400, and the schema says so
        ),
    ],
    runner: Annotated[str, Form(min_length=1, max_length=100)],
    commit: Annotated[str | None, Form(max_length=100)] = None,
    started_at: Annotated[datetime | None, Form(description="ISO-8601 with offset")] = None,
) -> dict[str, Any]:
    """Store a results file as a run. A plain `def`: the parse runs in a worker thread, never on
    the event loop that answers everyone else."""
    name = Path(file.filename or "upload").name[:100]
    try:
        if started_at is not None and started_at.tzinfo is None:
            raise IngestError("started_at needs a time zone offset")
        file.file.seek(0)
        record = load_run(
            Path(name),
            suite=suite,
            runner=runner,
            commit=commit,
            started_at=started_at,
            stream=file.file,
        )
    except IngestError as exc:
        raise HTTPException(400, str(exc)) from None
    saved = store.save_run(session, record)
    request.app.state.after_runs.submit(alerts.after_run, settings, saved.id)
    return queries.run_detail(session, saved.id, limit=PAGE_MAX)


class PushedOut(BaseModel):
    id: int = Field(description="the run's id on this server")
    created: bool = Field(description="false: the run was stored by an earlier push")
    status: str


@router.post(
    "/runs",
    status_code=201,
    response_model=PushedOut,
    responses={
        **WRITE,
        200: {"model": PushedOut, "description": "already stored: the earlier push's run"},
        409: {"model": Problem, "description": "the origin is taken by another run"},
        400: {"model": Problem, "description": "not a valid run record: the reason"},
        413: {"model": Problem, "description": "the body is larger than `upload_max_mb`"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": f"`tracker show --json`'s shape ({RUN_FORMAT}), optionally gzipped "
            "(`Content-Encoding: gzip`)",
            "content": {
                "application/json": {
                    # what the server reads: `{}` is a 400, so the schema does not accept it
                    "schema": {"type": "object", "required": ["format", "run", "results"]}
                }
            },
        }
    },
)
async def push(request: Request, response: Response, settings: SettingsDep) -> dict[str, Any]:
    """Store a whole run pushed by a runner's tracker (`tracker push`), with its reruns, process
    order, environment and status. Idempotent: the run's store and id there are stored once."""
    body = await request.body()  # bounded by the write guard
    gzipped = request.headers.get("content-encoding", "").lower() == "gzip"
    stored = await run_in_threadpool(_store_pushed, settings, body, gzipped, response)
    if stored["created"]:
        request.app.state.after_runs.submit(alerts.after_run, settings, stored["id"])
    return stored


def _store_pushed(
    settings: Settings, body: bytes, gzipped: bool, response: Response
) -> dict[str, Any]:
    try:
        pushed = read_pushed(decode(body, gzipped, settings.upload_max_mb))
    except InvalidRecord as exc:
        raise HTTPException(400, str(exc)) from None
    with session_scope(settings.database_url) as session:
        try:
            run, created = store.save_pushed(
                session, pushed.record, pushed.origin, pushed.origin_run, pushed.host
            )
        except store.OriginConflict as exc:
            raise HTTPException(409, str(exc)) from None
    if not created:
        response.status_code = 200
    return {"id": run.id, "created": created, "status": run.status}


class TriggerOut(BaseModel):
    request_id: int
    suite: str
    runner: str
    state: str


@router.post(
    "/suites/{suite}/trigger",
    status_code=202,
    response_model=TriggerOut,
    responses={
        **WRITE,
        404: {"model": Problem, "description": "no such suite in the server's config"},
        409: {"model": Problem, "description": "the suite is already running or queued"},
    },
)
def trigger(suite: SuiteName, session: SessionDep, settings: SettingsDep) -> dict[str, Any]:
    """Queue a run of a configured suite for the scheduler; refused (409) while one runs or
    waits."""
    try:
        settings.suite(suite)
    except ConfigError as exc:
        raise HTTPException(404, str(exc)) from None
    runner = settings.runner.name
    busy = HTTPException(409, f"{suite} is already running or queued on {runner}")
    if queries.busy(session, suite, runner):
        raise busy
    try:
        request = store.queue_request(session, suite, runner)
    except store.Busy:  # another worker queued one since the check
        raise busy from None
    return {"request_id": request.id, "suite": suite, "runner": runner, "state": request.state}
