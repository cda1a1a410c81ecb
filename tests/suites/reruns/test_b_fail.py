import time

import pytest


@pytest.mark.parametrize("case", range(4))
def test_fails_once(state_dir, case):
    marker = state_dir / f"failed-once-{case}"
    if not marker.exists():
        marker.write_text("1")
        raise AssertionError("out of resource: shared memory")
    time.sleep(3)
