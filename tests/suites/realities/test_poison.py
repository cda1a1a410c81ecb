import pytest


def test_poisons_device(device):
    device["poisoned"] = True
    raise RuntimeError(
        "EZ9999: Inner Error! The aicore execution is abnormal. error code is 507035"
    )


@pytest.mark.parametrize("i", range(5))
def test_after_poison(device, i):
    if device["poisoned"]:
        raise RuntimeError("device previously failed: error code is 507035")
