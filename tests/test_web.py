"""Every route through the ASGI app on a database filled by real ingests and a real run:
status codes, content types, JSON shapes, escaping, upload auth and bad files, badges."""

from __future__ import annotations

import gzip
import re
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from helpers import DATA, HOSTILE, fill, junit, make_pg_database, settings_for

from tracker.db import get_engine
from tracker.web.app import create_app

TOKEN = "s3cret-token-for-tests-0123456789"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]
)
def filled(request, tmp_path_factory):
    """Every page on a database a maintainer would have, once on SQLite, once on PostgreSQL."""
    tmp = tmp_path_factory.mktemp("web")
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'web.db'}"
    else:
        url = make_pg_database(request.getfixturevalue("pg_server"))
    settings = settings_for(tmp, url, token=TOKEN)
    fill(settings, tmp)
    yield settings
    get_engine(url).dispose()


@pytest.fixture
def client(filled):
    return TestClient(create_app(filled))


PAGES = [
    "/",
    "/suites/transformers",
    "/suites/transformers/flaky",
    "/suites/transformers/promotion",
    "/runs/1",
    "/runs/5",
    "/runs/6",
    "/tests/1",
    "/runs/6?outcome=failed",
    "/runs/6?kernel=ids",
    "/runs/6?q=test_&sort=-duration",
    "/suites/transformers?days=7",
    "/suites/transformers/flaky?days=90&q=mlp&sort=flips",
    "/suites/transformers/kernels/mlp",
    "/suites/transformers/kernels/mlp?days=30&sort=-rate&q=falcon",
    "/suites/transformers/trends",
    "/suites/transformers/trends?days=7&runner=a2-910b4",
    "/suites/transformers/grid",
    "/suites/transformers/grid?runner=gha-910b4",
    "/suites/transformers/kernels",
    "/suites/transformers/clusters?days=90",
    "/runners/a2-910b4",
    "/search?q=rope",
    "/search?q=OutOfResources&suite=transformers&runner=a2-910b4&since=2020-01-01",
    "/docs",
]


@pytest.mark.parametrize("path", PAGES)
def test_pages(client, path):
    r = client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "cdn" not in r.text.lower() and "https://" not in r.text


@pytest.mark.parametrize("path", [p for p in PAGES if p != "/docs"])
def test_every_page_is_also_its_data_as_json(client, path):
    """One dict makes the page and its JSON: what the page counts, the JSON has."""
    joiner = "&" if "?" in path else "?"
    r = client.get(f"{path}{joiner}format=json")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert isinstance(r.json(), dict) and r.json()
    assert client.get(f"{path}{joiner}format=xml").status_code == 400


def test_a_page_and_its_json_show_the_same_numbers(client):
    suite = client.get("/suites/transformers?format=json").json()
    page = client.get("/suites/transformers").text
    for k in suite["kernels"]:
        assert f">{k['tests']}<" in page
    run = client.get("/runs/6?format=json").json()
    assert run["total_results"] == sum(run["run"]["counts"].values())
    assert f"#{run['run']['id']}" in client.get("/runs/6").text
    promo = client.get("/suites/transformers/promotion?format=json").json()
    page = client.get("/suites/transformers/promotion").text
    assert promo["verdict"]["headline"] in page
    rate = next(p for p in promo["verdict"]["parts"] if p["name"].startswith("run success"))
    assert f'<td class="num">{100 * rate["measured"]:.1f}%</td>' in page  # as its target reads


def test_quarantined_failures_are_in_plain_sight(client):
    run = client.get("/runs/4").text  # passed only because the rope failure is quarantined
    assert re.search(r"passed</span> <span class=\"tag\"[^>]*>1 quarantined failure<", run)
    row = re.search(r"test_rope\[fp32\]</a></td><td><a [^>]*>rope</a></td><td>(.*?)</td>", run)
    assert row and "quarantined" in row.group(1)
    overview = client.get("/").text
    assert "Green runs" in overview and "Test results passed" in overview
    assert re.search(r"\d+/<wbr>\d+ results</small>", overview)  # results, not tests
    assert "Promotion criterion: Not met: " in overview
    assert "Promotion criterion: Not met: " in client.get("/suites/transformers").text
    cards = overview.split('class="card"')[1:]
    card = next(c for c in cards if ">a2-910b4</a>" in c)
    assert "1 quarantined failure" in card
    assert "1 quarantined failure" in client.get("/suites/transformers").text
    api = client.get("/api/v1/runs/4").json()
    assert api["run"]["status"] == "passed" and api["run"]["quarantined_failures"] == 1
    assert [r["nodeid"] for r in api["results"] if r["quarantined"]] == [
        "test/transformers/test_rope.py::test_rope[fp32]"
    ]


def test_hostile_text_is_escaped(client):
    evil_id = next(
        t for t in client.get("/api/v1/runs/2").json()["results"] if "test_evil" in t["nodeid"]
    )["test_id"]
    for path in ("/runs/2", f"/tests/{evil_id}", "/suites/transformers", "/runs/6"):
        html = client.get(path).text
        assert HOSTILE not in html and "<script>" not in html
    assert "&lt;script&gt;alert(" in client.get("/runs/2").text
    assert "中文" in client.get("/runs/2").text


@pytest.mark.parametrize(
    "path",
    ["/runs/999", "/tests/999", "/suites/nope", "/suites/nope/flaky", "/suites/nope/promotion"],
)
def test_missing_pages_are_404(client, path):
    r = client.get(path)
    assert r.status_code == 404 and "text/html" in r.headers["content-type"]


def test_api_shapes(client):
    suites = client.get("/api/v1/suites").json()
    assert {s["name"] for s in suites} == {"transformers", "realities"}
    runs = client.get("/api/v1/suites/transformers/runs", params={"runner": "a2-910b4"}).json()
    assert [r["id"] for r in runs["runs"]] == [4, 3, 2, 1]
    detail = client.get("/api/v1/runs/6").json()
    assert set(detail["run"]) >= {
        "id",
        "status",
        "suite",
        "runner",
        "commit",
        "started_at",
        "counts",
        "environment",
    }
    assert set(detail["results"][0]) == {
        "test_id",
        "nodeid",
        "kernel",
        "outcome",
        "duration",
        "quarantined",
        "attempts",
    }
    failed = client.get("/api/v1/runs/6/results", params={"outcome": "failed"}).json()
    assert [r["nodeid"] for r in failed] == ["test_outcomes.py::test_fail"]
    flaky = client.get("/api/v1/suites/transformers/flaky").json()
    assert [f["nodeid"] for f in flaky["flaky"]] == [
        "test/transformers/test_mlp.py::test_falcon[bf16]"
    ]
    (falcon,) = flaky["flaky"]  # the suite page names what its counts count
    said = f"first attempt failed in {falcon['failures']} of {falcon['runs']} runs"
    assert said in " ".join(client.get("/suites/transformers").text.split())
    kernels = client.get("/api/v1/suites/transformers/kernels").json()["kernels"]
    rope = next(k for k in kernels if k["kernel"] == "rope")
    assert (rope["status"], rope["quarantined"]) == ("stable", 1)  # its failure is quarantined
    promo = client.get("/api/v1/suites/transformers/promotion").json()
    assert promo["met"] is False and len(promo["parts"]) == 3
    test = client.get("/api/v1/tests/1").json()
    assert {"test", "stats", "history", "polluter", "bisect"} <= set(test)
    assert client.get("/tests/1?format=json").json() == test  # the page's own data
    stats = test["stats"]  # first attempts: a flaky test passing on a rerun is no pass here
    page = " ".join(client.get("/tests/1").text.split())
    assert f"Its first attempt passed in {stats['runs'] - stats['failures']} of " in page
    assert client.get("/api/v1/suites/transformers/clusters").json()["clusters"][0]["size"] >= 1
    assert client.get("/api/v1/schedule").json() == []
    assert client.get("/api/v1/runs/999").status_code == 404
    assert client.get("/healthz").json()["status"] == "ok"
    assert "/api/v1/suites/{suite}/runs" in client.get("/openapi.json").json()["paths"]


def test_badges(client):
    r = client.get("/badge/transformers.svg")
    assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml"
    assert r.headers["cache-control"] == "no-cache" and r.headers["etag"]
    assert "failed" in r.text
    again = client.get("/badge/transformers.svg", headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304
    for metric, message in (
        ("status", "failed"),
        ("runs", "20% of 5 runs"),  # the last a2 night passed thanks to the quarantine
        ("green-runs", "20% of 5 runs"),  # the old name of the same number
        ("pass-rate", "52% of 29 results"),  # 15 first attempts passed, 14 failed
        ("promotion", "not met: 1/5 runs green"),
    ):
        js = client.get("/badge/transformers.json", params={"metric": metric}).json()
        assert js["schemaVersion"] == 1 and set(js) == {
            "schemaVersion",
            "label",
            "message",
            "color",
            "cacheSeconds",
        }
        assert message in js["message"]
    by_runner = client.get(
        "/badge/transformers.json", params={"runner": "gha-910b4", "metric": "pass-rate"}
    ).json()
    assert (by_runner["label"], by_runner["message"]) == ("passed results 14d", "31% of 13 results")
    promotion = client.get("/badge/transformers.json", params={"metric": "promotion"}).json()
    assert promotion["color"] == client.get("/badge/transformers.json").json()["color"]  # red
    runs = client.get("/badge/transformers.json", params={"runner": "gha-910b4", "metric": "runs"})
    assert (runs.json()["label"], runs.json()["message"]) == ("green runs 14d", "0% of 1 runs")
    bogus = client.get("/badge/transformers.svg", params={"metric": "bogus"})
    assert bogus.status_code == 422 and bogus.headers["content-type"] == "image/svg+xml"
    assert "invalid metric" in bogus.text  # an image that names the problem, not a JSON error
    assert client.get("/badge/nope.svg").status_code == 404


def upload(
    client,
    content: bytes,
    token: str | None = TOKEN,
    name="results.jsonl",
    suite="uploaded",
    **form,
):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = {"runner": "gha-910b4", **form}
    return client.post(
        f"/api/v1/suites/{suite}/runs", headers=headers, data=data, files={"file": (name, content)}
    )


def test_upload(client):
    r = upload(
        client,
        gzip.compress((DATA / "reportlog_complete.jsonl").read_bytes()),
        name="log.jsonl.gz",
        commit="abc",
        started_at="2026-11-29T22:00:00+08:00",
    )
    assert r.status_code == 201, r.text
    run = r.json()["run"]
    assert (run["suite"], run["runner"], run["commit"]) == ("uploaded", "gha-910b4", "abc")
    assert run["started_at"] == "2026-11-29T14:00:00Z"
    assert len(r.json()["results"]) == 16


@pytest.mark.parametrize(
    ("token", "status"),
    [(None, 401), ("wrong-token-wrong-token", 401)],
)
def test_upload_needs_the_token(client, token, status):
    r = upload(client, (DATA / "junit_pytest.xml").read_bytes(), token=token)
    assert r.status_code == status


def test_upload_refused_without_a_server_token(tmp_path):
    client = TestClient(create_app(settings_for(tmp_path)))
    r = upload(client, (DATA / "junit_pytest.xml").read_bytes())
    assert r.status_code == 403 and "TRACKER_TOKEN" in r.json()["detail"]


@pytest.mark.parametrize(
    ("content", "status", "detail"),
    [
        (b"<testsuite><testcase name='x'>", 400, "not well-formed XML"),
        (b"\x00\x01\x02" * 100, 400, "binary file"),
        (b'<!DOCTYPE x [<!ENTITY a "aaaa">]><testsuite/>', 400, "forbidden construct"),
        (b"", 400, "is empty"),
    ],
)
def test_bad_uploads_store_nothing(client, content, status, detail):
    before = client.get("/api/v1/suites").json()  # every suite's last run, whatever ran before
    r = upload(client, content)
    assert r.status_code == status and detail in r.json()["detail"]
    assert client.get("/api/v1/suites").json() == before


def test_upload_too_large(client):
    r = client.post(
        "/api/v1/suites/uploaded/runs",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Length": str(10 * 1024**3)},
        content=b"x",
    )
    assert r.status_code == 413


def test_upload_form_validation(client):
    r = upload(client, b"<testsuite/>", runner="")
    assert r.status_code == 422
    r = upload(client, (DATA / "junit_pytest.xml").read_bytes(), started_at="2026-11-29T22:00:00")
    assert r.status_code == 400 and "offset" in r.json()["detail"]


def test_strip_links_every_run(client):
    html = client.get("/").text
    linked = set(re.findall(r'<a href="/runs/(\d+)"><rect', html))
    assert linked >= {"1", "2", "3", "4", "5", "6"}


def test_badges_follow_new_runs_through_the_cache(client):
    from helpers import junit

    def send(outcome: str) -> None:
        xml = junit({"t.py::a": (outcome, "boom" if outcome == "failed" else None)})
        r = upload(client, xml.encode(), name="j.xml", suite="fresh", runner="r")
        assert r.status_code == 201

    send("passed")
    for _ in range(2):  # the second answer comes from the cache
        assert client.get("/badge/fresh.json").json()["message"] == "passed"
    tag = client.get("/badge/fresh.svg").headers["etag"]
    send("failed")
    assert client.get("/badge/fresh.json").json()["message"] == "failed"
    assert client.get("/badge/fresh.svg", headers={"If-None-Match": tag}).status_code == 200
    rate = client.get("/badge/fresh.json", params={"metric": "pass-rate"}).json()["message"]
    assert rate == "50% of 2 results"
    assert client.get("/badge/fresh.json", params={"metric": "runs"}).json()["message"] == (
        "50% of 2 runs"
    )


def test_a_run_page_counts_with_thousands_separators(client):
    from helpers import junit

    xml = junit({f"t.py::test_{i}": ("passed", None) for i in range(1000)})
    r = upload(client, xml.encode(), name="j.xml", suite="thousands", runner="r")
    assert r.status_code == 201
    page = client.get(f"/runs/{r.json()['run']['id']}").text
    assert re.search(r"Tests by outcome.*passed 1,000<", page)


def test_pages_follow_new_runs_through_the_cache(client):
    from helpers import junit

    for outcome in ("passed", "failed", "passed", "failed"):
        xml = junit({"test_k.py::flips": (outcome, "boom" if outcome == "failed" else None)})
        upload(client, xml.encode(), name="j.xml", suite="cached", runner="r")
        before = client.get("/api/v1/suites/cached/flaky").json()  # cached after this
        assert before == client.get("/api/v1/suites/cached/flaky").json()
    assert [f["nodeid"] for f in before["flaky"]] == ["test_k.py::flips"]
    xml = junit({"test_k.py::other": ("passed", None)})
    r = upload(client, xml.encode(), name="j.xml", suite="cached", runner="r")
    assert r.status_code == 201
    kernels = client.get("/api/v1/suites/cached/kernels").json()["kernels"]
    assert {k["kernel"] for k in kernels} == {"k"}
    assert sum(k["tests"] for k in kernels) == 2  # the new run is seen at once


def test_run_page_draws_each_slot_and_shows_the_output(client):
    page = client.get("/runs/6").text  # the fixture suite, run for real by the runner
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    assert title.startswith("Run 6") and len(title) < 100  # the output is not in the title
    assert "<h2>pytest output</h2>" in page
    timeline = re.search(r'<svg class="timeline".*?</svg>', page, re.S).group(0)
    assert ">w0</text>" in timeline and "idle" in timeline
    # the longest tests are drawn over the slot's busy time, linked to their test pages
    assert re.search(r'<a href="/tests/\d+"><rect [^>]*><title>test_', timeline)
    assert "The longest tests" in page
    # a run from a results file without start times has no timeline
    assert 'class="timeline"' not in client.get("/runs/1").text


@pytest.mark.parametrize(
    "path", ["/", "/healthz", "/runs/1", "/badge/transformers.svg", "/api/v1/suites"]
)
def test_head_wherever_get_is(client, path):
    got, head = client.get(path), client.head(path)
    assert head.status_code == got.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]


def test_errors_are_pages_for_people_and_json_for_programs(client):
    page = client.get("/runs/abc")
    assert page.status_code == 422 and page.headers["content-type"].startswith("text/html")
    assert "Not a valid address" in page.text and "run_id" in page.text
    missing = client.get("/no/such/page")
    assert missing.status_code == 404 and "<h1>Not found</h1>" in missing.text
    api = client.get("/api/v1/runs/abc")
    assert api.status_code == 422 and api.json()["detail"][0]["loc"] == ["path", "run_id"]
    unknown = client.get("/api/v1/suites/nosuch/runs")
    assert unknown.status_code == 404 and "no suite 'nosuch'" in unknown.json()["detail"]


def test_a_badge_for_an_unknown_suite_is_a_grey_image(client):
    image = client.get("/badge/nosuch.svg")
    assert image.status_code == 404 and image.headers["content-type"] == "image/svg+xml"
    assert "nosuch: unknown" in image.text and "#8c959f" in image.text
    shields = client.get("/badge/nosuch.json")
    assert shields.status_code == 404
    assert shields.json()["message"] == "unknown" and shields.json()["schemaVersion"] == 1


def test_badge_markdown_uses_the_public_url(filled):
    public = filled.model_copy(update={"public_url": "https://ci.example.org/stability/"})
    page = TestClient(create_app(public)).get("/suites/transformers/promotion").text
    assert "https://ci.example.org/stability/badge/transformers.svg?metric=status" in page
    assert "testserver/badge" not in page
    # the kernel table for the RFC links each kernel to its page there
    assert "| [mlp](https://ci.example.org/stability/suites/transformers/kernels/mlp) |" in page


def test_numbers_read_as_words(client):
    run = client.get("/runs/6").text
    assert re.search(r"<dt>Started</dt><dd><time[^>]*>\d{4}-\d\d-\d\d \d\d:\d\d UTC</time>", run)
    assert "0.0 s" not in run and re.search(r"\d\.\d\d s</td>", run)
    suite = client.get("/suites/realities").text
    assert "The only run" in suite or "The last" in client.get("/").text
    assert " min</text>" not in suite  # the duration chart labels in seconds when runs are short


def test_a_kernel_page_says_what_its_pass_rate_counts(client):
    """Skips are not test runs of a kernel: a kernel whose tests were all skipped (Liger's
    test_embedding on a CUDA runner) has no pass rate, and the page says why, not "0 runs"."""
    cases = {
        "test/test_embedding.py::test_embedding[a]": ("skipped", "needs an NPU"),
        "test/test_embedding.py::test_embedding[b]": ("skipped", "needs an NPU"),
        "test/test_geglu.py::test_geglu": ("passed", None),
    }
    r = upload(client, junit(cases).encode(), name="r.xml", suite="skips", runner="r")
    assert r.status_code == 201
    skipped = client.get("/suites/skips/kernels/embedding").text
    assert "2 tests; none of them passed or failed in the last 14 days" in skipped
    assert "every run skipped them" in skipped and "test run" not in skipped
    assert ">no data</span>" in skipped and "no_data" not in skipped  # a verdict in words
    test_id = re.search(r'<a href="/tests/(\d+)">test/test_embedding', skipped).group(1)
    assert "Verdict: <strong><span" in client.get(f"/tests/{test_id}").text
    ran = client.get("/suites/skips/kernels/geglu").text
    assert "over 1 test run that passed or failed in the last 14 days (skips not counted)" in ran


def test_kernel_and_cluster_pages_link_everything(client):
    suite = client.get("/suites/transformers").text
    assert 'href="/suites/transformers/kernels/mlp"' in suite
    key = re.search(r'href="/suites/transformers/clusters/([0-9a-f]{12})"', suite).group(1)
    kernel = client.get("/suites/transformers/kernels/mlp").text
    assert re.search(
        r'<a href="/tests/\d+">test/transformers/test_mlp.py::test_falcon\[bf16\]</a>', kernel
    )
    assert "/clusters/" in kernel and "OutOfResources" in kernel
    cluster = client.get(f"/suites/transformers/clusters/{key}")
    assert cluster.status_code == 200
    assert re.search(r'<a href="/runs/\d+">#\d+</a>', cluster.text)
    assert re.search(r'<a href="/tests/\d+">', cluster.text)
    assert client.get("/suites/transformers/kernels/nosuch").status_code == 404
    assert client.get("/suites/transformers/clusters/000000000000").status_code == 404
    assert client.get("/suites/transformers/flaky?days=0").status_code == 422


def test_tables_sort_and_filter_without_javascript(client):
    page = client.get("/suites/transformers/flaky?days=7").text
    assert "<strong>7 days</strong>" in page and 'href="?days=14"' in page
    results = client.get("/runs/6?q=test_order&sort=-duration").text.split('id="results"')[1]
    ids = re.findall(r'<td class="id"><a href="/tests/\d+">([^<]+)</a>', results)
    assert ids and all("test_order" in i for i in ids)
    durations = re.findall(r'<td class="num">([\d.]+) s</td></tr>', results)
    assert [float(d) for d in durations] == sorted((float(d) for d in durations), reverse=True)
    assert "sort=duration" in results  # the heading now sorts the other way
    assert "q=test_order" in results  # and keeps the filter
    assert client.get("/runs/6?sort=drop%20table").status_code == 422


def test_counts_and_lists_read_as_words(client):
    promotion = client.get("/suites/transformers/promotion").text
    assert "run(s)" not in promotion and "a night" in promotion
    assert re.search(r'<li><a href="/tests/\d+">test/transformers/test_mlp.py', promotion)
    overview = client.get("/").text
    assert "Last 1 runs" not in overview and re.search(r"The (only run|last \d+ runs)", overview)
    titles = re.findall(r"<title>(run \d+ [^<]*)</title>", overview)  # each run's square, in words
    assert titles and not any("_" in t for t in titles)
    assert any(re.search(r"run \d+ failed \S+ \d+ failed, \d+ passed", t) for t in titles)
    flaky = client.get("/suites/transformers/flaky").text
    assert not re.search(r'<td class="num">\d\.\d\d</td>', flaky)  # flips as a share
    run = client.get("/runs/6").text  # a skip reason is on the page, not only in a tooltip
    assert re.search(r'<br><small class="message">[^<]+</small>', run)


def test_a_content_hash_commit_keeps_its_digits():
    from tracker.words import short_commit

    assert short_commit("content:e6630b029c2d46c5") == "content:e6630b029c2d"
    assert short_commit("0123456789abcdef0123") == "0123456789ab"
    assert short_commit(None) == "–"


def test_a_rate_short_of_100_percent_never_reads_100_percent():
    """2,139 of 2,140 results passed on AY's xdist night: `.1%` printed 100.0% beside a failure."""
    from tracker.words import percent

    assert percent(2139 / 2140) == "99.95%" and percent(2607 / 2608, 0) == "99.96%"
    assert percent(1.0) == "100.0%" and percent(0.5, 0) == "50%" and percent(0.0) == "0.0%"
    assert percent(0.0004) == "0.04%"  # above zero, never 0.0%
    assert percent(0.999999) == ">99.999%" and percent(1e-6, 0) == "<0.01%"  # two more digits
    assert percent(3e-17) == "0.0%"  # a Wilson bound's float noise is zero, not 0.000000000000003%


def test_the_run_page_names_what_changed_in_the_environment(client):
    # runs 1-4 are JUnit nights without a probe; run 6 is the runner's, with its environment
    page = client.get("/runs/6?against=4").text
    assert "Against run" in page and 'href="/runs/4"' in page
    assert "Environment unknown: nothing was probed for run #4," in page  # no diff claimed
    same = client.get("/runs/4?against=3").text
    assert "Same environment" not in same and "probed for run #3 and run #4" in same
    assert client.get("/runs/6?against=0").status_code == 422


def test_environment_diff_names_each_changed_part():
    from tracker.analysis.changes import environment_diff

    before = {"driver": "25.0.rc1", "cann": "8.2.rc1", "torch_npu": "2.8.0", "python": "3.11"}
    now = {"driver": "25.0.rc1", "cann": "9.1.0", "torch_npu": "2.9.0", "python": "3.11"}
    assert environment_diff(before, now) == [
        ("cann", "8.2.rc1", "9.1.0"),
        ("torch_npu", "2.8.0", "2.9.0"),
    ]
    cold = {**now, "kernel_cache": "cold"}
    assert environment_diff({**now, "kernel_cache": "warm"}, cold) == [
        ("kernel_cache", "warm", "cold")
    ]


def test_the_suite_page_compares_runners(tmp_path):
    from datetime import UTC, datetime, timedelta

    from helpers import junit

    from tracker import store
    from tracker.db import session_scope
    from tracker.ingest import load_run

    x, y = "t/test_mlp.py::test_x", "t/test_mlp.py::test_y"
    now = datetime.now(UTC)

    def suite_page(name: str, nights: dict[str, str]) -> str:
        settings = settings_for(tmp_path, f"sqlite:///{tmp_path / name}")
        with session_scope(settings.database_url) as session:
            for runner, outcomes in nights.items():
                for night, o in enumerate(outcomes):
                    path = tmp_path / f"{runner}-{night}.xml"
                    cases = {x: ("passed" if o == "p" else "failed", "boom"), y: ("passed", None)}
                    path.write_text(junit(cases))
                    started = now - timedelta(days=4 - night)
                    run = load_run(path, suite="s", runner=runner, commit="c", started_at=started)
                    store.save_run(session, run)
        return TestClient(create_app(settings))

    client = suite_page("r.db", {"a2-8": "pppp", "a2-1": "pfpf", "new": "p"})
    page = client.get("/suites/s").text
    (differing,) = client.get("/api/v1/suites/s/runners").json()["differing"]  # the same row
    assert differing["nodeid"] == x
    assert {r: (d["verdict"], d["enough"]) for r, d in differing["sides"].items()} == {
        "a2-1": ("flaky", True), "a2-8": ("stable", True), "new": ("stable", False),
    }  # fmt: skip
    assert "<h2>Runners compared" in page
    row = re.search(r"test_x</a></td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td>", page)
    assert row and row.groups() == (  # a2-1, a2-8, new: sorted by name, each with its counts
        "flaky <small>2/4</small>",
        "stable <small>0/4</small>",
        "<small>too few runs (0/1)</small>",  # one run says nothing: no conclusion drawn
    )
    assert "test_y</a>" not in page.split("Runners compared")[1].split("</table>")[0]
    alone = suite_page("one.db", {"a2-1": "pfpf", "new": "p"}).get("/suites/s").text
    assert "No test's verdict differs between runners with at least 3 runs" in alone


def test_a_broken_test_links_to_what_changed_when_it_broke(client):
    (broken, *_) = client.get("/api/v1/suites/transformers/flaky").json()["broken"]
    page = client.get(f"/tests/{broken['test_id']}").text
    link = f"/runs/{broken['broken_run']}?against={broken['good_run']}"
    assert f'href="{link}"' in page
    assert f'Against run <a href="/runs/{broken["good_run"]}"' in client.get(link).text


def test_pages_say_what_they_show_for_odd_addresses(client):
    for path in ("/api/v1/runs/", "/runs/", "/tests/", "/api/v1/tests/"):  # 32-bit ids
        assert client.get(f"{path}2147483648").status_code == 422, path
    assert client.get("/runs/6", params={"outcome": "bogus"}).status_code == 422
    assert client.get("/runs/6", params={"outcome": ""}).status_code == 200  # the form's "all"
    past = client.get("/runs/6", params={"offset": 99999}).text
    assert "none from number 100,000" in past and "–99999 shown" not in past
    flaky = client.get("/suites/transformers/flaky").text
    assert "No flaky tests in the window." not in flaky
    none = client.get("/suites/transformers/flaky", params={"q": "zzz"}).text
    assert re.search(r"No flaky test matches “zzz” \(\d+ flaky tests? in the window\)", none)


def test_the_run_page_leads_with_what_failed(client):
    page = client.get("/runs/6").text
    table = page.split('<table id="results">')[1]
    outcomes = re.findall(r"<td><span class=\"status s-(\w+)\"", table)
    assert outcomes and outcomes[0] in ("failed", "error", "crashed", "timeout")
    passed = outcomes.index("passed")
    assert not {"failed", "error", "crashed", "timeout"} & set(outcomes[passed:])


def test_a_traceback_opens_near_its_error_line():
    from tracker.words import trace_from_error

    lines = [f"@pytest.mark.parametrize({i})" for i in range(100)]
    text = "\n".join(
        [*lines, "    def test(): ...", "E   triton.OutOfResources: shared memory", "x"]
    )
    shown = trace_from_error(text).splitlines()
    assert shown[0] == "… 89 lines above, in the full log" and len(shown) == 15
    assert shown[-2].startswith("E   triton.OutOfResources")
    assert trace_from_error("no error line\nat all") == "no error line\nat all"


def test_times_are_shown_in_the_configured_zone_and_name_it():
    from tracker.words import moment

    assert moment("2026-11-30T14:00:00+00:00", "Asia/Shanghai") == "2026-11-30 22:00 +08:00"
    assert moment("2026-11-30T14:00:00", "UTC") == "2026-11-30 14:00 UTC"
    assert moment(None) == "–"


def test_many_failures_with_one_message_are_not_called_a_cascade(tmp_path):
    from helpers import junit

    from tracker import store
    from tracker.db import session_scope
    from tracker.ingest import load_run

    settings = settings_for(tmp_path)
    cases = {
        f"t/test_mlp.py::test_{i}": ("failed", "OutOfResources: shared memory") for i in range(6)
    }
    (tmp_path / "j.xml").write_text(junit(cases))
    with session_scope(settings.database_url) as session:
        store.save_run(session, load_run(tmp_path / "j.xml", suite="s", runner="r"))
    page = TestClient(create_app(settings)).get("/suites/s").text
    assert (
        "most of a run&#39;s failures</span>" in page or "most of a run's failures</span>" in page
    )
    assert ">cascade</span>" not in page


def test_the_run_page_and_the_api_say_the_same_changes(client):
    for run_id in range(1, 7):
        api = client.get(f"/api/v1/runs/{run_id}/changes").json()["changes"]
        page = client.get(f"/runs/{run_id}").text
        if api is None:
            assert "<h2>Against" not in page
            continue
        assert f'<a href="/runs/{api["previous"]}">#{api["previous"]}</a>' in page
        passed_now = f"Failed in #{api['previous']}, passed now"
        # this run's outcome, not the verdict of the recent runs ("newly flaky" events)
        flaky_now = f"Flaky in this run (failed, then passed on a rerun), not in #{api['previous']}"
        no_result = (
            f"Failed in #{api['previous']}, without a result now (not run, cut, skipped or absent)"
        )
        for label, key in (("New failures", "new_failures"), (passed_now, "fixed"),
                           ("Still failing", "still_failing"), (no_result, "no_result"),
                           (flaky_now, "new_flaky")):  # fmt: skip
            assert f"<li>{label}: {len(api[key])}" in page
    assert client.get("/api/v1/runs/6/changes?against=999999").status_code == 404
    against = client.get("/api/v1/runs/6/changes?against=1").json()["changes"]
    assert against["previous"] == 1


def test_the_suite_page_and_the_api_name_the_same_runner_differences(client):
    api = client.get("/api/v1/suites/transformers/runners").json()
    page = client.get("/suites/transformers").text
    assert api["runners"] == ["a2-910b4", "gha-910b4"] and api["differing"] == []
    assert "No test's verdict differs between runners" in page
    assert client.get("/api/v1/suites/nope/runners").status_code == 404


def test_the_suite_trend_and_the_api_count_the_same_days(client):
    api = client.get("/api/v1/suites/transformers/daily?days=7").json()
    assert api["days"] == 7 and len(api["daily"]) == 7
    counted = [d for d in api["daily"] if d["runs"]]
    assert counted, "the fixture's runs fall in the last week"
    for d in api["daily"]:
        assert 0 <= d["green_runs"] <= d["runs"]
        assert d["green_rate"] == (d["green_runs"] / d["runs"] if d["runs"] else None)
    runs = client.get("/api/v1/suites/transformers/runs?limit=200").json()["runs"]
    week = {d["day"] for d in api["daily"]}
    listed = [r for r in runs if r["status"] != "interrupted" and r["started_at"][:10] in week]
    assert sum(d["runs"] for d in api["daily"]) == len(listed)  # the fixture's zone is UTC
    page = client.get("/suites/transformers?days=7").text
    assert "<h2>Daily green runs (7 days)</h2>" in page
    assert client.get("/api/v1/suites/nope/daily").status_code == 404


def test_the_grid_shows_each_failing_test_night_by_night(client):
    grid = client.get("/suites/transformers/grid?runner=a2-910b4&format=json").json()
    assert [r["commit"] for r in grid["runs"]] == ["c0", "c1", "c2", "c3"]  # oldest left
    rows = {t["nodeid"]: t["outcomes"] for k in grid["kernels"] for t in k["tests"]}
    assert rows["test/transformers/test_mlp.py::test_falcon[bf16]"] == [
        "failed", "passed", "failed", "passed",
    ]  # fmt: skip
    assert rows["test/transformers/test_rope.py::test_rope[fp32]"][2:] == ["failed", "failed"]
    assert "test/transformers/test_rms_norm.py::test_rms[fp32]" not in rows  # never failed
    page = client.get("/suites/transformers/grid?runner=a2-910b4").text
    # each cell links to its run, filtered to the test, and says its outcome without colour
    assert '/runs/3?q=test%2Ftransformers%2Ftest_mlp.py%3A%3Atest_falcon%5Bbf16%5D"' in page
    assert 'title="failed · run 3">✗</a>' in page
    csv_rows = client.get("/suites/transformers/grid?runner=a2-910b4&format=csv").text
    assert csv_rows.splitlines()[0] == "kernel,nodeid,verdict,run 1,run 2,run 3,run 4"


def test_trends_count_each_run_and_each_kernel(client):
    trends = client.get("/suites/transformers/trends?runner=a2-910b4&format=json").json()
    nights = trends["nights"]
    assert [(n["failing"], n["ran"]) for n in nights] == [(1, 4), (1, 4), (2, 4), (1, 4)]
    assert nights[0]["test_pass_rate"] == 0.75
    mlp = next(k for k in trends["kernels"] if k["kernel"] == "mlp")
    assert [(r["passed"], r["ran"]) for r in mlp["runs"]] == [(0, 1), (1, 1), (0, 1), (1, 1)]
    assert mlp["pass_rate"] == 0.5 and trends["kernels"][0]["pass_rate"] <= 0.5  # lowest first
    page = client.get("/suites/transformers/trends?runner=a2-910b4").text
    assert page.count('<svg class="chart"') == 5 and page.count('<svg class="spark"') >= 4
    # one run a day: each point is labelled by its day
    days = [datetime.fromisoformat(n["started_at"]).strftime("%m-%d") for n in nights]
    assert f">{days[0]}</text>" in page and f"<title>{days[-1]}: " in page
    assert "one point each (its start day below)" in page


def test_a_page_over_several_runners_says_it_pools_them_and_links_each(client):
    pooled = client.get("/suites/transformers/trends?days=30").text
    line = re.search(r'<p class="window">Runner: (.*?)</p>', pooled).group(1)
    assert line.startswith("<strong>all ") and ", pooled</strong>" in line
    assert '<a href="?days=30&amp;runner=a2-910b4">a2-910b4</a>' in line
    one = client.get("/suites/transformers/kernels?days=30&runner=a2-910b4").text
    line = re.search(r'<p class="window">Runner: (.*?)</p>', one).group(1)
    assert '<a href="?days=30">all ' in line and "<strong>a2-910b4</strong>" in line
    counts = [
        len(client.get(f"/suites/transformers/trends?format=json{q}").json()["nights"])
        for q in ("", "&runner=a2-910b4")
    ]
    assert counts[0] > counts[1]  # the pooled view counts the other runners' runs too
    for page in ("/suites/transformers", "/suites/transformers/flaky"):
        assert "The runs of its 2 runners (a2-910b4, gha-910b4) pooled" in client.get(page).text


def test_the_promotion_report_says_it_pools_runners_and_gives_rates_in_percent(filled):
    from tracker.analysis.issue import promotion_report
    from tracker.db import session_scope

    with session_scope(filled.database_url) as session:
        pooled = promotion_report(session, filled, "transformers", None)
        one = promotion_report(session, filled, "transformers", "a2-910b4")
    rate = re.search(r"\| run success rate over \d+ days \| >= 95% \| ([^|]*) \|", pooled)
    assert rate and re.fullmatch(r"\d+\.\d+%", rate.group(1).strip())  # a percentage, not 0.2
    assert "The runs of its 2 runners pooled; each one alone:" in pooled
    assert re.search(
        r"- `a2-910b4`: not met, \d+ days? in a row with a run, \d+ of \d+ runs? green", pooled
    )
    assert "runners pooled" not in one and "## Promotion of transformers on a2-910b4" in one


def test_runs_that_share_a_day_are_labelled_by_number_on_charts(tmp_path):
    from datetime import UTC, timedelta

    from tracker import store
    from tracker.db import session_scope
    from tracker.ingest import load_run
    from tracker.web.svg import run_labels

    def at(day: int, hour: int) -> datetime:
        return datetime(2026, 12, day, hour)

    assert run_labels([(1, at(1, 1)), (2, at(2, 1))]) == ["12-01", "12-02"]
    # 11 calls of one day each read "12-02" on the device nights' charts
    assert run_labels([(1, at(1, 1)), (2, at(2, 1)), (3, at(2, 9))]) == ["run 1", "run 2", "run 3"]
    settings = settings_for(tmp_path)
    night = tmp_path / "night.xml"
    night.write_text(junit({"t.py::test_a": ("passed", None), "t.py::test_b": ("failed", "x")}))
    noon = datetime.now(UTC).replace(hour=12) - timedelta(days=1)
    with session_scope(settings.database_url) as session:
        for hours in (0, 2, 4):  # three runs of one day
            run = load_run(night, suite="s", runner="r", started_at=noon + timedelta(hours=hours))
            store.save_run(session, run)
    client = TestClient(create_app(settings))
    page = client.get("/suites/s/trends").text
    assert "one point each (its number below: runs share days)" in page
    assert ">run 1</text>" in page and "<title>run 3: " in page
    assert "<title>run 2: " in client.get("/tests/1").text  # its duration, run by run
    assert '<a href="/runs/2">run 2 ' in client.get("/suites/s/grid").text  # a column's head


def test_search_finds_tests_messages_and_commits_with_filters(client):
    found = client.get("/search?q=rope&format=json").json()
    rope = "test/transformers/test_rope.py::test_rope[fp32]"
    assert [t["nodeid"] for t in found["tests"]] == [rope]
    assert {k["kernel"] for k in found["kernels"]} == {"rope"}
    messages = client.get("/search?q=rope 0.0&format=json").json()["failures"]
    assert sorted(m["message"] for m in messages) == ["rope 0.029", "rope 0.031"]
    other = client.get("/search?q=rope 0.0&runner=gha-910b4&format=json").json()
    assert other["failures"] == []  # that runner never saw it
    later = client.get("/search?q=rope 0.0&since=2999-01-01&format=json").json()
    assert later["failures"] == []
    on_c3 = client.get("/search?q=rope 0.0&commit=c3&format=json").json()["failures"]
    assert [m["message"] for m in on_c3] == ["rope 0.029"]  # the failures seen on that commit
    commits = client.get("/search?q=c2&format=json").json()["runs"]
    assert [r["commit"] for r in commits] == ["c2"]
    literal = client.get("/search?q=%25&format=json").json()  # % is a character, not a wildcard
    assert literal["tests"] == [] and literal["runs"] == []
    assert client.get("/search?q=" + "x" * 201).status_code == 422


def test_every_table_is_also_csv_with_the_page_filters(client):
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(client.get("/runs/6?format=csv").text)))
    run = client.get("/runs/6?format=json").json()
    assert len(rows) == run["total_results"]
    failed = client.get("/runs/6?format=csv&outcome=failed").text.splitlines()
    assert len(failed) - 1 == run["run"]["counts"]["failed"]
    evil = client.get("/search?q=evil&format=csv").text
    assert "<script>" not in evil or evil.count('"') > 0  # quoted, never run
    formula = client.get("/suites/transformers/kernels?format=csv")
    assert formula.headers["content-type"].startswith("text/csv")
    assert "attachment" in formula.headers["content-disposition"]
    assert client.get("/?format=csv").status_code == 400  # the overview has no one table


def test_the_runner_page_names_the_days_it_ran_nothing(client):
    runner = client.get("/runners/a2-910b4?format=json").json()
    assert runner["suites"] == ["transformers"] and len(runner["runs"]) == 4
    # one run a day, 4 to 1 days ago: from its first run's day to today, the days without one
    # (today at least; those before its first run are not missed: it did not exist yet)
    from datetime import UTC, date, datetime, timedelta

    ran = {datetime.fromisoformat(r["started_at"]).astimezone(UTC).date() for r in runner["runs"]}
    today = datetime.now(UTC).date()
    span = [min(ran) + timedelta(days=i) for i in range((today - min(ran)).days + 1)]
    missed = [date.fromisoformat(d) for d in runner["days_without_run"]]
    assert missed == [d for d in span if d not in ran] and missed[-1] == today
    assert runner["environments"][0]["runs"] == 4  # JUnit files: one unprobed stretch
    # the page names the days it judged: since the first run, not "the last 30"
    page = " ".join(client.get("/runners/a2-910b4").text.split())
    first = min(ran).strftime("%m-%d")
    assert f"with no run of any suite since its first run on {first} ({len(span)} days)" in page
    assert "last 30 days:" not in page
    assert client.get("/runners/nobody").status_code == 404
