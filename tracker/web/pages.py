"""HTML pages, one view per page; each reads through `queries` and the analysis `Scope`."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from tracker import push, quarantine, queries
from tracker.analysis.changes import compare_runners, run_changes
from tracker.analysis.clusters import signature
from tracker.analysis.flaky import HISTORY_RUNS
from tracker.analysis.kernels import ICONS, KERNEL_FAILING, markdown
from tracker.analysis.report import Scope
from tracker.analysis.stats import wilson
from tracker.records import (
    FAILING,
    FINAL_OUTCOMES,
    RUN_INFRA,
    RUN_RUNNING,
    status_text,
)
from tracker.runner.artifacts import outputs
from tracker.schedule import next_runs
from tracker.validate import MAX_ID
from tracker.web import svg, tables
from tracker.web.deps import RowId, SessionDep, SettingsDep, path_segment, templates
from tracker.words import seconds

router = APIRouter(include_in_schema=False)
PAGE = 200  # results per page of a run, what failed first (the API pages by 1,000)


def render(request: Request, name: str, **context: Any) -> HTMLResponse:
    params = dict(request.query_params)  # for links that keep the view: sort, filter, window
    return templates.TemplateResponse(
        request,
        name,
        {
            "svg": svg,
            "icons": ICONS,
            "params": params,
            "tz": request.app.state.settings.timezone,
            **context,
        },
    )


def _run_square(run: dict[str, Any]) -> dict[str, Any]:
    counts = ", ".join(f"{k} {v}" for k, v in run["counts"].items())
    status = status_text(run["status"], run["quarantined_failures"])
    return {
        "status": run["status"],
        "href": f"/runs/{run['id']}",
        "title": f"run {run['id']} {status} {run['started_at'][:16]} {counts}",
    }


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, session: SessionDep, settings: SettingsDep) -> HTMLResponse:

    upcoming = next_runs(settings)
    cards = []
    for suite, runner in queries.suite_runner_pairs(session):
        scope = Scope(session, settings, suite, runner)
        runs = queries.list_runs(session, suite, runner, 30)
        verdict = scope.promotion()
        cards.append(
            {
                "suite": suite,
                "runner": runner,
                "last": runs[0] if runs else None,
                "verdict": verdict,
                "days_left": (verdict.earliest - verdict.today).days if verdict.earliest else None,
                "rates": [scope.rates(d) for d in settings.analysis.windows],
                "strip": svg.strip([_run_square(r) for r in reversed(runs)]),
                "flaky": len(verdict.unquarantined_flaky),
                "failing_kernels": [
                    k.kernel for k in scope.kernels() if k.status == KERNEL_FAILING
                ],
                "next_run": upcoming.get(suite) if runner == settings.runner.name else None,
            }
        )
    # a runner host's own dashboard says when its runs are not reaching the central one
    unsent = push.waiting(session) if settings.push.url else []
    return render(request, "overview.html", cards=cards, unsent=unsent, push_url=settings.push.url)


@router.get("/suites/{suite}", response_class=HTMLResponse)
def suite_page(
    request: Request,
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    window: int | None = Query(None, alias="days", ge=1, le=365),
) -> HTMLResponse:
    scope = Scope(session, settings, suite, days=window)
    days = window or 30  # the trend: the chosen window, else a month
    trend = [
        (d.day.strftime("%m-%d"), None if d.green_rate is None else 100 * d.green_rate)
        for d in scope.daily(days)
    ]
    recent = queries.list_runs(session, suite, None, 50)
    durations = [
        (r["started_at"][5:16].replace("T", " "), r["duration"]) for r in reversed(recent[:30])
    ]
    last = next((r for r in recent if r["status"] not in (RUN_RUNNING, RUN_INFRA)), None)
    runners = sorted(r for s, r in queries.suite_runner_pairs(session) if s == suite)
    return render(
        request,
        "suite.html",
        cascade_min=settings.analysis.cascade_min,
        verdict=Scope(session, settings, suite).promotion(),  # the criterion's own window
        runners=runners,
        comparison=compare_runners(session, settings, suite, runners, window),
        history_runs=HISTORY_RUNS,
        suite=suite,
        trend=svg.line_chart(trend, y_max=100, y_format="{:.0f}%".format),
        duration_chart=svg.line_chart(durations, y_format=seconds),
        runs=recent,
        rates=[scope.rates(d) for d in sorted({*settings.analysis.windows, days})],
        kernels=scope.kernels(),
        flaky=scope.flaky()[:10],
        clusters=scope.clusters()[:10],
        slowest=queries.slowest(session, last["id"]) if last else [],
        days=scope.days,
    )


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(
    request: Request,
    run_id: RowId,
    session: SessionDep,
    outcome: str | None = Query(None, pattern=f"^({'|'.join(FINAL_OUTCOMES)})?$"),
    kernel: str | None = Query(None, max_length=200),
    q: str | None = tables.TextQ,
    sort: str | None = tables.SortQ,
    offset: int = Query(0, ge=0, le=10_000_000),
    against: int | None = Query(None, ge=1, le=MAX_ID, description="compare with this run"),
) -> HTMLResponse:
    run = queries.run_info(session, run_id)
    failures = queries.failing_attempts(session, run_id)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in failures:
        groups[signature(f["message"])].append(f)
    clusters = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    times = queries.run_attempt_times(session, run_id)
    base = datetime.fromisoformat(run["started_at"]).replace(tzinfo=None)
    if times and (run["source"] != "runner" or times[0]["started_at"].replace(tzinfo=None) < base):
        base = times[0]["started_at"].replace(tzinfo=None)  # a file's times, not its stated start
    for a in times:  # seconds from the run's start
        a["offset"] = max(0.0, (a["started_at"].replace(tzinfo=None) - base).total_seconds())
    longest = sorted(times, key=lambda a: -a["duration"])[:12]
    changes = run_changes(session, run, against)
    results, total = queries.run_results(
        session,
        run_id,
        outcome=outcome,
        kernel=kernel,
        text=q,
        sort=sort if sort in queries.RESULT_ORDER else "problems",
        limit=PAGE,
        offset=offset,
    )
    return render(
        request,
        "run.html",
        run=run,
        clusters=clusters,
        changes=changes,
        results=results,
        total_results=total,
        offset=offset,
        page=PAGE,
        outcomes=[o for o in FINAL_OUTCOMES if run["counts"].get(o)],
        kernels=queries.run_kernels(session, run_id),
        outcome=outcome,
        kernel=kernel,
        outputs=outputs(run["artifacts"]),
        ids=queries.test_ids(
            session,
            run["suite"],
            [
                n
                for k in ("new_failures", "fixed", "new_flaky")
                for n in (changes or {}).get(k, [])[:20]
            ],
        ),
        slots=svg.timeline(times, {id(a) for a in longest}),
        longest=longest,
    )


@router.get("/tests/{test_id}", response_class=HTMLResponse)
def test_page(
    request: Request, test_id: RowId, session: SessionDep, settings: SettingsDep
) -> HTMLResponse:
    info = queries.case_info(session, test_id)
    past = queries.case_history(session, test_id)
    scope = Scope(session, settings, info["suite"])
    stats = scope.stats().get(test_id)
    quarantined = next(
        (q for q in quarantine.listing(session, info["suite"]) if q["nodeid"] == info["nodeid"]),
        None,
    )
    squares = [
        {
            "status": h["outcome"],
            "href": f"/runs/{h['run_id']}",
            "title": f"run {h['run_id']} {h['outcome']}{' (quarantined)' * h['quarantined']} "
            f"{h['duration']:.2f}s "
            f"commit {h['commit'] or '-'} {h['started_at']:%Y-%m-%d %H:%M}",
        }
        for h in past
    ]
    interval = wilson(stats.runs - stats.failures, stats.runs) if stats and stats.runs else None
    search = queries.investigations(session, [test_id]).get(test_id)
    bisected = queries.investigations(session, [test_id], "bisect").get(test_id)
    names = [*(stats.ran_before if stats else []), *(search["culprits"] if search else [])]
    ids = queries.test_ids(session, info["suite"], names)
    return render(
        request,
        "test.html",
        test=info,
        history_strip=svg.strip(squares),
        stats=stats,
        interval=interval,
        failures=[h for h in reversed(past) if h["first"] in FAILING][:10],
        quarantined=quarantined,
        days=scope.days,
        ids=ids,
        search=search,
        bisected=bisected,
    )


@router.get("/suites/{suite}/flaky", response_class=HTMLResponse)
def flaky_page(
    request: Request,
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    days: int | None = tables.DaysQ,
    q: str | None = tables.TextQ,
    sort: str | None = tables.SortQ,
) -> HTMLResponse:
    scope = Scope(session, settings, suite, days=days)
    deselect = "\n".join(quarantine.deselect_lines(quarantine.active(session, suite)))
    everything = scope.flaky()
    flaky = tables.sort_filter(everything, q, sort, FLAKY_COLUMNS, lambda f: f.nodeid)
    broken = scope.broken()
    ids = [f.test_id for f in [*flaky, *broken]]
    return render(
        request,
        "flaky.html",
        suite=suite,
        flaky=flaky,
        in_window=len(everything),
        q=q,
        broken=broken,
        deselect=deselect,
        days=scope.days,
        polluters=queries.investigations(session, ids),
        bisected=queries.investigations(session, ids, "bisect"),
    )


FLAKY_COLUMNS = {
    "test": lambda f: f.nodeid,
    "failed": lambda f: (f.failures, f.runs),
    "rate": lambda f: f.failure_interval[0],
    "flips": lambda f: f.flip_rate,
}


@router.get("/suites/{suite}/promotion", response_class=HTMLResponse)
def promotion_page(
    request: Request,
    suite: str,
    session: SessionDep,
    settings: SettingsDep,
    runner: str | None = Query(None, max_length=200),
) -> HTMLResponse:
    scope = Scope(session, settings, suite, runner)
    verdict = scope.promotion()
    base = (settings.public_url or str(request.base_url)).rstrip("/")
    badge_md = "\n".join(
        f"![{m}]({base}/badge/{path_segment(suite)}.svg?metric={m})"
        for m in ("status", "runs", "pass-rate", "promotion")
    )
    return render(
        request,
        "promotion.html",
        suite=suite,
        runner=runner,
        verdict=verdict,
        per_runner=scope.runner_promotions(),
        rates=scope.rates(verdict.window_days),
        kernels_md=markdown(
            scope.kernels(),
            scope.days,
            f"{settings.public_url.rstrip('/')}/suites/{path_segment(suite)}"
            if settings.public_url
            else None,
        ),
        badge_md=badge_md,
        runs=Counter(verdict.counts),
        ids=queries.test_ids(session, suite, verdict.unquarantined_flaky),
    )
