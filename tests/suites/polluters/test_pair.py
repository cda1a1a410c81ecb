"""Two tests that pollute only together."""

import pytest
import shared


@pytest.mark.parametrize("i", range(4))
def test_before(i):
    if i == 0:
        shared.a = True
    if i == 2:
        shared.b = True


def test_pair_victim():
    assert not (shared.a and shared.b), "two tests left state behind"
