"""What each run changed as stored, the alerts still to send, the issues filed upstream."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from tracker.models import (
    Alert,
    AlertDelivery,
    IssueLink,
)
from tracker.queries.runs import _iso


def run_alert(session: Session, run_id: int) -> dict[str, Any] | None:
    """The events worked out when run `run_id` was stored, then those of investigations that
    replayed it (a polluter found in its order), with where they were sent."""
    alerts = list(
        session.execute(select(Alert).where(Alert.run_id == run_id).order_by(Alert.id)).scalars()
    )
    if not alerts:
        return None
    sent = session.execute(
        select(AlertDelivery)
        .where(AlertDelivery.alert_id.in_([a.id for a in alerts]))
        .order_by(AlertDelivery.alert_id, AlertDelivery.destination)
    ).scalars()
    return {
        "events": [e for a in alerts for e in a.events or []],
        "deliveries": [
            {"destination": d.destination, "sent_at": _iso(d.sent_at), "tries": d.tries}
            for d in sent
        ],
    }


def unsent_deliveries(
    session: Session, due_by: datetime | None = None
) -> list[tuple[AlertDelivery, Alert]]:
    """Unsent alert deliveries (with `due_by`, only those whose next try is due), oldest first."""
    query = (
        select(AlertDelivery, Alert)
        .join(Alert, Alert.id == AlertDelivery.alert_id)
        .where(AlertDelivery.sent_at.is_(None))
        .order_by(Alert.id, AlertDelivery.destination)
    )
    if due_by is not None:
        query = query.where(AlertDelivery.next_try_at <= due_by)
    return list(session.execute(query).all())


def issue_links(session: Session, suite: str | None = None) -> list[IssueLink]:
    query = select(IssueLink).order_by(IssueLink.id)
    if suite is not None:
        query = query.where(IssueLink.suite == suite)
    return list(session.execute(query).scalars())
