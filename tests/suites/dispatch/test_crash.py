import os


def test_before():
    pass


def test_abort():
    os.abort()  # the process dies in the middle of the queue


def test_after():
    pass
