import math

import pytest


def silu(v):
    return v / (1 + math.exp(-v))


def swiglu(a, b):
    return [silu(x) * y for x, y in zip(a, b, strict=True)]


@pytest.mark.parametrize("n", [8, 32, 128])
def test_correctness(n):
    a = [i / n for i in range(n)]
    assert swiglu(a, [1.0] * n) == [silu(x) for x in a]


@pytest.mark.xfail(reason="fp16 accumulation is not exact yet", strict=False)
def test_fp16_exact():
    assert 0.1 + 0.2 == 0.3
