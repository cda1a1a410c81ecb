"""The pages, one module each: `data` (the page's one dict, also its JSON) and its route."""

from tracker.web.views import cluster, flaky, kernel, overview, promotion, run, suite, test

routers = [m.router for m in (overview, suite, run, test, flaky, promotion, kernel, cluster)]
