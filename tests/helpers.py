"""Paths and small helpers shared by the tests."""

from __future__ import annotations

from pathlib import Path

SUITES = Path(__file__).parent / "suites"
DATA = Path(__file__).parent / "data"


def outcomes(detail: dict) -> dict[str, tuple[str, list[str]]]:
    """nodeid -> (final outcome, [attempt outcomes])"""
    return {
        r["nodeid"]: (r["outcome"], [a["outcome"] for a in r["attempts"]])
        for r in detail["results"]
    }
