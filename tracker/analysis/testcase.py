"""A test's history, verdict and evidence, polluter search and first bad commit, and recent
failures: the test page's data, its API twin's, and what `tracker report` writes from."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from tracker import quarantine, queries
from tracker.analysis.report import Scope
from tracker.analysis.stats import wilson
from tracker.config import Settings
from tracker.records import FAILING


def test_data(session: Session, settings: Settings, test_id: int) -> dict[str, Any]:
    info = queries.case_info(session, test_id)
    past = queries.case_history(session, test_id)
    scope = Scope(session, settings, info["suite"])
    stats = scope.stats().get(test_id)
    polluter = queries.investigations(session, [test_id]).get(test_id)
    quarantined = [
        q for q in quarantine.listing(session, info["suite"]) if q["nodeid"] == info["nodeid"]
    ]
    searched = [*polluter["culprits"], *polluter.get("suspects", [])] if polluter else []
    names = [*(stats.ran_before if stats else []), *searched]
    return {
        "test": info,
        "days": scope.days,
        "stats": stats,
        "interval": wilson(stats.runs - stats.failures, stats.runs)
        if stats and stats.runs
        else None,
        "quarantined": quarantined[0] if quarantined else None,
        "history": past,
        "failures": [h for h in reversed(past) if h["first"] in FAILING][:10],
        "polluter": polluter,
        "bisect": queries.investigations(session, [test_id], "bisect").get(test_id),
        "ids": queries.test_ids(session, info["suite"], names),
    }
