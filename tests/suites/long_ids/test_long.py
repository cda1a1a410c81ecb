"""A parametrize id longer than the 1,000 characters the store keeps of an id."""

import pytest

LONG = "a" * 1200


@pytest.mark.parametrize("value", [LONG, "b"], ids=[LONG, "b"])
def test_long(value):
    assert len(value) < 5
