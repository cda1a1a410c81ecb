import math

import pytest


def rms_norm(x, weight, eps=1e-6):
    rms = math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v / rms * w for v, w in zip(x, weight, strict=True)]


@pytest.mark.parametrize("n", [4, 16, 64, 256])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_correctness(n, dtype):
    x = [math.sin(i) for i in range(n)]
    out = rms_norm(x, [1.0] * n)
    assert abs(sum(v * v for v in out) / n - 1.0) < 1e-3


@pytest.mark.skip(reason="needs an NPU with 64 GB HBM")
def test_large_hidden_size():
    pass
