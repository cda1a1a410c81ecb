"""Flaky / broken verdicts on hand-made histories, and clusters' signatures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tracker.analysis.clusters import clusters, signature
from tracker.analysis.flaky import judge, ranked_flaky
from tracker.analysis.history import Observation

T0 = datetime(2026, 11, 1, 14, tzinfo=UTC)


def history(
    pattern: str,
    commits: str | None = None,
    final: str | None = None,
    test_id=1,
    nodeid="t.py::x",
    env=1,
) -> list[Observation]:
    """One observation per character: P pass, F fail, R fail-then-passed-on-rerun, S skip."""
    obs = []
    for i, ch in enumerate(pattern):
        first = {"P": "passed", "F": "failed", "R": "failed", "S": "skipped"}[ch]
        fin = {"P": "passed", "F": "failed", "R": "flaky", "S": "skipped"}[ch]
        commit = commits[i] if commits else f"c{i}"
        obs.append(
            Observation(
                i,
                T0 + timedelta(days=i),
                commit,
                1,
                env,
                test_id,
                nodeid,
                "x",
                final or fin,
                first,
                "AssertionError: 1 != 2" if ch in "FR" else None,
            )
        )
    return obs


@pytest.mark.parametrize(
    ("pattern", "commits", "verdict", "evidence"),
    [
        ("PPPPPPPP", None, "stable", set()),
        ("PPPRPPPP", None, "flaky", {"rerun"}),  # failed, passed alone in the same run
        ("PPFPPPPP", "aaabbbbb", "flaky", {"same_input"}),  # pass and fail on commit a
        ("PFPPFPPP", None, "flaky", {"history"}),  # 2 failures, 4 flips, no reruns
        ("PPPPFFFF", None, "broken", set()),  # regression at commit c4
        ("FFFFPPPP", None, "stable", set()),  # fixed: one flip
        ("FFFF", None, "failing", set()),
        ("SSSS", None, "no_data", set()),
        ("PPFPPPPP", None, "stable", set()),  # a single failure on its own commit: not enough
    ],
)
def test_verdicts(pattern, commits, verdict, evidence):
    s = judge(history(pattern, commits))[1]
    assert s.verdict == verdict
    assert set(s.evidence) == evidence


def test_broken_since_names_the_commit():
    s = judge(history("PPPPFFFF", "aaaabbbb"))[1]
    assert (s.verdict, s.broken_since, s.last_good) == ("broken", "b", "a")
    assert (s.broken_run, s.good_run) == (4, 3)  # the test page compares their environments
    assert s.flip_rate == pytest.approx(1 / 7)


def test_broken_without_a_commit_change_names_no_commit():
    """Passes until run 4 and fails since, all on commit a (the environment changed): broken,
    but no commit broke it, so none is named and a bisect has nothing to search."""
    obs = history("PPPP", "aaaa", env=1) + [
        o.__class__(**{**o.__dict__, "run_id": o.run_id + 4, "environment_id": 2})
        for o in history("FFFF", "aaaa")
    ]
    s = judge(obs)[1]
    assert (s.verdict, s.broken_since, s.last_good) == ("broken", None, None)
    assert (s.broken_run, s.good_run) == (4, 3)
    assert s.since().startswith("broken since run #4 (last good run #3), with no commit change")
    unrecorded = [o.__class__(**{**o.__dict__, "commit": None}) for o in history("PPPPFFFF")]
    assert judge(unrecorded)[1].broken_since is None  # ingested without a commit


def test_same_commit_on_another_environment_is_not_the_same_input():
    obs = history("PP", "aa", env=1)
    obs += [
        o.__class__(
            **{
                **o.__dict__,
                "environment_id": 2,
                "first": "failed",
                "final": "failed",
                "run_id": o.run_id + 10,
            }
        )
        for o in history("F", "a")
    ]
    assert "same_input" not in judge(obs)[1].evidence


def test_ranking_by_wilson_lower_bound():
    obs = history("PR", test_id=1, nodeid="t.py::one_of_two")  # 1/2 failed
    obs += history("RPRPRPRPRPRPRPRPRPRP", test_id=2, nodeid="t.py::ten_of_twenty")
    ranked = [s.nodeid for s in ranked_flaky(judge(obs))]
    assert ranked == ["t.py::ten_of_twenty", "t.py::one_of_two"]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "RuntimeError: OutOfResources: shared memory, Required: 98304, Hardware limit: 65536",
            "RuntimeError: OutOfResources: shared memory, Required: <n>, Hardware limit: <n>",
        ),
        (
            "EZ9999: Inner Error! error code is 507035 at /usr/lib/x.so:12 addr 0x7ffe12",
            "EZ9999: Inner Error! error code is 507035 at <path> addr <hex>",
        ),
        (
            "AssertionError: Mismatched elements: 3 / 4096 shape torch.Size([2, 128]) bf16",
            "AssertionError: Mismatched elements: <n> / <n> shape <shape> bf16",
        ),
        (
            "Failed: Timeout (>900.0s) from pytest-timeout.",
            "Failed: Timeout (><n>s) from pytest-timeout.",
        ),
        (None, "(no message)"),
    ],
)
def test_signature(message, expected):
    assert signature(message) == expected


def test_cascade_and_device_fatal():
    obs = []
    for i in range(8):
        msg = "RuntimeError: device previously failed: error code is 507035" if i else "E: 1 != 2"
        obs.append(Observation(1, T0, "c", 1, 1, i, f"t.py::t{i}", "t", "failed", "failed", msg))
    found = clusters(obs, cascade_share=0.5, cascade_min=5)
    assert [(c.size, c.device_fatal, c.cascade_runs) for c in found] == [
        (7, True, [1]),
        (1, False, []),
    ]


def test_cascade_victims_are_no_evidence():
    """A stable test that fails once as the victim of a poisoned run is not flaky."""
    obs = history("PPPPP", test_id=1, nodeid="t.py::victim", commits="aaaaa")
    obs = [o for o in obs if o.run_id != 2]
    cascade = "RuntimeError: device previously failed: error code is 507035"
    for i in range(1, 9):  # run 2: this test and 7 others fail the same way
        obs.append(
            Observation(
                2,
                T0 + timedelta(days=2),
                "a",
                1,
                1,
                i,
                f"t.py::t{i}" if i > 1 else "t.py::victim",
                "x",
                "failed",
                "failed",
                cascade,
            )
        )
    stats = judge(obs)
    assert stats[1].verdict == "stable" and stats[1].runs == 4


def test_a_signature_costs_the_same_per_character_on_long_messages():
    """Counted in regex steps, not timed: the path mask may start only at a token's start and
    never gives back what it took, so a 16,000-character token is read once, not 16,000 times."""
    from tracker.analysis import clusters

    path = clusters._MASKS[0][0]
    assert path.pattern.startswith("(?<![\\w.-])") and "*+/)++" in path.pattern
    assert clusters.signature("x" * 100_000) == "x" * clusters.SIGNATURE_MAX
    assert clusters.signature("E: /a/b.py:3 C:/d/e f.py/g") == "E: <path> <path> <path>"


def test_readers_of_one_answer_wait_for_one_computation():
    import threading
    from zoneinfo import ZoneInfo

    from tracker.analysis.report import StateCache

    class Scope:
        pinned = False
        settings = type("S", (), {"database_url": "sqlite://"})()
        suite_id = runner_id = 1
        now, tz = datetime(2026, 12, 1, tzinfo=UTC), ZoneInfo("UTC")

        def stamp(self):
            return (1,)

    cache, calls = StateCache(), []
    together = threading.Barrier(8)  # every reader asks at once: none has an answer yet

    def compute():
        calls.append(1)
        return 42

    def read() -> None:
        together.wait(timeout=60)
        answers.append(cache.get(Scope(), ("x",), compute))

    answers: list[int] = []
    readers = [threading.Thread(target=read) for _ in range(8)]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    assert answers == [42] * 8 and len(calls) == 1
