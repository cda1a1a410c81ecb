"""A suite's trends night by night: test pass rate, failing and flaky tests, run duration and
green runs, and each kernel's pass rate, over the window and for one runner or all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tracker.analysis.report import Scope
from tracker.analysis.trends import Night
from tracker.web import svg
from tracker.web.deps import ScopeDep
from tracker.web.render import page
from tracker.words import seconds

router = APIRouter(include_in_schema=False)


def data(scope: Scope) -> dict[str, Any]:
    nights = scope.nights()
    by_kernel = scope.kernel_trend()
    kernels = []
    for kernel in sorted(by_kernel):
        per_run = by_kernel[kernel]
        rates = [(n.run_id, *per_run[n.run_id]) for n in nights if n.run_id in per_run]
        passed, ran = sum(p for _, p, _ in rates), sum(r for *_, r in rates)
        last = rates[-1] if rates else None
        kernels.append(
            {
                "kernel": kernel,
                "pass_rate": passed / ran if ran else None,
                "last_rate": last[1] / last[2] if last and last[2] else None,
                "runs": [{"run_id": r, "passed": p, "ran": n} for r, p, n in rates],
            }
        )
    # the kernels in trouble first: the lowest pass rate over the window, then by name
    kernels.sort(key=lambda k: (k["pass_rate"] if k["pass_rate"] is not None else 2, k["kernel"]))
    return {
        "suite": scope.suite,
        "runner": scope.runner,
        "runners": scope.runners(),
        "days": scope.days,
        "nights": nights,
        "daily": scope.daily(scope.days),
        "kernels": kernels,
    }


@router.get("/suites/{suite}/trends")
def trends_page(request: Request, scope: ScopeDep) -> Response:
    found = data(scope)
    nights = found["nights"]
    longest = max((n.seconds or 0 for n in nights), default=0)
    labels = svg.run_labels([(n.run_id, n.started_at) for n in nights])

    def series(value: Callable[[Night], float | None]) -> list[tuple[str, float | None]]:
        return [(x, value(n)) for x, n in zip(labels, nights, strict=True)]

    charts = {
        "pass_rate": svg.line_chart(
            series(lambda n: None if n.pass_rate is None else 100 * n.pass_rate),
            y_max=100,
            y_format="{:.0f}%".format,
        ),
        "failing": svg.line_chart(series(lambda n: n.failing)),
        "flaky": svg.line_chart(series(lambda n: n.flaky)),
        "duration": svg.line_chart(
            series(lambda n: n.seconds),
            y_format=seconds,
            unit=60 if longest >= 120 else 1,
        ),
        "green": svg.line_chart(
            [
                (d.day.strftime("%m-%d"), None if d.green_rate is None else 100 * d.green_rate)
                for d in found["daily"]
            ],
            y_max=100,
            y_format="{:.0f}%".format,
        ),
    }
    order = [n.run_id for n in nights]
    sparks = {}
    for k in found["kernels"]:
        rate = {r["run_id"]: r["passed"] / r["ran"] for r in k["runs"] if r["ran"]}
        sparks[k["kernel"]] = svg.sparkline([rate.get(i) for i in order])
    by_day = svg.one_a_day([n.started_at for n in nights])
    view = {"charts": charts, "sparks": sparks, "by_day": by_day}
    return page(request, "trends.html", found, view, "nights")
