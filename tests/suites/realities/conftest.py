import os
from pathlib import Path

import pytest

# process-wide "device" state, like a GPU/NPU context
DEVICE = {"poisoned": False, "polluted": False}


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture
def state_dir():
    return Path(os.environ["FIXTURE_STATE"])
