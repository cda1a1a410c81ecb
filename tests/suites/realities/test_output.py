import pytest

# Each test here writes megabytes into its reports, and pytest-timeout's limit covers the
# reporting too: its alarm landing in a reporting hook ends pytest (INTERNALERROR), and the test
# is a timeout. Under CI's load the reporting outlasted the 1 s limit the runner's tests give
# (a rerun was recorded `crashed` then), so these tests get pytest-timeout's limit of their
# own; the runner's watchdog (the limit + 2 s) still applies.
pytestmark = pytest.mark.timeout(60)


def test_prints_megabytes():
    for _ in range(5000):
        print("x" * 1000)


def test_fails_with_huge_message():
    print("y" * 3_000_000)
    raise AssertionError("mismatch: " + "z" * 200_000)
