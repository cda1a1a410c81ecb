"""A module fixture that records each time it is set up, per process."""

import os

import pytest


@pytest.fixture(scope="module")
def expensive():
    state = os.environ.get("FIXTURE_STATE")
    if state:
        with open(os.path.join(state, "module_setups.txt"), "a") as fh:
            fh.write(f"{os.getpid()}\n")
    return 1


@pytest.mark.parametrize("i", range(4))
def test_uses_it(expensive, i):
    assert expensive == 1
