"""The gate in front of every write (POST under /api/): the token and the declared size are checked
before a byte of the body is read, and a body sent without a length (chunked) is cut off at the
limit as it streams. Done as ASGI middleware because FastAPI reads a form body before it runs a
route's dependencies, which let anyone spool gigabytes to disk before being told 401.
"""

from __future__ import annotations

import hmac
import json

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracker.config import Settings


def token_problem(settings: Settings, authorization: str | None) -> tuple[int, str] | None:
    """Why a write is refused (status, reason), or None. Bearer token from TRACKER_TOKEN,
    compared in constant time; no token set: no writes."""
    if not settings.token:
        return 403, "writes are disabled: the server has no TRACKER_TOKEN set"
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.encode(), settings.token.encode()
    ):
        return 401, "missing or wrong bearer token"
    return None


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the body is larger than {limit // 1024 // 1024} MB")


class WriteGuard:
    """Settings' `upload_max_mb` bounds the body (a gzip of a 10,000-test reportlog is ~4 MB)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.limit = settings.upload_max_mb * 1024 * 1024

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] in ("GET", "HEAD", "OPTIONS")
            or not scope["path"].startswith("/api/")
        ):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        problem = token_problem(self.settings, headers.get("authorization"))
        length = headers.get("content-length", "")
        if problem is None and length and (not length.isdigit() or int(length) > self.limit):
            problem = 413, BodyTooLarge(self.limit).detail
        if problem is not None:
            await _refuse(send, *problem)
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise BodyTooLarge(
                    self.limit
                )  # becomes the 413 through FastAPI's exception handling
            return message

        await self.app(scope, bounded, send)


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # the unread body is not waited for
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
