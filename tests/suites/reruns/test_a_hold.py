import time


def test_hold():
    time.sleep(600)  # a heavy case the run's limit cuts
