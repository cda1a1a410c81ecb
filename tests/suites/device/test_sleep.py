import time

import pytest


@pytest.mark.parametrize("i", range(2))
def test_sleep(i):
    time.sleep(1.2)  # long, and shares the device: it never touches it
