"""How tests share a device: the model learned from the runs' timelines, the per-device chains
of the tests that fill a device, and no failure made by the tracker's own co-scheduling. The
device of the fixture suite `device` is an exclusive lock taken in turns (see its conftest)."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta

import pytest
from helpers import SUITES, outcomes

from tracker.config import RunnerConfig
from tracker.ingest.confirm import settle
from tracker.records import (
    FAILED,
    INTERRUPTED,
    PASSED,
    TIMEOUT,
    UNCONFIRMED,
    AttemptRecord,
    RunRecord,
    Sample,
    file_of,
    final_outcome,
)
from tracker.runner import plan, share
from tracker.runner.feed import Feed

pytestmark = pytest.mark.sqlite_only  # the runner side: a runner host keeps its own SQLite store

T0 = datetime(2026, 11, 30, 22, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_tests_that_took_turns_fill_the_device_and_sleepers_share_it():
    samples = [
        # night 1: each long test alone on its device (a light one beside it does not count)
        *(Sample(1, f"f.py::test_fill[{i}]", 1, 2.0, PASSED, _at(2 * i), "d0w0") for i in range(3)),
        *(
            Sample(1, f"s.py::test_sleep[{i}]", 1, 3.0, PASSED, _at(3 * i), "d1w1")
            for i in range(2)
        ),
        Sample(1, "l.py::test_light", 1, 0.1, PASSED, _at(0), "d0w2"),
        # night 2: the three fills started together and took turns (6 s each); the sleepers
        # ran beside each other at their usual speed; a fill on device 1 had no company there
        *(Sample(2, f"f.py::test_fill[{i}]", 1, 6.0, PASSED, _at(0), f"d0w{i}") for i in range(2)),
        Sample(2, "f.py::test_fill[2]", 1, 2.0, PASSED, _at(0), "d1w0"),
        *(
            Sample(2, f"s.py::test_sleep[{i}]", 1, 3.1, PASSED, _at(10), f"d0w{i}")
            for i in range(2)
        ),
    ]
    model = share.learn(samples)
    assert model["f.py::test_fill[0]"] == share.Sharing(alone=2.0, fills=True, busy=2, slowed=2)
    assert model["f.py::test_fill[2]"].fills  # its function's cases are pooled: same kernel
    assert model["s.py::test_sleep[1]"] == share.Sharing(alone=3.0, fills=False, busy=2, slowed=0)
    assert model["l.py::test_light"].fills is None  # never had company: unknown
    # a warm night's times are preferred: the cold one's compile time is not waiting
    cold = Sample(3, "f.py::test_fill[0]", 1, 5.0, PASSED, _at(0), "d0w0", warm=False)
    warm = [Sample(s.run, s.nodeid, 1, s.duration, s.outcome, s.started_at, s.worker, True)
            for s in samples]  # fmt: skip
    assert share.learn([cold, *warm])["f.py::test_fill[0]"].alone == 2.0
    # whether it fills is judged on warm nights; a cold night's time alone, on cold nights
    assert share.learn([cold, *warm], warm=False)["f.py::test_fill[0]"] == share.Sharing(
        alone=5.0, fills=True, busy=2, slowed=2
    )


def test_tests_slowed_less_than_by_turns_share_a_device_that_runs_several_at_once():
    """Four at once on a device that runs two at full speed: each takes 2x its time alone, not
    the 4x of strict turns, so together they do twice the work per second of one after another.
    Judged by 1.5x alone, they filled the device, and ran one after another for good (the CPU
    proxy `warmpair`: 13.8 s a night against xdist's 10.1 s, bench/README.md)."""

    def nights(together: float, alone: tuple[int, ...] = (0, 1)) -> list[Sample]:
        first = [Sample(1, f"h.py::t[{i}]", 1, 2.0, PASSED, _at(10 * i), "d0w0") for i in alone]
        # the other cases first ran in a pair: at full speed, but their quiet time had company
        pair = [Sample(1, f"h.py::t[{i}]", 1, 2.0, PASSED, _at(50), f"d0w{i}") for i in (2, 3)]
        crowd = [Sample(2, f"h.py::t[{i}]", 1, together, PASSED, _at(0), f"d0w{i}")
                 for i in range(4)]  # fmt: skip
        return first + pair + crowd

    shares = share.learn(nights(4.0))["h.py::t[2]"]
    assert shares == share.Sharing(alone=2.0, fills=False, busy=2, slowed=0)  # the pair: unjudged
    # strict turns: 8 s each, four at once, no more done per second than one after another
    strict = share.learn(nights(8.0))["h.py::t[2]"]
    assert (strict.fills, strict.busy, strict.slowed) == (True, 2, 2)
    # only ever seen in pairs and more: nothing says the pair ran at full speed, so 2x reads as
    # the turns of 4 against 2 (as a device taking turns would give), and the cases fill it
    paired = share.learn(nights(4.0, alone=()))["h.py::t[2]"]
    assert paired.fills and paired.turns  # its time alone: 2.0 / 2 and 4.0 / 4, as if in turns
    assert paired.alone == 1.0 and not shares.turns


def test_a_little_more_company_says_nothing_of_sharing():
    """Beside 6 long tests instead of 5, strict turns slow a test by 7/6 only, within a night's
    noise, so the 1.5x bar could never call it slowed: on one H200 fused_moe's cases, seen only
    so, were judged to share and ran 6-7 at once beside the chain's lane, though alone or several
    at once they take strict turns there (bench/capacity.py: 28 s alone, 57 s each two at once,
    113 s each four at once). An attempt counts once turns would at least double its time."""

    def night(run: int, seconds: float, company: int) -> list[Sample]:
        return [
            Sample(run, "m.py::test_moe[0]", 1, seconds, PASSED, _at(100 * run), "d0w0"),
            *(Sample(run, f"o.py::t[{run}-{i}]", 1, seconds, PASSED, _at(100 * run),
                     f"d0w{i + 1}") for i in range(company)),
        ]  # fmt: skip

    crowded = share.learn([*night(1, 168.0, 5), *night(2, 196.0, 6)])["m.py::test_moe[0]"]
    assert (crowded.fills, crowded.busy) == (True, 0)  # never seen about alone: as if in turns
    assert crowded.presumed and crowded.turns and crowded.alone == 28.0
    # beside one other test against alone, turns would double it: that attempt says
    pair = share.learn([*night(1, 28.0, 0), *night(2, 56.0, 1)])["m.py::test_moe[0]"]
    assert (pair.fills, pair.busy, pair.slowed) == (True, 1, 1)


def test_a_warm_night_after_cold_ones_only_presumes_every_test_fills():
    """Compiling beside others is no evidence of sharing the device once compiled: the first
    warm night on one H200 trusted its cold nights and 7 heavy cases took turns (call AO)."""
    nights = [  # night 1: one after the other; night 2: side by side, as fast
        *(Sample(1, f"s.py::test_sleep[{i}]", 1, 3.0, PASSED, _at(3 * i), "d0w0", False)
          for i in range(2)),
        *(Sample(2, f"s.py::test_sleep[{i}]", 1, 3.0, PASSED, _at(100), f"d0w{i}", False)
          for i in range(2)),
    ]  # fmt: skip
    cold_view = share.learn(nights, warm=False)["s.py::test_sleep[0]"]
    assert cold_view == share.Sharing(alone=3.0, fills=False, busy=2, slowed=0)
    assert share.blind(nights, warm=True) and not share.blind(nights, warm=False)
    warm_view = share.learn(nights, warm=True)["s.py::test_sleep[0]"]
    assert warm_view.fills and warm_view.presumed and warm_view.alone == 3.0
    # a warm night of evidence settles it; so does a store that keeps no cache state
    warm_night = [Sample(3, s.nodeid, 1, s.duration, PASSED, s.started_at, s.worker, True)
                  for s in nights]  # fmt: skip
    assert share.learn(nights + warm_night)["s.py::test_sleep[0]"].fills is False
    unknown = [Sample(s.run, s.nodeid, 1, s.duration, PASSED, s.started_at, s.worker)
               for s in nights]  # fmt: skip
    assert share.learn(unknown)["s.py::test_sleep[0]"].fills is False
    assert not share.blind(unknown) and not share.blind(nights + warm_night)


def test_a_test_stays_untried_until_a_warm_night_runs_it_with_and_without_company():
    """On a warm GPU night, heavy cases that no warm night had compared were let loose and 7 ran
    at once; cut by the run's limit while they took turns, they said nothing (calls AR, AS)."""

    def attempt(run, i, start, seconds, worker, outcome=PASSED):
        return Sample(run, f"h.py::test_heavy[{i}]", 1, seconds, outcome, _at(start), worker, True)

    cold = [Sample(1, f"h.py::test_heavy[{i}]", 1, 30.0, PASSED, _at(0), f"d0w{i}", False)
            for i in range(2)]  # fmt: skip
    assert all(v.untried and v.presumed for v in share.learn(cold).values())  # blind
    # a warm night: one ran alone; the others were cut by the run's limit while taking turns
    cut = [attempt(2, 0, 0, 10.0, "d0w0"),
           *(attempt(2, i, 20, 40.0, f"d0w{i}", INTERRUPTED) for i in (1, 2))]  # fmt: skip
    view = share.learn(cold + cut)["h.py::test_heavy[1]"]
    assert view.untried and view.presumed and view.fills
    assert not share.learn(cold + cut, warm=False)["h.py::test_heavy[1]"].untried  # cold tonight
    # another: two side by side, as fast as alone: it shares, and it has been tried
    pair = [attempt(3, i, 100, 10.5, f"d0w{i}") for i in (0, 1)]
    view = share.learn(cold + cut + pair)["h.py::test_heavy[0]"]
    assert view == share.Sharing(alone=10.0, fills=False, busy=1, slowed=0)
    # a store that keeps no cache state is never untried: its long tests are not compiled
    plain = [Sample(s.run, s.nodeid, 1, s.duration, s.outcome, s.started_at, s.worker)
             for s in cut]  # fmt: skip
    assert not any(v.untried for v in share.learn(plain).values())


def test_untried_cases_of_one_kernel_wait_for_each_other_on_a_device():
    slots = {f"d0w{i}": "0" for i in range(4)}
    groups = [["h.py::t[0]"], ["h.py::t[1]"], ["h.py::t[2]"], ["g.py::t"],
              *([f"l.py::t{i}"] for i in range(3))]  # fmt: skip
    weights = [10, 10, 10, 10, 1, 1, 1]  # 40 s of chain for an ideal 11 s: 2 lanes at most
    feed = Feed(slots)
    feed.fill(groups, 4, weights, [True] * 4, [True] * 4, untried=[True] * 4)
    assert feed.lanes == {"0": 2}
    first = feed.take("d0w0")  # one lane while light tests are left
    assert all(feed.take(w).startswith("l.py") for w in ("d0w1", "d0w2", "d0w3"))
    second = feed.take("d0w1")  # the second lane
    assert {first.split("[")[0], second.split("[")[0]} == {"h.py::t", "g.py::t"}


def test_an_untried_case_waits_for_its_kernel_only_while_its_slot_has_other_work():
    slots = {f"d0w{i}": "0" for i in range(4)}
    groups = [["h.py::t[0]"], ["h.py::t[1]"], ["r.py::t"]]  # r: long, shown to share
    taken = {}
    for untried in (True, False):
        feed = Feed(slots)
        feed.fill(groups, 3, [10, 10, 10], [True, True, False], [True, True, False],
                  untried=[untried, untried, False])  # fmt: skip
        assert feed.lanes == {"0": 2}
        taken[untried] = [feed.take(w) for w in ("d0w0", "d0w1", "d0w2")]
        assert not feed.pending("d0w3") and feed.take("d0w3") is None
    # untried: h's second case waits while r is left, then goes to the slot with nothing else
    # beyond the lanes, rather than leaving it idle (call BA: 4 of 8 slots idle for 270 s while 8
    # fused_moe cases waited for the one running; xdist ran them together and finished them)
    assert taken[True] == ["h.py::t[0]", "r.py::t", "h.py::t[1]"]
    assert taken[False] == ["h.py::t[0]", "h.py::t[1]", "r.py::t"]  # tried: in the second lane


def test_a_lane_whose_chain_waits_on_its_kernel_takes_another_devices_untried_work():
    slots = {"d0w0": "0", **{f"d1w{i}": "1" for i in range(4)}}
    groups = [["g.py::t"], ["h.py::t[0]"], ["h.py::t[1]"]]
    feed = Feed(slots)
    # g shown to fill (not presumed) goes to device 0; h's cases, presumed, fill device 1's chain
    feed.fill(groups, 3, [50, 30, 30], [True] * 3, [False, True, True], untried=[True] * 3)
    assert feed.lanes == {"0": 1, "1": 2}
    assert feed.take("d1w0").startswith("h.py::t[")
    assert feed.take("d1w1") == "g.py::t"  # its second lane: h's other case waits for the first
    assert feed.pending("d1w2")  # with nothing else left, beyond the lanes
    assert feed.take("d1w2").startswith("h.py::t[")


def test_a_warm_cache_lacks_the_kernels_of_tests_not_finished_since_it_was_empty():
    """A cold night fills the cache with the kernels of the tests it finished; a warm night after
    it compiles the others (the cut ones, new ones), and those attempts' times include compiling.
    A night that keeps no cache state (ingested) says nothing of it, nor do nights before the
    first cold one."""

    def night(run: int, warm: bool | None, **tests: str) -> list[Sample]:
        return [Sample(run, n, 1, 1.0, o, _at(0), "d0w0", warm) for n, o in tests.items()]

    assert share.cache_gaps(night(1, True, a=PASSED)) == (set(), None)  # no cold night: not known
    samples = [
        *night(1, True, a=PASSED),  # before the first cold night: nothing known
        *night(2, False, a=PASSED, b=INTERRUPTED, c=FAILED),
        *night(3, True, a=PASSED, b=PASSED, d=PASSED),  # b was cut, d is new: both compile
        *night(4, None, e=PASSED),  # ingested: no cache state
        *night(5, True, b=PASSED, e=PASSED),  # b finished on night 3: cached; e never was
    ]
    gaps, cached = share.cache_gaps(samples)
    assert gaps == {(3, "b"), (3, "d"), (5, "e")}
    assert cached == {"a", "b", "c", "d", "e"}
    # a cold night empties it again
    gaps, cached = share.cache_gaps([*samples, *night(6, False, a=PASSED, b=INTERRUPTED)])
    assert cached == {"a"}


def test_a_nights_time_alone_is_the_typical_one_not_the_fastest():
    def night(run, seconds, warm, company=0):  # the test, and `company` long ones beside it
        return [
            Sample(run, "f.py::test_k[0]", 1, seconds, PASSED, _at(100 * run), "d0w0", warm),
            *(Sample(run, f"g.py::test_o[{run}-{i}]", 1, 2 * seconds, PASSED, _at(100 * run),
                     f"d0w{i + 1}", warm) for i in range(company)),
        ]  # fmt: skip

    # alone, cold: 14 s and 16 s, and 0.05 s once its kernel was already compiled in-process
    quiet = [*night(1, 14.0, False), *night(2, 0.05, False), *night(3, 16.0, False)]
    assert share.learn(quiet, warm=False)["f.py::test_k[0]"].alone == 15.0
    # never alone: warm, it took turns with the 3 beside it; cold, it compiled, undivided
    crowded = [*night(1, 8.0, True, 3), *night(2, 8.0, True, 3), *night(3, 12.0, False, 3)]
    model = share.learn(crowded, warm=True)["f.py::test_k[0]"]
    assert model.fills and model.alone == 2.0
    assert share.learn(crowded, warm=False)["f.py::test_k[0]"].alone == 12.0


def test_a_cold_night_runs_no_chain():
    # two nights: three cases of a kernel took turns on the device (6 s each, 2 s alone)
    samples = [
        *(Sample(1, f"f.py::test_fill[{i}]", 1, 2.0, PASSED, _at(2 * i), "d0w0") for i in range(3)),
        *(Sample(2, f"f.py::test_fill[{i}]", 1, 6.0, PASSED, _at(0), f"d0w{i}") for i in range(3)),
    ]
    nodeids = [f"f.py::test_fill[{i}]" for i in range(3)]
    chains = {}
    for warm in (True, False):
        history, sharing = share.first_attempts(samples, warm), share.learn(samples, warm)
        assert all(sharing[n].fills for n in nodeids)  # what the timelines say, either way
        feed = Feed({"d0w0": "0", "d0w1": "0", "d0w2": "0"})
        plan.fill(feed, nodeids, plan.estimates(nodeids, history, sharing, warm), "test")
        chains[warm] = sum(len(c) for c in feed.chains.values())
    # warm, they run one at a time; cold, each mostly compiles on the CPU, which takes no turns
    assert chains == {True: 3, False: 0}


def test_a_device_runs_one_filling_test_at_a_time_beside_light_work():
    feed = Feed({"d0w0": "0", "d0w1": "0", "d0w2": "0"})
    heavy = [["a.py::t"], ["b.py::t"], ["c.py::t"]]
    light = [[f"l.py::t{i}"] for i in range(6)]
    feed.fill(heavy + light, ranked=3, weights=[30, 10, 20], fills=[True, True, True])
    # the chain starts at once, shortest first; the other slots take light work meanwhile
    assert [feed.take(w) for w in ("d0w0", "d0w1", "d0w2")] == ["b.py::t", "l.py::t0", "l.py::t3"]
    assert feed.take("d0w1") == "l.py::t1"  # the device already runs a filling test
    assert feed.take("d0w0") == "c.py::t"  # b is done: the next of the chain
    assert [feed.take(w) for w in ("d0w1", "d0w2", "d0w1")] == ["l.py::t2", "l.py::t4", "l.py::t5"]
    # no light work left: a slot with nothing else takes the chain's next beyond its lane, since
    # tests that fill a device take turns on it, no slower in all than one after another (call BP)
    assert feed.pending("d0w1") and feed.take("d0w1") == "a.py::t"
    assert feed.take("d0w0") is None and not feed.pending("d0w2")


def test_a_filling_test_under_the_floor_goes_with_the_short_ones():
    """Chained, 114 presumed tests under the floor went through one lane one at a time while
    the heavy cases waited behind them (call AV); test_mlp's cases shown to fill, chained, each
    went to whichever slot asked, and 8 processes tuned the same kernels (calls CL-CN). Under
    the floor, shown or presumed, a test goes out with the short ones, in suite order."""
    expected = {
        "h.py::heavy": plan.Estimate(100.0, fills=True, presumed=True, untried=True),
        "p.py::tiny": plan.Estimate(0.2, fills=True, presumed=True, untried=True),
        "s.py::shown": plan.Estimate(0.3, fills=True),
        "s.py::shown_long": plan.Estimate(3.0, fills=True),
        **{f"l.py::t{i}": plan.Estimate(0.5) for i in range(8)},
    }
    feed = Feed({f"d0w{i}": "0" for i in range(4)})
    plan.fill(feed, list(expected), expected, "test")
    assert [g.tests for g in feed.chains["0"]] == [["h.py::heavy"], ["s.py::shown_long"]]
    assert feed.ranked == 0 and ["p.py::tiny"] in feed.groups and ["s.py::shown"] in feed.groups


def test_a_device_keeps_a_slot_for_the_short_tests_while_there_are_any():
    short = [[f"s.py::t{i}"] for i in range(20)]
    groups, weights, fills = [["h.py::fill"], ["m.py::long"], *short], [30, 5, *[1] * 20], [1, 0]
    two = Feed({"d0w0": "0", "d0w1": "0"})
    two.fill(groups, 2, weights, fills)
    # the chain's lane takes one slot; the ranked long test, not yet due, would take the other
    assert [two.take("d0w0"), two.take("d0w1")] == ["h.py::fill", "s.py::t0"]
    one = Feed({"d0w0": "0"})
    one.fill(groups, 2, weights, fills)
    # one slot: nothing would run beside a long test, so the short ones go first
    taken = [one.take("d0w0") for _ in range(22)]
    assert taken == [g[0] for g in short] + ["h.py::fill", "m.py::long"]
    anyone = Feed()  # the takers are not known: no slot to keep
    anyone.fill(groups, 2, weights, fills)
    assert [anyone.take("w0"), anyone.take("w1")] == ["h.py::fill", "m.py::long"]


def test_a_cold_device_starts_long_tests_on_half_its_slots_while_others_wait():
    """A cold night's expected times are far off, so its pacing may start long tests on every
    slot at once (7 of 8 on one GPU, call AK): half the slots are kept for the rest."""
    long, short = [["a.py::t"], ["b.py::t"], ["c.py::t"], ["d.py::t"]], [["s.py::t0"]]
    slots = {f"d0w{i}": "0" for i in range(4)}
    taken = {}
    for cold in (False, True):
        feed = Feed(slots, warm=not cold)
        feed.fill(long + short, 4, [100, 90, 80, 10, 1])  # all due from the start
        taken[cold] = [feed.take(w) for w in slots]
    assert taken[False] == ["a.py::t", "b.py::t", "c.py::t", "d.py::t"]  # longest first
    # two long tests run: the short test, then the shortest long one
    assert taken[True] == ["a.py::t", "b.py::t", "s.py::t0", "d.py::t"]
    feed = Feed(slots, warm=False)
    feed.fill(long, 4, [100, 90, 80, 10])
    assert [feed.take(w) for w in slots] == ["a.py::t", "b.py::t", "d.py::t", "c.py::t"]


def test_a_chains_lane_is_the_one_long_test_beside_the_short_ones():
    """Beside the chain's lane, a ranked long test waits until it is due. It went out at once:
    on CPU 2 of 4 slots then took turns on the device from the start, and the tracker had
    finished 138 tests by 4 s against xdist's 255 (bench/README.md, CPU)."""
    short = [[f"s.py::t{i}"] for i in range(40)]
    feed = Feed({f"d0w{i}": "0" for i in range(4)})
    feed.fill([["h.py::fill"], ["m.py::long"], *short], 2, [10, 5, *[1] * 40], [True, False])
    taken = [feed.take("d0w0")]  # the chain's lane, held from here on
    taken += [feed.take(f"d0w{1 + i % 3}") for i in range(41)]
    assert taken[0] == "h.py::fill" and all(t.startswith("s.py::") for t in taken[1:4])
    # due once the work handed out per slot and its own time reach the ideal length:
    # (10 + 25) / 4 + 5 = 13.75 s = 55 s / 4 slots
    assert taken.index("m.py::long") == 1 + 25


def test_chains_are_balanced_over_devices_and_a_free_device_takes_over():
    feed = Feed({"d0w0": "0", "d1w0": "1"})
    groups = [["a.py::t"], ["b.py::t"], ["c.py::t"], ["d.py::t"]]
    feed.fill(groups, ranked=4, weights=[50, 40, 30, 20], fills=[True] * 4)
    # LPT: a (50) to d0, b (40) to d1, c (30) to d1, d (20) to d0: 70 each; shortest first
    assert feed.take("d0w0") == "d.py::t" and feed.take("d1w0") == "c.py::t"
    assert feed.take("d1w0") == "b.py::t"
    assert feed.take("d1w0") == "a.py::t"  # d1's chain is done: it takes d0's longest
    assert feed.take("d0w0") is None


def test_a_chain_only_presumed_to_fill_runs_in_more_lanes_when_too_long_for_the_run():
    slots = {f"d0w{i}": "0" for i in range(4)}
    heavy = [[f"h{i}.py::t"] for i in range(4)]
    light = [[f"l.py::t{i}"] for i in range(4)]
    weights = [10, 10, 10, 10, 1, 1, 1, 1]  # the ideal length: 44 s / 4 slots = 11 s
    sure = Feed(slots)
    sure.fill(heavy + light, ranked=4, weights=weights, fills=[True] * 4)
    assert sure.lanes == {"0": 1}  # shown to fill: one at a time, however long
    guessed = Feed(slots)
    guessed.fill(heavy + light, 4, weights, [True] * 4, presumed=[True, False, False, False])
    assert guessed.lanes == {"0": 2}  # 40 s in 11 s would need 4 lanes: half the slots at most
    taken = [guessed.take(w) for w in slots]  # one lane while light work is left
    assert taken[0] == "h3.py::t" and all(t.startswith("l.py::") for t in taken[1:])
    assert guessed.take("d0w1").startswith("l.py::")  # the last light test
    assert guessed.take("d0w2") == "h2.py::t"  # no light work left: the second lane
    assert guessed.take("d0w3") == "h1.py::t"  # nothing else: beyond the lanes, shown or not
    assert guessed.take("d0w1") == "h0.py::t"
    assert not guessed.pending("d0w0") and guessed.take("d0w0") is None


def test_a_slot_keeps_to_the_files_it_began_in_the_chain():
    """A file's filling tests stay in the process that began it, which compiled its kernels;
    another slot begins another file, and shares one only when none is left to begin."""
    slots = {f"d0w{i}": "0" for i in range(4)}
    weights = {"a.py::t0": 5, "a.py::t1": 5.5, "b.py::t0": 6, "b.py::t1": 6.5,
               "a.py::t2": 8, "b.py::t2": 9}  # fmt: skip
    feed = Feed(slots)
    groups = [[n] for n in weights]
    feed.fill(groups, len(groups), list(weights.values()), [True] * 6, [True] * 6)
    assert feed.lanes == {"0": 2}  # 40 s for an ideal 10 s: 4 lanes, half the slots at most
    assert feed.take("d0w0") == "a.py::t0"  # the shortest
    assert feed.take("d0w1") == "b.py::t0"  # not a.py::t1: d0w0 began a.py
    assert feed.take("d0w2") == "a.py::t1"  # beyond the lanes, every file begun: the shortest
    assert feed.take("d0w0") == "a.py::t2"  # its own file, before the shorter b.py::t1
    assert feed.take("d0w1") == "b.py::t1"
    assert feed.take("d0w2") == "b.py::t2"
    assert not any(feed.pending(w) for w in slots)


def test_a_files_filling_tests_go_out_in_suite_order():
    """Not shortest first within a file: a suite may depend on its order. On a GPU night,
    test_mlp's float32 cases ran out of shared memory in a process that had first run the same
    shape in bfloat16, which is faster (bench/README.md, call X)."""
    nodeids = ["m.py::t[fp32-a]", "m.py::t[bf16-a]", "m.py::t[fp32-b]", "m.py::t[bf16-b]",
               "n.py::t[0]", "n.py::t[1]", *(f"s.py::t{i}" for i in range(4))]  # fmt: skip
    seconds = [20, 10, 22, 12, 30, 5, 0.1, 0.1, 0.1, 0.1]
    expected = {n: plan.Estimate(s, fills=s > 1) for n, s in zip(nodeids, seconds, strict=True)}
    feed = Feed({"d0w0": "0", "d0w1": "0"})
    plan.fill(feed, nodeids, expected, "test")
    taken = [t for _ in nodeids for w in ("d0w0", "d0w1") if (t := feed.take(w))]
    chain = [t for t in taken if not t.startswith("s.py")]
    # files begin shortest first (n.py's t[1] is the shortest), then each in suite order
    assert chain == ["n.py::t[0]", "n.py::t[1]", *nodeids[:4]]


def test_an_untried_kernels_first_case_goes_first_in_the_chain_beside_the_short_tests():
    """Files otherwise begin shortest first: the untried heavy kernel would go last, once the
    short tests are gone and every slot takes one (calls CQ-CR, bench/README.md)."""
    nodeids = ["h.py::t[0]", "h.py::t[1]", "m.py::t[0]", "m.py::t[1]",
               *(f"s.py::t{i}" for i in range(6))]  # fmt: skip
    seconds = [30, 20, 3, 3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    expected = {n: plan.Estimate(s, fills=s > 1, presumed=n.startswith("h"),
                                 untried=n.startswith("h"))
                for n, s in zip(nodeids, seconds, strict=True)}  # fmt: skip
    feed = Feed({f"d0w{i}": "0" for i in range(3)})
    plan.fill(feed, nodeids, expected, "test")
    taken = [t for _ in nodeids for w in ("d0w0", "d0w1", "d0w2") if (t := feed.take(w))]
    assert taken[:3] == ["h.py::t[0]", "s.py::t0", "s.py::t3"]  # one lane beside short tests
    # its first case in suite order, not the shortest; then the chain's usual order: one case
    # is enough to compare the kernel
    chain = [t for t in taken if not t.startswith("s.py")]
    assert chain == ["h.py::t[0]", "m.py::t[0]", "m.py::t[1]", "h.py::t[1]"]


def test_the_first_case_beside_light_work_is_what_lets_the_model_learn_the_kernel():
    """A heavy kernel seen only with the same company, every case beside the others, stays
    `untried` whatever the nights say; one case beside light work is enough to judge it."""
    slots = {f"d0w{i}": "0" for i in range(8)}
    heavy = [f"h.py::t[{i}]" for i in range(8)]
    mid = [f"m.py::t[{i}]" for i in range(6)]
    light = [f"s.py::t{i}" for i in range(200)]
    seconds = {**dict.fromkeys(heavy, 10.0), **dict.fromkeys(mid, 3.0),
               **dict.fromkeys(light, 0.5)}  # fmt: skip

    def night(run, start, took, worker):
        return [Sample(run, n, 1, took.get(n, seconds[n]), PASSED, _at(start.get(n, 0)),
                       worker.get(n, "d0w0"), True) for n in [*heavy, *mid, *light]]  # fmt: skip

    # each night h's eight cases ran at once, 80 s each (so far as on every warm GPU night);
    # m's six ran at once on night 1, 6x slower than one after another on night 2: they fill
    at_once = {**dict.fromkeys(heavy, 80.0), **dict.fromkeys(mid, 18.0)}
    spread = {n: f"d0w{i % 8}" for i, n in enumerate(heavy + mid)}  # each group at once
    history = [
        *night(1, dict.fromkeys(heavy, 100), at_once, spread),
        *night(2, {**dict.fromkeys(heavy, 100), **{n: 3 * i for i, n in enumerate(mid)}},
               {n: at_once[n] for n in heavy}, spread),
    ]  # fmt: skip
    learned = share.learn(history)
    assert learned[mid[0]].fills and not learned[mid[0]].untried
    assert learned[heavy[0]].untried and learned[heavy[0]].presumed
    # tonight, handed out from what they say: h's first case runs beside the light tests alone
    nodeids = [*heavy, *mid, *light]
    expected = plan.estimates(nodeids, share.first_attempts(history), learned)
    feed = Feed(slots)
    plan.fill(feed, nodeids, expected, "test")
    started: list[tuple[float, str, str]] = []
    plan.hand_out(feed, slots, lambda _, n: seconds[n], {}, started=started)
    tonight = [Sample(3, n, 1, seconds[n], PASSED, _at(1000 + t), w, True) for t, w, n in started]
    after = share.learn(history + tonight)[heavy[0]]
    assert not after.untried and after.busy >= 1  # judged: compared with and without company


def _attempt(nodeid, outcome, start, duration, worker, isolated=False):
    return AttemptRecord(nodeid, outcome, duration, started_at=_at(start), worker=worker,
                         isolated=isolated)  # fmt: skip


def test_a_timeout_beside_filling_work_counts_only_once_confirmed_alone():
    def record(*later: AttemptRecord) -> RunRecord:
        run = RunRecord("s", "r", "runner", T0, collected=["f.py::a", "f.py::b", "f.py::c"])
        run.attempts = [
            _attempt("f.py::a", TIMEOUT, 0, 30, "d0w0"),
            _attempt("f.py::b", PASSED, 0, 20, "d0w1"),
            _attempt("f.py::c", TIMEOUT, 0, 30, "d1w0"),  # alone on device 1: a real timeout
            *later,
        ]
        return run

    cut = record()  # the run's limit came before the rerun alone
    assert settle(cut) == 1
    tests = cut.by_test()
    assert tests["f.py::a"][0].outcome == UNCONFIRMED
    assert "beside 1 long test(s) on the same device (b)" in tests["f.py::a"][0].message
    assert "never run alone" in tests["f.py::a"][0].message
    assert final_outcome(tests["f.py::a"]) == UNCONFIRMED
    assert tests["f.py::c"][0].outcome == TIMEOUT

    passed_alone = record(_attempt("f.py::a", PASSED, 40, 5, "d0w0", isolated=True))
    settle(passed_alone)
    assert final_outcome(passed_alone.by_test()["f.py::a"]) == PASSED  # not flaky: no evidence

    confirmed = record(_attempt("f.py::a", TIMEOUT, 40, 30, "d0w0", isolated=True))
    assert settle(confirmed) == 0
    assert final_outcome(confirmed.by_test()["f.py::a"]) == TIMEOUT


def _overlaps(detail: dict, prefix: str) -> list[tuple[str, str]]:
    spans = []
    for r in detail["results"]:
        for a in r["attempts"]:
            if r["nodeid"].startswith(prefix) and a["started_at"]:
                start = datetime.fromisoformat(a["started_at"]).timestamp()
                spans.append((start, start + a["duration"], r["nodeid"]))
    spans.sort()
    return [(a[2], b[2]) for i, a in enumerate(spans) for b in spans[i + 1 :] if b[0] < a[1] - 0.05]


def test_filling_tests_learned_from_one_night_run_one_at_a_time_beside_other_work_the_next(
    run_suite, settings
):
    options = {
        "suite": "device",
        "suite_path": SUITES / "device",
        "workers_per_device": 3,
        "group": "file",  # no history: the three fill files go out at once, to the three slots
        "test_timeout": 2.5,
        "reruns": 0,  # a contended timeout is still confirmed alone
        "env": {"FILL_S": "1.5"},
    }
    first = run_suite(**{**options, "env": {"FILL_S": "1.5", "FILL_TOGETHER": "3"}})
    assert first["run"]["kernel_cache"] == "cold"
    got = outcomes(first)
    fills = [f"test_fill_{x}.py::test_fill" for x in "abc"]
    # three tests that each need 1.5 s of the device took turns: 4.5 s each, past the 2.5 s limit;
    # each one rerun alone passed, so the timeouts were the tracker's making and count for nothing
    timed_out = [n for n in fills if got[n][1][0] == UNCONFIRMED]
    assert len(timed_out) >= 2, got
    assert all(got[n] == (PASSED, [UNCONFIRMED, PASSED]) for n in timed_out)
    assert first["run"]["status"] == "passed"

    # alone a fill takes 1.5 s; its 50 ms slices of sleep stretched it past 2.5 s under -n 6 on
    # 2 cores, and the last two may take turns (below), so the second night's limit leaves room:
    # it checks the order, not the timeout
    second = run_suite(**{**options, "test_timeout": 12})
    assert second["run"]["kernel_cache"] == "warm"  # test_light left compiled kernels behind
    assert all(outcomes(second)[n] == (PASSED, [PASSED]) for n in fills)
    # one at a time while other work is left; beyond the lane only for a slot with nothing else
    began = {}
    for r in second["results"]:
        start = datetime.fromisoformat(r["attempts"][0]["started_at"]).timestamp()
        began[file_of(r["nodeid"])] = min(start, began.get(file_of(r["nodeid"]), start))
    others = max(t for f, t in began.items() if not f.startswith("test_fill"))
    assert all(began[file_of(b)] >= others for _, b in _overlaps(second, "test_fill"))
    assert second["run"]["status"] == "passed"


def test_on_two_devices_each_slot_sees_its_own_and_the_fills_are_split_between_them(
    run_suite, settings, tmp_path, monkeypatch
):
    """A 2-GPU night with real processes on CPU: a fake nvidia-smi lists two devices, each
    slot's tests see only their own (CUDA_VISIBLE_DEVICES), and the simulated device is one
    lock per device. The first warm night presumes the long tests fill: it runs them on both
    devices, one at a time on each while other work is left."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho '0, Simulated, 1.0, 80, 0'\necho '1, Simulated, 1.0, 80, 0'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    settings.runner = RunnerConfig(name="ci", device="cuda", devices=[0, 1])
    seen = tmp_path / "devices.log"
    files = ["test_fill_a.py", "test_fill_b.py", "test_fill_c.py", "test_light.py"]
    options = {
        "suite": "device",
        "suite_path": SUITES / "device",
        "workers_per_device": 2,
        "test_timeout": 30,
        "reruns": 0,
        # light work that outlasts the fills' first turns: they go out beside it
        "env": {"FILL_S": "1.5", "LIGHT_N": "100", "LIGHT_S": "0.05", "DEVICES_LOG": str(seen)},
    }
    first = run_suite(*files, **options)
    assert first["run"]["kernel_cache"] == "cold" and first["run"]["status"] == "passed"
    assert first["run"]["environment"]["device_count"] == 2
    slot_of = {r["nodeid"]: r["attempts"][0]["worker"] for r in first["results"]}
    assert {w[:2] for w in slot_of.values()} == {"d0", "d1"}
    given = dict(line.rsplit(" ", 1) for line in seen.read_text().splitlines())
    assert given and all(slot_of[n][1] == device for n, device in given.items())

    second = run_suite(*files, **options)
    assert second["run"]["kernel_cache"] == "warm" and second["run"]["status"] == "passed"
    fills = [r for r in second["results"] if r["nodeid"].startswith("test_fill")]
    assert {r["attempts"][0]["worker"][:2] for r in fills} == {"d0", "d1"}
    began = {
        r["nodeid"]: datetime.fromisoformat(r["attempts"][0]["started_at"]).timestamp()
        for r in second["results"]
    }
    others = max(t for n, t in began.items() if not n.startswith("test_fill"))
    side_by_side = _overlaps({"results": fills}, "test_fill")
    device = {r["nodeid"]: r["attempts"][0]["worker"][:2] for r in fills}
    # the two devices at once, while there was other work (not one device's turns)
    assert any(device[a] != device[b] and began[b] < others for a, b in side_by_side)
    # on one device, two at once only for a slot with nothing else left to do
    assert all(began[b] >= others for a, b in side_by_side if device[a] == device[b])


def test_the_plan_for_a_first_warm_night_says_what_it_does_not_know(tmp_path):
    """After a cold night only, `tracker plan --warm` presumes every long test fills and says why,
    and that their expected times are a cold night's, so the end it predicts may come sooner."""
    import json
    import sys

    from helpers import tracker

    state = tmp_path / "state"
    state.mkdir()
    config = (
        f'[runner]\nname = "ci"\ndevice = "cpu"\n[[suites]]\nname = "d"\n'
        f'path = "{SUITES / "device"}"\npython = "{sys.executable}"\nworkers_per_device = 3\n'
        f'group = "file"\ntest_timeout = 30\nreruns = 0\n'
        f'env = {{ FILL_S = "2", FIXTURE_STATE = "{state}" }}\n'
    )
    night = json.loads(tracker(tmp_path, "run", "d", "--json", config=config).stdout)
    assert night["run"]["kernel_cache"] == "cold"
    planned = json.loads(tracker(tmp_path, "plan", "d", "--warm", "--json").stdout)
    fills = [t for t in planned["long_tests"] if t["sharing"] == "fills"]
    assert fills and all(t["untried"] for t in fills)
    assert 0 < planned["chained"] <= len(fills)  # over the ranking floor: in the chain
    assert planned["without_warm_time"] == len(planned["long_tests"])
    # the cold night finished every test, and no warm night has run yet
    assert (planned["timed_compiling"], planned["may_compile"]) == (0, 0)
    said = " ".join(tracker(tmp_path, "plan", "d", "--warm").stdout.split())
    assert "no warm night yet, and compiling beside others says nothing of sharing" in said
    assert "with no warm night yet, expected at a cold night's time" in said
    assert f"{planned['chained']} in the devices' chains, the others under the ranking" in said
    assert re.search(
        r"at once per device: one while short tests are left, then \w+: \d \(an untried "
        r"kernel's first case first, to compare it with its cases beside others; its others not "
        r"while a case of it runs\); a slot with nothing else to do takes one beyond",
        said,
    )
    # the fills started together (one file per slot): never seen about alone, each is expected
    # at its time / (1 + its company), a guess the plan owns up to
    assert planned["alone_as_turns"] >= 1
    assert "fill their device never seen about alone, each expected at its time" in said
    # each presumed test's row says so, with no slowed count: none of its attempts had more company
    rows = said[said.index("longest tests") :]
    assert re.search(r"\d s presumed - test_", rows) and "fills 0/0" not in rows
    # with no warm night, nothing says the fills take turns: the end is predicted without it
    assert "without tests slowing each other" in said

    # after a warm night the model is its own: the fills take turns in the prediction too,
    # so the device is busy with them, one after another, for their expected seconds in all
    warm = json.loads(tracker(tmp_path, "run", "d", "--json").stdout)
    assert warm["run"]["kernel_cache"] == "warm"
    planned = json.loads(tracker(tmp_path, "plan", "d", "--warm", "--json").stdout)
    fills = [t for t in planned["long_tests"] if t["sharing"] == "fills"]
    assert len(fills) >= 2, planned["long_tests"]
    assert planned["predicted_end"] >= sum(t["seconds"] for t in fills) - 0.1
    said = " ".join(tracker(tmp_path, "plan", "d", "--warm").stdout.split())
    assert "the tests that fill a device taking turns on it" in said


def test_an_ingested_xdist_timeout_beside_another_long_test_is_unconfirmed(tmp_path, settings):
    import json

    from tracker.ingest import load_run

    def report(nodeid, when, outcome, start, duration, longrepr=None):
        return json.dumps({"$report_type": "TestReport", "nodeid": nodeid, "when": when,
                           "outcome": outcome, "longrepr": longrepr, "start": start,
                           "stop": start + duration, "duration": duration,
                           "location": ["f.py", 1, nodeid], "keywords": {}})  # fmt: skip

    t = _at(0).timestamp()
    timeout = "Failed: Timeout (>30.0s) from pytest-timeout."
    log = tmp_path / "xdist.jsonl"
    log.write_text("\n".join([
        report("f.py::a", "setup", "passed", t, 0.0),
        report("f.py::a", "call", "failed", t, 30.0, timeout),
        report("f.py::a", "teardown", "passed", t + 30, 0.0),
        report("f.py::b", "setup", "passed", t + 1, 0.0),  # another worker, at the same time
        report("f.py::b", "call", "passed", t + 1, 20.0),
        report("f.py::b", "teardown", "passed", t + 21, 0.0),
    ]) + "\n")  # fmt: skip
    record = load_run(log, suite="s", runner="ci")
    assert [a.outcome for a in record.attempts] == [UNCONFIRMED, PASSED]
    # after two passing nights, the kernel does not read "failing" on that evidence
    from tracker.analysis.kernels import KERNEL_FAILING
    from tracker.analysis.report import Scope
    from tracker.db import session_scope
    from tracker.store import save_run

    with session_scope(settings.database_url) as session:
        for night in (2, 1):
            passing = tmp_path / f"night{night}.jsonl"
            start = t - night * 86400
            lines = [
                report("f.py::a", w, "passed", start, 1.0) for w in ("setup", "call", "teardown")
            ]
            passing.write_text("\n".join(lines) + "\n")
            save_run(session, load_run(passing, suite="s", runner="ci"))
        save_run(session, record)
        kernels = Scope(session, settings, "s").kernels()
    assert kernels and all(k.status != KERNEL_FAILING for k in kernels)


def test_a_test_usually_fast_is_not_expected_slow_for_its_rare_slow_runs():
    # cold nights: once it compiled its kernels (20 s, beside another long test: slowed, so it
    # fills the device); every other night its file's earlier tests had compiled them in its
    # process (0.2 s)
    def night(run, seconds):
        return Sample(run, "f.py::test_k[1]", 1, seconds, PASSED, _at(100 * run), "d0w0", False)

    other = Sample(1, "g.py::test_o", 1, 20.0, PASSED, _at(100), "d0w1", False)
    samples = [night(1, 20.0), other, *(night(run, 0.2) for run in range(2, 6))]
    view = share.learn(samples, warm=False)["f.py::test_k[1]"]
    assert view.fills and view.alone == 20.0  # its long attempts' time, undivided (cold)
    expected = plan.estimates(["f.py::test_k[1]"], share.first_attempts(samples, False),
                              {"f.py::test_k[1]": view})  # fmt: skip
    # its usual time: it stays among its file's short tests, with the kernels they compile
    assert expected["f.py::test_k[1]"] == plan.Estimate(0.2, fills=False)
