"""Two tests that pollute only together."""

import pytest
import shared


@pytest.mark.parametrize("i", range(8))
def test_before(i):
    if i == 1:
        shared.a = True
    if i == 6:
        shared.b = True


def test_pair_victim():
    assert not (shared.a and shared.b), "two tests left state behind"
