"""A night that runs to its limit with failures waiting for their reruns: one test holds a slot
until the limit, four fail the first time and pass when rerun, slowly (a cold kernel compiles)."""

import os
from pathlib import Path

import pytest


@pytest.fixture
def state_dir():
    return Path(os.environ["FIXTURE_STATE"])
