"""Shared fixtures: a temporary database and data folder per test, and a helper that runs a
fixture suite through the real runner (real pytest subprocesses) and stores it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import SUITES

from tracker import queries, store
from tracker.config import RunnerConfig, Settings, SuiteConfig
from tracker.db import session_scope
from tracker.runner.execute import execute


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        database_url=f"sqlite:///{tmp_path / 'tracker.db'}",
        data_dir=tmp_path / "data",
        runner=RunnerConfig(name="ci", device="cpu"),
    )


@pytest.fixture
def run_suite(settings: Settings, tmp_path: Path):
    """Run files of a fixture suite, store the run, return `tracker show --json`'s shape."""

    def run(*args: str, suite: str = "realities", suite_path: Path | None = None, **options):
        state = tmp_path / "state"
        state.mkdir(exist_ok=True)
        config = SuiteConfig(
            name=suite,
            path=suite_path or SUITES / suite,
            python=sys.executable,
            args=list(args) or ["."],
            env={"FIXTURE_STATE": str(state)},
            **{"test_timeout": 1, "run_timeout": 120, "reruns": 1, **options},
        )
        record = execute(settings, config)
        with session_scope(settings.database_url) as session:
            saved = store.save_run(session, record)
            return queries.run_detail(session, saved.id)

    return run
