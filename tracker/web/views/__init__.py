"""The pages, one module each: `data` (the page's one dict, also its JSON) and its route."""

from tracker.web.views import (
    cluster,
    flaky,
    grid,
    kernel,
    lists,
    overview,
    promotion,
    run,
    runner,
    search,
    suite,
    test,
    trends,
)

PAGES = (overview, suite, trends, grid, lists, run, runner, search, test, flaky, promotion)
routers = [m.router for m in (*PAGES, kernel, cluster)]
