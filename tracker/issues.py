"""Issues upstream: `tracker report --file-issue` opens one through the GitHub API and records
where it lives. Once its subject is healthy (a test or a kernel passed `[github] healthy_runs`
runs in a row, the promotion criterion met), the issue gets one comment saying so. Nothing is
ever closed: that stays a person's decision.

The token (TRACKER_GITHUB_TOKEN) is sent in a header and written nowhere; errors name the
repository and the status, not the request.
"""

from __future__ import annotations

import logging

import httpx
from sqlmodel import Session

from tracker import queries, store
from tracker.analysis.report import Scope
from tracker.config import Settings
from tracker.db import session_scope
from tracker.records import FAILING

log = logging.getLogger("tracker")


class IssueError(RuntimeError):
    pass


def _client(settings: Settings) -> httpx.Client:
    if not settings.github.repo:
        raise IssueError("no [github] repo is configured")
    if not settings.github_token:
        raise IssueError("TRACKER_GITHUB_TOKEN is not set")
    headers = {
        "Authorization": f"Bearer {settings.github_token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
    }
    base = f"{settings.github.api_url.rstrip('/')}/repos/{settings.github.repo}/"
    return httpx.Client(base_url=base, headers=headers, timeout=httpx.Timeout(30, connect=10))


def _post(client: httpx.Client, path: str, payload: dict) -> dict:
    try:
        answer = client.post(path, json=payload)
    except httpx.HTTPError as exc:
        raise IssueError(f"GitHub not reached ({type(exc).__name__})") from None
    if answer.status_code != 201:
        raise IssueError(f"GitHub answered {answer.status_code} for {path}")
    return answer.json()


def file_issue(settings: Settings, suite: str, subject: str, title: str, body: str) -> str:
    """Open the issue and record it; its address."""
    with _client(settings) as client:
        made = _post(client, "issues", {"title": title[:250], "body": body[:60_000]})
    url = str(made.get("html_url", ""))
    if not url.startswith(("http://", "https://")):
        raise IssueError("GitHub's answer has no issue address")
    with session_scope(settings.database_url) as session:
        store.add_issue_link(session, suite, subject, url)
    return url


def _healthy(session: Session, settings: Settings, suite: str, subject: str) -> str | None:
    """The comment an issue's subject has earned, if any: a test whose first attempt passed in
    each of its last `healthy_runs` runs, a kernel none of whose tests failed an attempt in the
    suite's last `healthy_runs` runs, or a promotion criterion now met."""
    n = settings.github.healthy_runs
    if subject == "promotion":
        verdict = Scope(session, settings, suite).promotion()
        if not verdict.met:
            return None
        return f"The promotion criterion is met now: {verdict.headline()}"
    if subject.startswith("kernel:"):
        kernel = subject.removeprefix("kernel:")
        runs = [r["id"] for r in queries.list_runs(session, suite, limit=n)]
        if len(runs) < n or any(
            kernel not in queries.run_kernels(session, run)
            or any(a["kernel"] == kernel for a in queries.failing_attempts(session, run))
            for run in runs
        ):
            return None
        return f"No test of kernel {kernel} failed an attempt in the suite's last {n} runs."
    ids = queries.test_ids(session, suite, [subject])
    last = (queries.case_history(session, ids[subject]) if ids else [])[-n:]
    if len(last) < n or any(h["first"] in FAILING for h in last):
        return None
    return f"The tracker has seen this test pass its first attempt in each of its last {n} runs."


def comment_healthy(settings: Settings, suite: str) -> list[str]:
    """One comment on each filed issue whose subject became healthy (`_healthy`); the issues
    commented on. Never fails the caller: a problem is logged and tried next time."""
    if not settings.github.repo or not settings.github_token:
        return []
    done = []
    with session_scope(settings.database_url) as session:
        earned = [
            (link.id, link.url, text)
            for link in queries.issue_links(session, suite)
            if not link.commented_at and (text := _healthy(session, settings, suite, link.subject))
        ]
    for link_id, url, text in earned:
        number = url.rstrip("/").rsplit("/", 1)[-1]
        body = f"{text} Close this issue if that settles it; the tracker closes nothing."
        try:
            with _client(settings) as client:
                _post(client, f"issues/{number}/comments", {"body": body})
        except IssueError as exc:
            log.warning("comment on %s not posted: %s", url, exc)
            continue
        with session_scope(settings.database_url) as session:
            store.issue_commented(session, link_id)
        done.append(url)
    return done
