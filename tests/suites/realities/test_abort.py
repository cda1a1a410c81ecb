import os


def test_before_abort():
    pass


def test_abort():
    os.abort()


def test_after_abort():
    pass


def test_after_abort_too():
    pass
