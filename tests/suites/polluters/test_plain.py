"""A plain flaky test (fails every other time, wherever it runs) after innocent neighbours."""

import pytest
import shared


@pytest.mark.parametrize("i", range(5))
def test_before(i):
    pass


def test_plain_victim():
    assert shared.count("plain") % 2 == 0, "flaky by itself"
