"""Sending this store's runs to a central tracker (`[push] url`), through a local outbox.

A run is queued in the same database as the run itself, so a push that fails (the central server
is down, the network is cut, the token is wrong) loses nothing: the run stays queued and is sent
again after a backoff (by the scheduler, or `tracker push --pending` at once). The central server
stores a run once, by this store's id and the run's id here, so sending twice is harmless.
"""

from __future__ import annotations

import gzip
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import select
from sqlmodel import Session

from tracker import queries, store
from tracker.config import Settings
from tracker.db import session_scope
from tracker.models import Outbox

log = logging.getLogger("tracker")
FIRST_RETRY = timedelta(seconds=30)  # then doubled after each failure, up to the setting's cap


class PushError(RuntimeError):
    """The central server did not take the run; the message says what it answered."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def refused(self) -> bool:
        """The server read the run and will not store it: sending it again soon changes nothing
        (until the server is upgraded, or a person settles a 409's conflict of origins), so it
        waits the longest backoff. A 503 (the server's storage is full or away) is retried."""
        return self.status in (400, 409, 413)


@dataclass
class Sent:
    run_id: int
    remote_id: int | None = None
    created: bool = False
    error: str | None = None


def enqueue(session: Session, run_ids: list[int]) -> None:
    """Queue runs for the central server (again, if they were sent before)."""
    store.enqueue_push(session, run_ids)


def waiting(session: Session, due_only: bool = False) -> list[Outbox]:
    query = select(Outbox).where(Outbox.pushed_at.is_(None)).order_by(Outbox.run_id)
    if due_only:
        query = query.where(Outbox.next_try_at <= datetime.now(UTC))
    return list(session.execute(query).scalars())


def backoff(settings: Settings, tries: int) -> timedelta:
    cap = timedelta(minutes=settings.push.max_backoff_minutes)
    return min(FIRST_RETRY * 2 ** min(tries - 1, 20), cap)


def post(settings: Settings, client: httpx.Client, detail: dict) -> tuple[int, bool]:
    """One run to the central server: its id there, and whether this push stored it."""
    if not settings.push.url:
        raise PushError("no [push] url is configured")
    body = gzip.compress(json.dumps(detail, ensure_ascii=False).encode(), compresslevel=6)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    if settings.push_token:
        headers["Authorization"] = f"Bearer {settings.push_token}"
    url = settings.push.url.rstrip("/") + "/api/v1/runs"
    try:
        answer = client.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise PushError(f"{url}: {exc or type(exc).__name__}") from None
    if answer.status_code not in (200, 201):
        try:
            reason = answer.json()["detail"]
        except (ValueError, KeyError, TypeError):
            reason = answer.text[:200]
        raise PushError(f"{url}: {answer.status_code} {reason}", answer.status_code)
    try:
        stored = answer.json()
        return int(stored["id"]), bool(stored["created"])
    except (ValueError, KeyError, TypeError):  # a proxy's page, not a tracker's answer
        raise PushError(f"{url}: {answer.status_code} but not a tracker's answer") from None


def send(settings: Settings, due_only: bool = False) -> list[Sent]:
    """Push the queued runs, oldest first; each failure is kept with its next try."""
    if not settings.push.url:
        return []
    url = settings.database_url
    with session_scope(url) as session:
        queued = [row.run_id for row in waiting(session, due_only)]
    done: list[Sent] = []
    timeout = httpx.Timeout(settings.push.timeout_seconds, connect=10)
    with httpx.Client(timeout=timeout) as client:
        for run_id in queued:
            with session_scope(url) as session:
                detail = queries.run_detail(session, run_id)
            try:
                remote, created = post(settings, client, detail)
            except PushError as exc:
                done.append(_failed(settings, run_id, str(exc), exc.refused))
                continue
            with session_scope(url) as session:
                store.mark_pushed(session, run_id, remote)
            done.append(Sent(run_id, remote, created))
            log.info("run %s pushed to %s as run %s", run_id, settings.push.url, remote)
    return done


def _failed(settings: Settings, run_id: int, error: str, refused: bool = False) -> Sent:
    with session_scope(settings.database_url) as session:
        wait = lambda tries: backoff(settings, 99 if refused else tries)  # noqa: E731
        tries = store.push_failed(session, run_id, error, wait)
    if tries is not None:
        log.warning("run %s not pushed (try %d): %s", run_id, tries, error)
    return Sent(run_id, error=error)


def push_after_run(settings: Settings, run_id: int) -> None:
    """Queue a run that has just been stored and try to send it; never fails the run."""
    if not settings.push.url:
        return
    try:
        with session_scope(settings.database_url) as session:
            enqueue(session, [run_id])
        send(settings)
    except Exception:
        log.exception("pushing run %s failed; it stays queued", run_id)
