"""A polluter that pollutes every other time it runs (1st, 3rd, ...), among fillers."""

import pytest
import shared


@pytest.mark.parametrize("i", range(6))
def test_before(i):
    if i == 2 and shared.count("half") % 2 == 1:
        shared.half = True


def test_half_victim():
    assert not shared.half, "state left behind, this time"
