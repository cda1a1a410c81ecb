"""A test: its history, verdict and evidence, polluter search and first bad commit, and its
recent failures. The API's `/tests/{id}` is this page's data."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from tracker.analysis.issue import test_report
from tracker.analysis.testcase import test_data
from tracker.records import NOT_RUN, SKIPPED
from tracker.web import svg
from tracker.web.deps import RowId, SessionDep, SettingsDep
from tracker.web.render import page
from tracker.words import seconds, spoken

router = APIRouter(include_in_schema=False)
NO_TIME = (NOT_RUN, SKIPPED)  # a time that is not the test's: it did not run


@router.get("/tests/{test_id}")
def test_page(
    request: Request, test_id: RowId, session: SessionDep, settings: SettingsDep
) -> Response:
    found = test_data(session, settings, test_id)
    squares = [
        {
            "status": h["outcome"],
            "href": f"/runs/{h['run_id']}",
            "title": f"run {h['run_id']} {spoken(h['outcome'])}"
            f"{' (quarantined)' * h['quarantined']} "
            f"{h['duration']:.2f}s "
            f"commit {h['commit'] or '-'} {h['started_at']:%Y-%m-%d %H:%M}",
        }
        for h in found["history"]
    ]
    timed = [h for h in found["history"] if h["outcome"] not in NO_TIME]
    longest = max((h["duration"] for h in timed), default=0)
    labels = svg.run_labels([(h["run_id"], h["started_at"]) for h in timed])
    durations = svg.line_chart(
        [(x, h["duration"]) for x, h in zip(labels, timed, strict=True)],
        y_format=seconds,
        unit=60 if longest >= 120 else 1,
    )
    view = {"history_strip": svg.strip(squares), "durations": durations if timed else None}
    return page(request, "test.html", found, view, "history")


@router.get("/tests/{test_id}/report.md")
def test_report_page(test_id: RowId, session: SessionDep, settings: SettingsDep) -> Response:
    """The issue-ready Markdown `tracker report` prints, to copy into an issue upstream."""
    return PlainTextResponse(
        test_report(session, settings, test_id), media_type="text/markdown; charset=utf-8"
    )
