"""Polluter search: which earlier tests make an order-dependent test fail?

A victim failed in suite order and passed alone. Fresh pytest processes run "candidates, then
the victim", where the candidates are the tests that ran before it in the same process (in that
order), and delta debugging (Zeller's ddmin) shrinks them to a smallest set that still makes it
fail: one polluter, a pair that only pollutes together, or nothing smaller than the whole
prefix. Pollution may itself be probabilistic, so each probe is repeated until the victim fails
or `tries` runs pass. A victim that fails alone too, or that the whole prefix does not make
fail, is not blamed on a neighbour; nor is a set that the search reached but that then passed
`tries` times (a failure that comes and goes can lead ddmin anywhere: on the device, Liger's
falconh1mlp search ended at 6 tests that then passed 2/2).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from tracker.records import FAILING, bound_nodeid
from tracker.runner.process import Job, run_process

ONE = "polluter"  # a single test pollutes
SET = "polluters"  # only several together
PREFIX = "whole prefix"  # reproduced only with every candidate
NOT_REPRODUCED = "not reproduced"  # the prefix does not make it fail
FAILS_ALONE = "fails alone"  # flaky or broken by itself: no neighbour to blame
NOT_CONFIRMED = "not confirmed"  # the smallest set found passed when run again: suspects only


@dataclass
class Search:
    victim: str
    verdict: str
    culprits: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # "fails after X: 3/3", ...
    probes: int = 0  # pytest processes run
    suspects: list[str] = field(default_factory=list)  # a set that did not fail again: no blame

    def as_dict(self) -> dict:
        return asdict(self)


class Prober:
    """Counts the processes; `run(order)` says whether the victim (last) failed in one."""

    def __init__(self, run: Callable[[list[str]], bool], victim: str, tries: int) -> None:
        self.run, self.victim, self.tries, self.processes = run, victim, max(1, tries), 0

    def once(self, before: list[str]) -> bool:
        self.processes += 1
        return self.run([*before, self.victim])

    def fails(self, before: list[str]) -> bool:
        """Fails in any of `tries` fresh processes (stops at the first failure)."""
        return any(self.once(before) for _ in range(self.tries))

    def count(self, before: list[str]) -> int:
        """How many of `tries` fresh processes fail (all of them run)."""
        return sum(self.once(before) for _ in range(self.tries))


def ddmin(candidates: list[str], fails: Callable[[list[str]], bool]) -> list[str]:
    """A 1-minimal subset of `candidates` (order kept) for which `fails` still holds."""
    current, n = list(candidates), 2
    while len(current) >= 2:
        size = len(current)
        chunks = [current[i * size // n : (i + 1) * size // n] for i in range(n)]
        chunks = [c for c in chunks if c]
        reduced = next((c for c in chunks if fails(c)), None)
        if reduced is not None:
            current, n = reduced, 2
            continue
        if n > 2:
            complement = next(
                (r for c in chunks if fails(r := [t for t in current if t not in c])), None
            )
            if complement is not None:
                current, n = complement, max(n - 1, 2)
                continue
        if n >= size:
            break
        n = min(size, 2 * n)
    return current


def search(
    victim: str, candidates: list[str], run: Callable[[list[str]], bool], tries: int = 3
) -> Search:
    """Find what makes `victim` fail among `candidates` (the tests before it, in run order)."""
    probe = Prober(run, victim, tries)
    alone_failed = probe.count([])
    alone = f"passes alone: {tries - alone_failed}/{tries}"
    if alone_failed:
        return Search(victim, FAILS_ALONE, evidence=[alone], probes=probe.processes)
    if not candidates or not probe.fails(candidates):
        evidence = [f"passes after all {len(candidates)} earlier tests: {tries}/{tries}", alone]
        return Search(victim, NOT_REPRODUCED, evidence=evidence, probes=probe.processes)
    culprits = ddmin(candidates, probe.fails)
    failed = probe.count(culprits)
    names = " + ".join(culprits) if len(culprits) <= 3 else f"{len(culprits)} tests"
    evidence = [f"fails after {names}: {failed}/{tries}", alone]
    if not failed:
        evidence.insert(0, f"fails after all {len(candidates)} earlier tests")
        return Search(victim, NOT_CONFIRMED, [], evidence, probe.processes, suspects=culprits)
    if len(culprits) == 1:
        verdict = ONE
    elif len(culprits) == len(candidates):
        verdict = PREFIX
    else:
        verdict = SET
    return Search(victim, verdict, culprits, evidence, probe.processes)


class OutOfTime(Exception):
    """The search's time budget ran out: no verdict (a cut probe would read as a pass)."""


def in_processes(job: Job, until: float | None = None) -> Callable[[list[str]], bool]:
    """Each probe in a fresh pytest process running exactly `order`: did the last one fail?
    No probe starts after `until` (time.monotonic())."""
    numbers = itertools.count()

    def run(order: list[str]) -> bool:
        if until is not None and time.monotonic() > until:
            raise OutOfTime("the polluter search's time budget is spent")
        result = run_process(job, order, f"probe{next(numbers)}")
        victim = bound_nodeid(order[-1])
        return any(a.nodeid == victim and a.outcome in FAILING for a in result.attempts)

    return run
