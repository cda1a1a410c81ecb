"""A run: what changed since the one before, its failures by cause, its slots' timeline and its
results, a page at a time."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlmodel import Session

from tracker import queries
from tracker.analysis.changes import run_changes
from tracker.analysis.clusters import signature
from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.records import FINAL_OUTCOMES
from tracker.runner.artifacts import outputs
from tracker.validate import MAX_ID
from tracker.web import svg, tables
from tracker.web.deps import RowId, SessionDep, SettingsDep
from tracker.web.render import page

router = APIRouter(include_in_schema=False)
PAGE = 200  # results per page of a run, what failed first (the API pages by 1,000)


def timed(session: Session, run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's attempts with their start, each with `offset`: seconds from the run's start."""
    times = queries.run_attempt_times(session, run["id"])
    base = datetime.fromisoformat(run["started_at"]).replace(tzinfo=None)
    if times and (run["source"] != "runner" or times[0]["started_at"].replace(tzinfo=None) < base):
        base = times[0]["started_at"].replace(tzinfo=None)  # a file's times, not its stated start
    for a in times:
        a["offset"] = max(0.0, (a["started_at"].replace(tzinfo=None) - base).total_seconds())
    return times


def _results(
    session: Session, run_id: int, filters: dict[str, Any], limit: int
) -> tuple[list[dict[str, Any]], int]:
    """The run's results that the filters keep, `limit` from the filters' offset."""
    sort = filters.get("sort")
    return queries.run_results(
        session,
        run_id,
        outcome=filters.get("outcome"),
        kernel=filters.get("kernel"),
        text=filters.get("q"),
        sort=sort if sort in queries.RESULT_ORDER else "problems",
        limit=limit,
        offset=filters.get("offset", 0),
    )


def data(
    session: Session,
    settings: Settings,
    run: dict[str, Any],
    times: list[dict[str, Any]],
    filters: dict[str, Any],
    against: int | None,
) -> dict[str, Any]:
    run_id = run["id"]
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in queries.failing_attempts(session, run_id):
        groups[signature(f["message"])].append(f)
    changes = run_changes(session, run, against)
    results, total = _results(session, run_id, filters, PAGE)
    # the page links the first 20 of each
    shown = ("new_failures", "fixed", "no_result", "new_flaky")
    named = [n for k in shown for n in (changes or {}).get(k, [])[:20]]
    alert = queries.run_alert(session, run_id)
    named += [n for e in (alert or {}).get("events", []) for n in e["tests"]]
    return {
        "run": run,
        "changes": changes,
        "alert": alert,
        "clusters": sorted(groups.items(), key=lambda kv: -len(kv[1])),
        "longest": sorted(times, key=lambda a: -a["duration"])[:12],
        "outputs": outputs(run["artifacts"]),
        "outcomes": [o for o in FINAL_OUTCOMES if run["counts"].get(o)],
        "kernels": queries.run_kernels(session, run_id),
        "outcome": filters.get("outcome"),
        "kernel": filters.get("kernel"),
        "results": results,
        "total_results": total,
        "offset": filters.get("offset", 0),
        "page": PAGE,
        "ids": queries.test_ids(session, run["suite"], named),
        "recent": Scope(session, settings, run["suite"], run["runner"]).recent(
            [r["test_id"] for r in results]
        ),
    }


@router.get("/runs/{run_id}")
def run_page(
    request: Request,
    run_id: RowId,
    session: SessionDep,
    settings: SettingsDep,
    outcome: str | None = Query(None, pattern=f"^({'|'.join(FINAL_OUTCOMES)})?$"),
    kernel: str | None = Query(None, max_length=200),
    q: str | None = tables.TextQ,
    sort: str | None = tables.SortQ,
    offset: int = Query(0, ge=0, le=10_000_000),
    against: int | None = Query(None, ge=1, le=MAX_ID, description="compare with this run"),
) -> Response:
    run = queries.run_info(session, run_id)
    times = timed(session, run)
    filters = {"outcome": outcome, "kernel": kernel, "q": q, "sort": sort, "offset": offset}
    found = data(session, settings, run, times, filters, against)
    slots = svg.timeline(times, {id(a) for a in found["longest"]})

    def every_result() -> Iterator[dict[str, Any]]:  # the CSV: all of them, a page at a time
        for start in range(0, found["total_results"], 1000):
            yield from _results(session, run_id, {**filters, "offset": start}, 1000)[0]

    return page(request, "run.html", found, {"slots": slots}, "results", every_result)
