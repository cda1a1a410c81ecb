"""`tracker report`: the Markdown of a GitHub issue about a test, a kernel or the promotion
verdict, printed, or filed upstream with `--file-issue`."""

from __future__ import annotations

from typing import Annotated

import typer

from tracker import queries
from tracker.analysis import issue
from tracker.cli.analysis import RunnerOpt, scope
from tracker.cli.app import SuiteOpt, app, fail, out, state, suite_name
from tracker.issues import IssueError, file_issue


@app.command()
def report(
    test: Annotated[str | None, typer.Argument(help="The test's nodeid.")] = None,
    suite: SuiteOpt = None,
    kernel: Annotated[str | None, typer.Option("--kernel", help="A kernel, not a test.")] = None,
    promotion: Annotated[
        bool, typer.Option("--promotion", help="The promotion verdict, in the RFC's table.")
    ] = False,
    runner: RunnerOpt = None,
    file_it: Annotated[
        bool,
        typer.Option(
            "--file-issue",
            help="Open it as an issue in [github] repo (token: TRACKER_GITHUB_TOKEN) and record "
            "its address.",
        ),
    ] = False,
) -> None:
    """A GitHub issue in Markdown, to paste or file."""
    if sum([test is not None, kernel is not None, promotion]) != 1:
        raise fail("give one of: a test's nodeid, --kernel NAME, --promotion")
    suite = suite_name(suite)
    settings = state.settings()
    with scope(suite, runner) as s:
        try:
            if test is not None:
                ids = queries.test_ids(s.session, suite, [test])
                if test not in ids:
                    raise fail(f"no test {test!r} in {suite}")
                text = issue.test_report(s.session, settings, ids[test])
                subject, title = test, f"Flaky or failing test: {test}"
            elif kernel is not None:
                text = issue.kernel_report(s.session, settings, suite, kernel)
                subject, title = f"kernel:{kernel}", f"Kernel {kernel} in {suite}"
            else:
                text = issue.promotion_report(s.session, settings, suite, runner)
                subject, title = "promotion", f"Promotion of {suite}'s CI"
        except queries.NotFound as exc:
            raise fail(str(exc)) from None
    if not file_it:
        print(text)
        return
    try:
        url = file_issue(settings, suite, subject, title, text)
    except IssueError as exc:
        raise fail(f"the issue was not filed: {exc}") from None
    out.print(f"filed: {url}")
