"""Telling people what changed: after each stored run, and when a scheduled night did not run.

The events are worked out once (`analysis.changes.run_events`) and kept with a unique key, then
queued for each configured destination (`[[alerts]]`) that wants their level. Sending goes
through that outbox (`alert_delivery`) with a backoff, like `push`: a chat service that is down
loses nothing, and a delivery marked sent is never sent again. Nothing here fails or blocks a
run: every entry point catches and logs.

A webhook's address usually holds its token. It is read from the environment when sending and
nowhere else: errors and logs name the destination, never the address.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import httpx

from tracker import queries, store
from tracker.analysis.changes import CRITICAL, WARNING, event, level_of, run_events
from tracker.config import AlertConfig, Settings
from tracker.db import session_scope
from tracker.issues import comment_healthy
from tracker.models import Investigation
from tracker.push import backoff
from tracker.schedule import overdue, slot_before
from tracker.words import moment, plural

log = logging.getLogger("tracker")
TEXT_MAX = 4_000  # chat services cut or refuse longer messages
LEASE = timedelta(minutes=5)  # a delivery taken for sending; longer than the client's timeout


def _queue(settings: Settings, key: str, where: tuple[str, str, int | None], events: list) -> bool:
    """Keep the alert and queue it; False when one with this key was kept before."""
    level = level_of(events)
    names = [a.name for a in settings.alerts if events and a.wants(where[0], level)]
    with session_scope(settings.database_url) as session:
        return store.add_alert(session, key, where, events, names) is not None


def record_run(settings: Settings, run_id: int) -> dict[str, Any]:
    """Work out what run `run_id` changed and queue it; a run that changed nothing is kept
    too (its page says so) and sent nowhere. The run (`queries.run_info`)."""
    with session_scope(settings.database_url) as session:
        run = queries.run_info(session, run_id)
        events = run_events(session, settings, run)
    _queue(settings, f"run:{run_id}", (run["suite"], run["runner"], run_id), events)
    return run


def after_run(settings: Settings, run_id: int) -> None:
    """Called once a run is stored (run, ingest, push); never fails the run."""
    try:
        run = record_run(settings, run_id)
        send(settings)
        comment_healthy(settings, run["suite"])
    except Exception:
        log.exception("alerts for run %s failed; the run is stored", run_id)


def investigated(settings: Settings, suite: str, found: Investigation) -> None:
    """An alert for a polluter search that named its polluters or a bisect that named the
    first bad commit (or a range); one that found nothing is on the test's page only."""
    try:
        details = found.details
        with session_scope(settings.database_url) as session:
            nodeid = queries.case_info(session, found.test_id)["nodeid"]
        if details.get("culprits"):
            culprits = details["culprits"]
            text = f"{nodeid} fails after {' + '.join(culprits[:3])} ({found.verdict})"
            tests = [nodeid, *culprits]
        elif details.get("first_bad") or details.get("candidates"):
            where = details.get("first_bad") or f"one of {len(details['candidates'])} commits"
            subject = f" ({details['subject']})" if details.get("subject") else ""
            text, tests = f"{nodeid} broke at {str(where)[:40]}{subject}", [nodeid]
        else:
            return
        where = (suite, settings.runner.name, found.run_id)
        found_it = event(found.kind, WARNING, text, tests)
        if _queue(settings, f"investigation:{found.id}", where, [found_it]):
            send(settings)
    except Exception:
        log.exception("alerts for investigation %s failed; it is stored", found.id)


def missed_nights(settings: Settings, now: datetime | None = None) -> list[str]:
    """Queue a `missed_night` alert for each scheduled suite of this runner whose latest slot
    passed (with the scheduler's misfire grace) without a run starting, and for each other
    runner of a stored suite (one that pushes here, say) silent for `missed_after_hours`: its
    schedule is not known here, its silence is. The keys queued."""
    now = now or datetime.now(UTC)
    queued = _silent(settings, now)
    grace = timedelta(seconds=settings.scheduler.misfire_grace_seconds)
    runner, tz = settings.runner.name, settings.timezone
    for suite in settings.suites:
        if not suite.schedule:
            continue
        slot = slot_before(suite, tz, now - grace)
        if slot is None:
            continue
        with session_scope(settings.database_url) as session:
            latest = queries.list_runs(session, suite.name, runner, 1)
        last = latest[0]["started_at"] if latest else None
        if last is not None and datetime.fromisoformat(last) >= slot:
            continue
        since = f"the last one started {moment(last, tz)}" if last else "it never ran"
        text = f"no run of {suite.name} on {runner} for the {moment(slot, tz)} slot ({since})"
        key = f"missed:{suite.name}:{runner}:{slot.isoformat()}"
        missed = event("missed_night", CRITICAL, text)
        if _queue(settings, key, (suite.name, runner, None), [missed]):
            queued.append(key)
    return queued


def _silent(settings: Settings, now: datetime) -> list[str]:
    """Runners of stored suites, other than this one's scheduled suites, overdue by their last
    run: one alert per silence (keyed by that last run)."""
    scheduled = {(s.name, settings.runner.name) for s in settings.suites if s.schedule}
    queued = []
    with session_scope(settings.database_url) as session:
        pairs = [p for p in queries.suite_runner_pairs(session) if p not in scheduled]
        last = {p: queries.list_runs(session, *p, 1)[0] for p in pairs}
    for (suite, runner), run in last.items():
        days = overdue(run["started_at"], settings, now)
        if not days:
            continue
        started = moment(run["started_at"], settings.timezone)
        text = f"no run of {suite} on {runner} for {plural(days, 'day')} (the last: {started})"
        key = f"silent:{suite}:{runner}:{run['id']}"
        if _queue(settings, key, (suite, runner, None), [event("missed_night", CRITICAL, text)]):
            queued.append(key)
    return queued


def tick(settings: Settings) -> None:
    """The scheduler's job: look for missed nights, send what is due."""
    try:
        missed_nights(settings)
        send(settings, due_only=True)
    except Exception:
        log.exception("alerts: the periodic check failed")


# Formats: what each destination's webhook takes.


def _link(settings: Settings, run_id: int | None) -> str | None:
    if settings.public_url and run_id is not None:
        return f"{settings.public_url.rstrip('/')}/runs/{run_id}"
    return None


def lines(alert: dict[str, Any]) -> list[str]:
    """The alert as plain lines: a head, one line per event with the tests it names."""
    run = f" run #{alert['run_id']}" if alert["run_id"] is not None else ""
    out = [f"[{alert['level']}] {alert['suite']} on {alert['runner']}{run}"]
    for e in alert["events"]:
        named = ", ".join(e["tests"])
        more = f" and {e['more']} more" if e["more"] else ""
        out.append(f"- {e['text']}" + (f": {named}{more}" if named else ""))
    if alert.get("link"):
        out.append(alert["link"])
    return out


def _text(alert: dict[str, Any], escape: dict[str, str]) -> str:
    text = "\n".join(lines(alert))
    for raw, safe in escape.items():  # test ids are untrusted: no mentions, no markup
        text = text.replace(raw, safe)
    return text if len(text) <= TEXT_MAX else text[: TEXT_MAX - 1] + "…"


SLACK_ESCAPE = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}  # Slack's own rule
ROBOT_ESCAPE = {"<": "＜", ">": "＞", "@": "＠"}  # Feishu's <at>, DingTalk/WeCom's @mentions


def body(config: AlertConfig, alert: dict[str, Any]) -> dict[str, Any]:
    if config.format in ("json", "file"):
        return alert
    if config.format == "slack":
        return {"text": _text(alert, SLACK_ESCAPE)}
    text = _text(alert, ROBOT_ESCAPE)
    if config.format == "feishu":
        return {"msg_type": "text", "content": {"text": text}}
    return {"msgtype": "text", "text": {"content": text}}  # WeCom and DingTalk alike


def _refused(answer: httpx.Response) -> str | None:
    """The robots answer 200 with an error code in the body (Feishu `code`, WeCom and DingTalk
    `errcode`): a refused message is not a sent one."""
    try:
        data = answer.json()
    except ValueError:
        return None
    if isinstance(data, dict):
        for key in ("code", "errcode", "StatusCode"):
            if data.get(key) not in (None, 0):
                return f"{key} {data.get(key)}: {str(data.get('msg') or data.get('errmsg'))[:100]}"
    return None


def deliver(config: AlertConfig, alert: dict[str, Any], client: httpx.Client) -> None:
    """Send one alert to one destination; raises RuntimeError with a message free of its URL."""
    payload = body(config, alert)
    if config.format == "file":
        try:
            config.path.parent.mkdir(parents=True, exist_ok=True)
            with config.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(payload, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise RuntimeError(f"cannot append to {config.path}: {exc.strerror}") from None
        return
    url = config.url()
    if not url:
        raise RuntimeError(f"${config.url_env} is not set")
    try:
        answer = client.post(url, json=payload)
    except httpx.HTTPError as exc:  # its text may hold the address: name only its kind
        raise RuntimeError(f"not reached ({type(exc).__name__})") from None
    if answer.status_code >= 300:
        raise RuntimeError(f"answered {answer.status_code}")
    if why := _refused(answer):
        raise RuntimeError(f"refused ({why})")


def send(settings: Settings, due_only: bool = False) -> int:
    """Send the queued deliveries (only those due, with `due_only`); how many went out. Each is
    claimed first (`store.claim_delivery`), so two senders never send one twice."""
    configs = {a.name: a for a in settings.alerts}
    with session_scope(settings.database_url) as session:
        due = [
            (d.alert_id, d.destination, d.next_try_at, _payload(settings, a))
            for d, a in queries.unsent_deliveries(session, datetime.now(UTC) if due_only else None)
        ]
    if not due:  # the common case: no client (its TLS set-up) for nothing
        return 0
    sent = 0
    with httpx.Client(timeout=httpx.Timeout(20, connect=10)) as client:
        for alert_id, name, seen, alert in due:
            with session_scope(settings.database_url) as session:
                if not store.claim_delivery(session, alert_id, name, seen, LEASE):
                    continue  # another sender has it
            config = configs.get(name)
            try:
                if config is None:
                    raise RuntimeError("no longer configured")
                deliver(config, alert, client)
            except RuntimeError as exc:
                with session_scope(settings.database_url) as session:
                    store.alert_failed(
                        session, alert_id, name, str(exc), partial(backoff, settings)
                    )
                log.warning("alert %s to %s not sent: %s", alert["id"], name, exc)
                continue
            with session_scope(settings.database_url) as session:
                store.alert_sent(session, alert_id, name)
            sent += 1
    return sent


def _payload(settings: Settings, alert: Any) -> dict[str, Any]:
    return {
        "id": alert.key,  # the same on every retry: a receiver can drop a repeat
        "suite": alert.suite,
        "runner": alert.runner,
        "run_id": alert.run_id,
        "level": level_of(alert.events),
        "events": alert.events,
        "link": _link(settings, alert.run_id),
    }
