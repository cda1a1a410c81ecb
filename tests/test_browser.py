"""The pages in a real headless Chromium (Debian's package, driven by Playwright) against a real
uvicorn on 127.0.0.1: no console errors, the clicks a maintainer makes, screenshots kept in
./screenshots/ (git-ignored) for a person to look at."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import fill, live_server, settings_for

from tracker import store
from tracker.db import session_scope
from tracker.records import AttemptRecord, RunRecord
from tracker.web.app import create_app

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(__file__).parent.parent / "screenshots"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    settings = settings_for(tmp)
    fill(settings, tmp)
    # a second runner with a month of nights: per-runner verdicts, a whole strip of runs
    now = datetime.now(UTC)
    with session_scope(settings.database_url) as session:
        for night in range(30):
            started = now - timedelta(days=night, hours=2)
            record = RunRecord("transformers", "a2-8", "runner", started, collected=["t.py::a"])
            record.attempts = [AttemptRecord("t.py::a", "passed", 1.0)]
            store.save_run(session, record)
    with live_server(create_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    yield page
    page.close()


PAGES = {
    "overview": "/",
    "suite": "/suites/transformers",
    "flaky": "/suites/transformers/flaky",
    "promotion": "/suites/transformers/promotion",
    "run-cascade": "/runs/5",
    "run-runner": "/runs/6",
    "test": "/tests/2",
    "kernel": "/suites/transformers/kernels/mlp",
    "flaky-7-days": "/suites/transformers/flaky?days=7&sort=-rate",
    "trends": "/suites/transformers/trends",
    "trends-a2-8": "/suites/transformers/trends?runner=a2-8&days=30",
    "grid": "/suites/transformers/grid",
    "kernels": "/suites/transformers/kernels",
    "clusters": "/suites/transformers/clusters",
    "runner": "/runners/a2-910b4",
    "search": "/search?q=rope",
    "api-docs": "/docs",
}


@pytest.mark.parametrize("name", list(PAGES))
def test_page_loads_without_console_errors(page, base_url, name):
    response = page.goto(base_url + PAGES[name])
    assert response.status == 200
    page.wait_for_load_state("networkidle")
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    assert page.errors == []
    if name == "api-docs":
        assert page.locator(".swagger-ui").count() == 1  # rendered from the vendored bundle


def test_click_from_overview_to_run_to_test(page, base_url):
    page.goto(base_url + "/")
    with page.expect_navigation():  # a click only starts it: read the page once it loaded
        page.locator(".card", has_text="realities").locator("a", has_text="#").first.click()
    assert "/runs/" in page.url
    assert page.locator("h1").inner_text().startswith("Run #")
    with page.expect_navigation():
        page.locator("#results a", has_text="test_b_needs_clean_state").first.click()
    assert "/tests/" in page.url
    assert "test_b_needs_clean_state" in page.locator("h1").inner_text()
    # failed in suite order, passed alone: the page names the test that ran before it
    assert page.locator("h2", has_text="Order-dependence").count() == 1
    before = page.locator("ol a", has_text="test_a_leaves_state_behind")  # a link to its page
    assert before.count() == 1
    assert before.get_attribute("href").startswith("/tests/")
    with page.expect_navigation():  # the history strip links back to the run
        page.locator("svg.strip a").first.click()
    assert "/runs/" in page.url
    assert page.errors == []


def test_results_filter_works_without_javascript(browser, base_url):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(base_url + "/runs/6")
    page.select_option("select[name=outcome]", "flaky")
    with page.expect_navigation():
        page.locator("form.filter button").click()
    assert "outcome=flaky" in page.url
    rows = page.locator("#results tbody tr")
    assert rows.count() == 1 and "test_b_needs_clean_state" in rows.first.inner_text()
    context.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_no_page_is_wider_than_the_screen(browser, base_url, width):
    """Phones included: wide tables scroll inside their own box, the page never does."""
    page = browser.new_page(viewport={"width": width, "height": 800})
    suite = page.goto(base_url + "/suites/transformers")
    assert suite.status == 200
    cluster = page.locator("a[href*='/clusters/']").first.get_attribute("href")
    paths = [p for n, p in PAGES.items() if n != "api-docs"] + [cluster, "/suites/realities"]
    for path in paths:
        page.goto(base_url + path)
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= width, f"{path} is {wide} px wide at {width} px"
        if width == 390:  # a test id wraps as words, not one character per line
            cells = page.locator("td.id:visible")
            if cells.count():
                assert cells.first.bounding_box()["width"] >= 200, path
    page.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_the_cards_and_the_kernel_table_need_no_sideways_scroll(browser, base_url, width):
    """The overview card cut its 14-day column at every width; kernel names broke over 3-5
    lines at 390 px and the table scrolled."""
    page = browser.new_page(viewport={"width": width, "height": 800})
    clipped = "[...document.querySelectorAll('.card .scroll')]"
    page.goto(base_url + "/")
    assert page.evaluate(f"{clipped}.filter(e => e.scrollWidth > e.clientWidth).length") == 0
    page.goto(base_url + "/suites/transformers")
    table = "document.querySelector('table.kernels').parentElement"
    assert page.evaluate(f"{table}.scrollWidth <= {table}.clientWidth")
    names = page.locator("table.kernels td:first-child")
    line = names.first.bounding_box()["height"]
    assert all(names.nth(i).bounding_box()["height"] <= 2.5 * line for i in range(names.count()))
    page.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_no_chart_label_is_cut(browser, base_url, width):
    """Every text of every chart lies inside its chart as drawn: the run-duration chart cut
    its last date ("11-30 14:0")."""
    page = browser.new_page(viewport={"width": width, "height": 800})
    outside = """[...document.querySelectorAll('svg.chart, svg.timeline')].flatMap(svg => {
        const box = svg.getBoundingClientRect();
        return [...svg.querySelectorAll('text')].filter(t => {
            const r = t.getBoundingClientRect();
            return r.left < box.left - 0.5 || r.right > box.right + 0.5;
        }).map(t => t.textContent);
    })"""
    charts = 0
    paths = ("/suites/transformers", PAGES["trends"], PAGES["trends-a2-8"], "/tests/2", "/runs/6")
    for path in paths:
        page.goto(base_url + path)
        charts += page.locator("svg.chart").count()
        assert page.evaluate(outside) == [], f"{path} at {width} px"
    assert charts >= 12
    page.close()


def test_the_grid_links_each_cell_to_its_run(page, base_url):
    page.goto(base_url + PAGES["grid"])
    cell = page.locator("table.grid a.cell", has_text="✗").first
    title = cell.get_attribute("title")
    with page.expect_navigation():
        cell.click()
    assert "/runs/" in page.url and "q=" in page.url and title.startswith("failed")
    assert page.locator("#results tbody tr").count() == 1  # the test, in that run
    assert page.errors == []
