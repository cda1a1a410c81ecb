"""A simulated device that some tests fill. Each slice of their work holds an exclusive lock (flock
on one file in FIXTURE_STATE, one per visible device), so tests that fill it at the same time take
turns and all of them stretch, as kernels that fill a GPU do. Light tests and sleepers never touch
it.

FILL_TOGETHER=N makes the first N tests that use it wait (10 s at most) for each other, so that
they take turns also on a loaded machine, where their processes start seconds apart; later
ones (reruns) do not wait."""

import fcntl
import os
import time
from pathlib import Path

import pytest

SLICE = 0.05


class Device:
    def __init__(self, path: Path) -> None:
        self.path = path

    def use(self, seconds: float) -> None:
        if together := int(os.environ.get("FILL_TOGETHER", "0")):
            arrived = self.path.with_name("arrived")
            with arrived.open("a") as fh:
                fh.write(".")
            wait = time.monotonic() + 10
            while len(arrived.read_text()) < together and time.monotonic() < wait:
                time.sleep(0.01)
        with self.path.open("a") as fh:
            left = seconds
            while left > 0:
                fcntl.flock(fh, fcntl.LOCK_EX)
                time.sleep(min(SLICE, left))
                fcntl.flock(fh, fcntl.LOCK_UN)
                left -= SLICE
                time.sleep(0.002)  # a test waiting for the device takes its turn


@pytest.fixture
def device() -> Device:
    """One lock per device the slot sees (one on CPU): a 2-GPU night's tests take turns only
    with those on their own device."""
    state = Path(os.environ.get("FIXTURE_STATE", "/tmp"))
    return Device(state / f"device{os.environ.get('CUDA_VISIBLE_DEVICES', '')}.lock")


@pytest.fixture(autouse=True)
def _seen_devices(request):
    """With DEVICES_LOG set, each test writes down the devices it was given."""
    if log := os.environ.get("DEVICES_LOG"):
        with open(log, "a") as fh:
            fh.write(f"{request.node.nodeid} {os.environ.get('CUDA_VISIBLE_DEVICES')}\n")


def fill_seconds() -> float:
    return float(os.environ.get("FILL_S", "1.2"))
