"""Small statistics with no dependencies: Wilson intervals, the Beta posterior of a success rate,
flip rates, and how many runs make a rate claim meaningful."""

from __future__ import annotations

import itertools
import math

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval: honest at small n and at rates near 0 or 1, where the normal
    approximation claims certainty it does not have."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def prob_rate_at_least(successes: int, n: int, threshold: float) -> float:
    """P(true rate >= threshold) under a Beta(1,1) prior, i.e. posterior Beta(s+1, n-s+1).

    For integer parameters the Beta tail is a binomial sum: P(X >= t) for X ~ Beta(a, b) equals
    P(Bin(a+b-1, t) <= a-1). Terms are summed in log space so that n in the thousands is fine.
    """
    if not 0 <= successes <= n:
        raise ValueError("need 0 <= successes <= n")
    if threshold <= 0:
        return 1.0
    if threshold >= 1:
        return 0.0
    a, b = successes + 1, n - successes + 1
    m = a + b - 1
    log_t, log_1t = math.log(threshold), math.log1p(-threshold)
    total = 0.0
    for i in range(a):
        log_term = (
            math.lgamma(m + 1)
            - math.lgamma(i + 1)
            - math.lgamma(m - i + 1)
            + i * log_t
            + (m - i) * log_1t
        )
        total += math.exp(log_term)
    return min(1.0, max(0.0, total))


def flips(sequence: list[bool]) -> int:
    return sum(1 for x, y in itertools.pairwise(sequence) if x != y)


def flip_rate(sequence: list[bool]) -> float:
    """Changes between consecutive results / (n - 1): 0 for a stable or once-broken test, high
    for one that alternates."""
    return flips(sequence) / (len(sequence) - 1) if len(sequence) > 1 else 0.0


def runs_needed(target: float, z: float = Z95) -> int:
    """How many runs, all passing, push the Wilson lower bound to `target`."""
    n = 1
    while wilson(n, n, z)[0] < target:
        n += 1
    return n
