import math

import pytest


def rope(x, pos, base=10000.0):
    out = []
    for i in range(0, len(x), 2):
        theta = pos / base ** (i / len(x))
        c, s = math.cos(theta), math.sin(theta)
        out += [x[i] * c - x[i + 1] * s, x[i] * s + x[i + 1] * c]
    return out


@pytest.mark.parametrize("pos", [0, 1, 7, 4096])
@pytest.mark.parametrize("dim", [8, 64])
def test_preserves_norm(pos, dim):
    x = [1.0] * dim
    assert math.isclose(sum(v * v for v in rope(x, pos)), dim, rel_tol=1e-9)
