"""Paths and small helpers shared by the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SUITES = Path(__file__).parent / "suites"
DATA = Path(__file__).parent / "data"


def outcomes(detail: dict) -> dict[str, tuple[str, list[str]]]:
    """nodeid -> (final outcome, [attempt outcomes])"""
    return {
        r["nodeid"]: (r["outcome"], [a["outcome"] for a in r["attempts"]])
        for r in detail["results"]
    }


TRACKER = [sys.executable, "-m", "tracker.cli"]


def tracker(tmp_path: Path, *args: str, config: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env["TRACKER_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.db'}"
    if config is not None:
        (tmp_path / "tracker.toml").write_text(config)
    return subprocess.run(
        [*TRACKER, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


def junit(cases: dict[str, tuple[str, str | None]]) -> str:
    """A JUnit XML file: nodeid -> (passed|failed|skipped, message)."""
    from xml.sax.saxutils import quoteattr

    rows = []
    for nodeid, (outcome, message) in cases.items():
        path, name = nodeid.split("::", 1)
        classname = path.removesuffix(".py").replace("/", ".")
        inner = ""
        if outcome == "failed":
            inner = f"<failure message={quoteattr(message or '')}>trace</failure>"
        elif outcome == "skipped":
            inner = f"<skipped message={quoteattr(message or '')}/>"
        rows.append(
            f'<testcase classname="{classname}" name={quoteattr(name)} time="0.5">{inner}'
            "</testcase>"
        )
    return f'<testsuite name="pytest">{"".join(rows)}</testsuite>'
