"""Issues upstream: `tracker report --file-issue` opens one through the GitHub API and records
where it lives; once the test has passed `[github] healthy_runs` runs in a row, the issue gets
one comment saying so. Nothing is ever closed: that stays a person's decision.

The token (TRACKER_GITHUB_TOKEN) is sent in a header and written nowhere; errors name the
repository and the status, not the request.
"""

from __future__ import annotations

import logging

import httpx

from tracker import queries, store
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


def comment_healthy(settings: Settings, suite: str) -> list[str]:
    """One comment on each filed test issue whose test passed its last `healthy_runs` runs; the
    issues commented on. Never fails the caller: a problem is logged and tried next time."""
    if not settings.github.repo or not settings.github_token:
        return []
    done = []
    with session_scope(settings.database_url) as session:
        links = [link for link in queries.issue_links(session, suite) if not link.commented_at]
        healthy = []
        for link in links:
            ids = queries.test_ids(session, suite, [link.subject])
            past = queries.case_history(session, ids[link.subject]) if ids else []
            last = past[-settings.github.healthy_runs :]
            if len(last) == settings.github.healthy_runs and all(
                h["first"] not in FAILING for h in last
            ):
                healthy.append((link.id, link.url, len(last)))
    for link_id, url, runs in healthy:
        number = url.rstrip("/").rsplit("/", 1)[-1]
        text = (
            f"The tracker has seen this test pass its first attempt in each of its last {runs} "
            "runs. Close this issue if that settles it; the tracker closes nothing."
        )
        try:
            with _client(settings) as client:
                _post(client, f"issues/{number}/comments", {"body": text})
        except IssueError as exc:
            log.warning("comment on %s not posted: %s", url, exc)
            continue
        with session_scope(settings.database_url) as session:
            store.issue_commented(session, link_id)
        done.append(url)
    return done
