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
    suite,
    test,
    trends,
)

routers = [
    m.router
    for m in (overview, suite, trends, grid, lists, run, test, flaky, promotion, kernel, cluster)
]
