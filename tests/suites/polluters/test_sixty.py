"""Sixty tests: the 30th leaves state behind that makes the last one fail, in one process."""

import pytest
import shared


@pytest.mark.parametrize("i", range(59))
def test_step(i):
    if i == 29:
        shared.dirty = True


def test_victim():
    assert not shared.dirty, "state left behind by an earlier test"
