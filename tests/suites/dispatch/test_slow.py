import time

import pytest


@pytest.mark.parametrize("seconds", [1.1, 2.1, 0.1])
def test_slow(seconds):
    time.sleep(seconds)
