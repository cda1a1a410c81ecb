import pytest

# Shared "device" state that tests can leave behind, the way a GPU/NPU context does.
DEVICE_STATE = {"scratch_in_use": 0}


@pytest.fixture
def device_state():
    return DEVICE_STATE
