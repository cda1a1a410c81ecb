"""Failures grouped by cause: the signature is the exception type and message with everything
that varies from one occurrence to the next masked (numbers, hex, addresses, paths, shapes,
quoted values), so 300 `OutOfResources: Required: 98304` and `Required: 131072` are one cluster.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracker.analysis.history import Observation
from tracker.records import FAILING
from tracker.signatures import is_device_fatal

_MASKS = [
    # from a token's start only, never giving back what it took: linear in the message (it was
    # quadratic: 1.0-1.7 s for a 16,000-character line, 2,608 of them on a broken night)
    (re.compile(r"(?<![\w.-])(?:[A-Za-z]:)?(?:[\w.-]*+/)++[\w.-]++(?::\d+)?"), "<path>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b"), "<hex>"),  # digests, not long numbers
    (
        re.compile(
            r"torch\.Size\(\[[^\]]*\]\)|\((?:\s*\d+\s*,)+\s*\d*\s*\)|\[(?:\s*\d+\s*,)+\s*\d+\s*\]"
        ),
        "<shape>",
    ),
    # numbers standing alone (not the 16 of bf16); Ascend error codes name the cause: kept
    (
        re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\d.])"),
        lambda m: m.group(0) if re.fullmatch(r"(?:507|207)\d{3}", m.group(0)) else "<n>",
    ),
    (re.compile(r"'[^']{0,200}'|\"[^\"]{0,200}\""), "<str>"),
]
SIGNATURE_MAX = 300
SIGNATURE_SOURCE = 4000  # of a message's first line: what a signature can be made from


def signature(message: str | None) -> str:
    """`RuntimeError: Required: 98304 at /a/b.py:12` -> `RuntimeError: Required: <n> at <path>`."""
    if not message:
        return "(no message)"
    line = message.strip().splitlines()[0][:SIGNATURE_SOURCE] if message.strip() else ""
    for pattern, mask in _MASKS:
        line = pattern.sub(mask, line)
    return re.sub(r"\s+", " ", line).strip()[:SIGNATURE_MAX] or "(no message)"


@dataclass
class Cluster:
    signature: str
    size: int = 0  # failures (first attempts) with this signature
    tests: set[str] = field(default_factory=set)
    runs: set[int] = field(default_factory=set)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    device_fatal: bool = False
    cascade_runs: list[int] = field(default_factory=list)
    example: str | None = None

    @property
    def key(self) -> str:
        """A short stable name for links: the signature's hash."""
        return hashlib.sha256(self.signature.encode()).hexdigest()[:12]

    def as_dict(self, max_tests: int = 20) -> dict[str, Any]:
        return {
            "key": self.key,
            "signature": self.signature,
            "size": self.size,
            "tests": len(self.tests),
            "test_examples": sorted(self.tests)[:max_tests],
            "runs": sorted(self.runs),
            "first_seen": self.first_seen.isoformat() if self.first_seen else None,
            "last_seen": self.last_seen.isoformat() if self.last_seen else None,
            "device_fatal": self.device_fatal,
            "cascade_runs": self.cascade_runs,
            "example": self.example,
        }


def cascade_victims(
    observations: list[Observation], cascade_share: float = 0.5, cascade_min: int = 5
) -> set[tuple[int, int]]:
    """(run, test) pairs whose failure belongs to a device-fatal cascade of their run: a poisoned
    device failing everything after it says nothing about the tests themselves. Only device-fatal
    cascades: unrelated tests failing with the same generic message (`Tensor-likes are not
    close!`) also form one big cluster, and each of those failures is real evidence."""
    cascades = {
        (run, c.signature)
        for c in clusters(observations, cascade_share, cascade_min)
        if c.device_fatal
        for run in c.cascade_runs
    }
    return {
        (ob.run_id, ob.test_id)
        for ob in observations
        if ob.first in FAILING and (ob.run_id, signature(ob.message)) in cascades
    }


def clusters(
    observations: list[Observation], cascade_share: float = 0.5, cascade_min: int = 5
) -> list[Cluster]:
    """Clusters of first-attempt failures, biggest first. A cluster that holds at least
    `cascade_share` of a run's failures (and at least `cascade_min` of them) is a cascade there."""
    found: dict[str, Cluster] = {}
    per_run: dict[int, Counter[str]] = defaultdict(Counter)
    for ob in observations:
        if ob.first not in FAILING:
            continue
        sig = signature(ob.message)
        c = found.get(sig)
        if c is None:
            c = found[sig] = Cluster(
                sig,
                device_fatal=is_device_fatal(ob.message or ""),
                example=(ob.message or "")[:500],
            )
        c.size += 1
        c.tests.add(ob.nodeid)
        c.runs.add(ob.run_id)
        c.first_seen = min(filter(None, (c.first_seen, ob.started_at)))
        c.last_seen = max(filter(None, (c.last_seen, ob.started_at)))
        per_run[ob.run_id][sig] += 1
    for run_id, counts in per_run.items():
        total = sum(counts.values())
        for sig, n in counts.items():
            if n >= cascade_min and n >= cascade_share * total:
                found[sig].cascade_runs.append(run_id)
    return sorted(found.values(), key=lambda c: (-c.size, c.signature))
