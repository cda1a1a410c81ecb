"""Test-level dispatch: slots pull tests one at a time from a queue ordered by what the store
knows of their durations (longest first, cut tests before all). The order and the censoring are
asserted; wall times are measured in bench/dispatch.py, never here."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import SUITES, outcomes

from tracker.runner import plan
from tracker.runner.feed import Feed
from tracker.runner.plan import Estimate

# the runner side: a runner host keeps its own SQLite store
pytestmark = pytest.mark.sqlite_only

DISPATCH = SUITES / "dispatch"


def test_cut_tests_go_first_then_the_longest():
    nodeids = ["a.py::slow", "a.py::cut", "b.py::fast", "b.py::new", "c.py::new"]
    history = {
        "a.py::slow": [(5.0, "passed"), (7.0, "failed"), (6.0, "passed")],
        "a.py::cut": [(1.0, "passed"), (30.0, "timeout")],
        "b.py::fast": [(0.1, "passed"), (0.3, "passed")],
    }
    expected = plan.estimates(nodeids, history)
    assert expected["a.py::slow"] == Estimate(6.0)
    assert expected["a.py::cut"] == Estimate(30.0, cut=True)  # at least as long as it ran
    assert expected["b.py::new"] == Estimate(0.2, known=False)  # its file's median
    # the suite's median; nothing of its file ran: not ranked, it goes with the short tests
    assert expected["c.py::new"] == Estimate(6.0, known=False, blind=True)
    assert plan.order(nodeids, expected) == [
        ["a.py::cut"],
        ["a.py::slow"],
        ["b.py::fast"],  # under a second: suite order
        ["b.py::new"],
        ["c.py::new"],
    ]
    assert plan.order(nodeids, expected, "file") == [
        ["a.py::slow", "a.py::cut"],
        ["c.py::new"],
        ["b.py::fast", "b.py::new"],
    ]
    predicted = plan.simulate(nodeids, expected, {"w0": "", "w1": ""})
    assert predicted.busy == pytest.approx({"w0": 30.0, "w1": 6.0 + 6.0 + 0.2 + 0.2})


def test_tests_that_fill_a_device_take_turns_in_the_prediction():
    """Two tests only presumed to fill, one 10 s each: the device's one lane runs one, and the
    other slot, with nothing else to do, the other beside it. In turns both end at ~20 s."""
    fill = Estimate(10.0, fills=True, presumed=True)
    expected = {"k.py::a": fill, "k.py::b": fill, "s.py::c": Estimate(0.1)}
    slots = {"w0": "0", "w1": "0"}
    assert plan.simulate(list(expected), expected, slots).end == pytest.approx(10.1)
    predicted = plan.simulate(list(expected), expected, slots, turns=True)
    assert predicted.ends == pytest.approx([0.1, 19.9, 20.0])
    assert predicted.busy == pytest.approx({"w0": 19.9, "w1": 20.0})  # seconds held, not worked
    # when each went out, and where: the replay's trace (bench/finished_by_replay.py --trace)
    feed, started = Feed(slots), []
    plan.fill(feed, list(expected), expected, "test")
    plan.hand_out(feed, slots, lambda _, n: expected[n].seconds, {}, started=started)
    assert started == [(0.0, "w0", "k.py::a"), (0.0, "w1", "s.py::c"), (0.1, "w1", "k.py::b")]


def test_a_new_case_takes_its_functions_time_before_its_files():
    history = {"f.py::test_k[0]": [(200.0, "passed")], "f.py::test_k[1]": [(180.0, "passed")]}
    history |= {f"f.py::test_s[{i}]": [(0.1, "passed")] for i in range(3)}
    nodeids = [*history, "f.py::test_k[2]", "f.py::test_new"]
    expected = plan.estimates(nodeids, history)
    # never reached last night: the same kernel's other cases say more than its file's median
    assert expected["f.py::test_k[2]"] == Estimate(190.0, known=False)
    assert expected["f.py::test_new"] == Estimate(0.1, known=False)
    # cut by the run's limit 26 s in: at least as long as the kernel's finished cases
    history["f.py::test_k[3]"] = [(26.0, "interrupted")]
    expected = plan.estimates([*nodeids, "f.py::test_k[3]"], history)
    assert expected["f.py::test_k[3]"] == Estimate(190.0, cut=True)
    assert expected["f.py::test_s[0]"] == Estimate(0.1)


def test_a_cut_without_a_finished_attempt_is_still_first():
    history = {"x::a": [(2.0, "crashed")], "x::b": [(9.0, "passed")]}
    expected = plan.estimates(["x::a", "x::b"], history)
    assert [g[0] for g in plan.order(["x::a", "x::b"], expected)] == ["x::a", "x::b"]


def test_tests_too_short_to_move_the_end_keep_suite_order():
    nodeids = ["b.py::big", *(f"a.py::t{i}" for i in range(10))]
    history = {"b.py::big": [(100.0, "passed")]} | {n: [(2.0, "passed")] for n in nodeids[1:]}
    expected = plan.estimates(nodeids, history)
    assert plan.ranked(plan.order(nodeids, expected), expected) == 11  # all of a second or more
    # 120 s over 2 slots: 60 s at best. A 2 s test cannot move that end by much; in suite order
    # a file's tests run on in one process, which has compiled their kernels
    feed = Feed({"w0": "", "w1": ""})
    plan.fill(feed, nodeids, expected, "test")
    assert feed.ranked == 1
    assert feed.take("w0") == "b.py::big"
    # w0 heads into the file next: w1 begins in its middle, one test after the other
    assert [feed.take("w1") for _ in range(5)] == [f"a.py::t{i}" for i in range(5, 10)]


def test_short_tests_go_out_in_stretches_long_ones_from_the_head():
    long = [["l.py::a"], ["l.py::b"]]
    short = [[f"s.py::t{i}"] for i in range(20)]
    feed = Feed()
    assert feed.pending("w0")  # until a process has collected the suite, anything may come
    feed.fill(long + short, ranked=2)
    first = [feed.take(w) for w in ("w0", "w1", "w2", "w3")]
    # the long ones from the head. w1's stretch carries on into the short tests' start, so w2
    # starts in the middle of them, and w3 in the middle of t0-t9
    assert first == ["l.py::a", "l.py::b", "s.py::t10", "s.py::t5"]
    assert [feed.take("w2") for _ in range(3)] == ["s.py::t11", "s.py::t12", "s.py::t13"]
    assert feed.take("w3") == "s.py::t6"
    # w0's long test is done: the longest free stretch is t14-t19, which w2 heads into
    assert feed.take("w0") == "s.py::t17"
    assert feed.take("w1") == "s.py::t0"
    feed.give_back("w3", ["s.py::t6"])  # its process died before running it
    assert feed.take("w2") == "s.py::t6"  # given back goes first, to whoever asks
    taken = [t for w in ("w0", "w1", "w2", "w3") * 20 if (t := feed.take(w))]
    assert len(taken) == 20 - 8 and not feed.pending("w0")


def test_a_slot_joins_a_stretch_at_a_kernel_boundary():
    """A process compiles and tunes each kernel (test function) it runs once: a slot joining
    a stretch another heads into starts at the file boundary nearest its middle, else the kernel
    boundary, and in its middle only where the stretch is one kernel (xdist's worksteal)."""
    feed = Feed()
    feed.fill(
        [[f"k.py::test_a[{i}]"] for i in range(8)] + [["k.py::test_b[0]"], ["k.py::test_b[1]"]], 0
    )
    assert feed.take("w0") == "k.py::test_a[0]"
    assert feed.take("w1") == "k.py::test_b[0]"  # not test_a[5], the middle
    one = Feed()
    one.fill([[f"k.py::test_a[{i}]"] for i in range(8)], 0)
    assert [one.take("w0"), one.take("w1")] == ["k.py::test_a[0]", "k.py::test_a[4]"]
    # a file's test functions share its kernels (test_mlp's, call BD): its boundary comes first
    files = Feed()
    files.fill([[f"k.py::test_{f}[{i}]"] for f in "abcd" for i in range(2)] + [["m.py::t"]], 0)
    assert [files.take("w0"), files.take("w1")] == ["k.py::test_a[0]", "m.py::t"]


def test_a_slot_goes_on_with_its_kernel_before_it_takes_a_chains_lane():
    """The chain's lane waits for the end of the kernel the slot is in: another slot taking
    that kernel's next cases tunes it again (test_mlp on one H200, call BD)."""
    feed = Feed({"w0": "0", "w1": "0", "w2": "0"})
    short = [[f"m.py::test_k[{i}]"] for i in range(3)] + [["m.py::test_j[0]"], ["n.py::t"]]
    feed.fill([["f.py::a"], ["g.py::b"], *short], ranked=2, weights=[30, 20], fills=[True] * 2)
    assert feed.take("w0") == "g.py::b"  # the chain's lane, at once, shortest first
    assert feed.take("w1") == "m.py::test_k[0]"
    feed.give_back("w0", [])  # b is done and w0's process ended: the lane is free
    assert feed.take("w1") == "m.py::test_k[1]"  # not the lane: test_k[1] follows test_k[0]
    assert feed.take("w1") == "m.py::test_k[2]"
    assert feed.take("w1") == "f.py::a"  # the kernel's cases done: the lane


def test_a_kernels_long_cases_stay_with_the_slot_that_began_it_until_stolen():
    """A process compiles and tunes a kernel (test function) once: another slot takes another
    kernel's cases, and one of the first only with nothing else left, the last in suite order."""
    feed = Feed()
    k = [[f"a.py::test_k[{i}]"] for i in range(3)]
    j = [[f"b.py::test_j[{i}]"] for i in range(2)]
    feed.fill(k + j, ranked=5, weights=[5, 5, 5, 4, 4])
    assert [feed.take("w0"), feed.take("w1")] == ["a.py::test_k[0]", "b.py::test_j[0]"]
    assert [feed.take("w0"), feed.take("w1")] == ["a.py::test_k[1]", "b.py::test_j[1]"]
    assert feed.take("w1") == "a.py::test_k[2]"  # nothing of its own left: it steals
    assert feed.take("w0") is None


def test_while_short_tests_are_left_a_device_runs_one_long_test_until_more_are_due():
    slots = {"d0w0": "0", "d0w1": "0", "d1w0": "1", "d1w1": "1"}
    feed = Feed(slots)
    long = [["m.py::a"], ["m.py::b"], ["m.py::c"], ["m.py::d"]]
    short = [[f"s.py::t{i}"] for i in range(12)]
    feed.fill(long + short, ranked=4, weights=[30, 20, 4, 3, *[2] * 12])
    # the ideal length is 81 s / 4 slots = 20.25 s. Each device starts one long test, spread
    # over the devices (d0 runs 30 s of long work: its second slot takes a short test)
    assert [feed.take(w) for w in slots] == ["m.py::a", "s.py::t0", "m.py::b", "s.py::t6"]
    # c (4 s) waits while the short tests go out, until it must start to end by 20.25 s:
    # 66 s handed out / 4 slots + 4 s >= 20.25 s
    # (d0's slot is then due too, but d0 runs more long work than d1: it takes a short test)
    assert [feed.take(w) for w in ("d0w1", "d1w1") * 4] == [
        "s.py::t1", "s.py::t7", "s.py::t2", "s.py::t8", "s.py::t3", "s.py::t9", "s.py::t4",
        "m.py::c",
    ]  # fmt: skip
    taken = [t for w in ("d0w1", "d1w1") * 12 if (t := feed.take(w))]
    assert sorted(taken) == ["m.py::d", "s.py::t10", "s.py::t11", "s.py::t5"]


def test_a_slot_takes_the_next_long_test_of_its_file_unless_the_longest_could_set_the_end():
    # suite order: a0 a1 a2 b0 b1 h; longest first: h, a0, b0, a1, b1, a2
    groups = [["h.py::big"], ["a.py::t0"], ["b.py::u0"], ["a.py::t1"], ["b.py::u1"], ["a.py::t2"]]
    feed = Feed({"w0": "0", "w1": "0", "w2": "0"})
    feed.fill(groups, 6, [100, 9, 8, 7, 6, 5], places=[5, 0, 3, 1, 4, 2])
    assert [feed.take(w) for w in ("w0", "w1", "w2")] == ["h.py::big", "a.py::t0", "b.py::u0"]
    # its process has compiled b.py's kernels: the next of b.py, not the longest left (a1)
    assert [feed.take("w2"), feed.take("w1"), feed.take("w1")] == [
        "b.py::u1", "a.py::t1", "a.py::t2",
    ]  # fmt: skip
    # a test that could set the night's end (a quarter of 203 s / 1 slot or more) goes first,
    # even before the next of the file its slot began
    one = Feed({"w0": "0"})
    one.fill([["h.py::big"], ["g.py::big"], ["a.py::t0"], ["h.py::small"]], 4, [100, 90, 10, 3])
    assert [one.take("w0") for _ in range(4)] == [
        "h.py::big",
        "g.py::big",
        "a.py::t0",
        "h.py::small",
    ]


def _handed(detail: dict) -> list[str]:
    """The tests each process was handed, in order (its inbox)."""
    folder = Path(detail["run"]["artifacts"])
    inboxes = sorted(folder.glob("p*.inbox"), key=lambda p: int(p.stem[1:]))
    return [line for p in inboxes for line in p.read_text().splitlines() if line]


def test_on_one_slot_the_next_run_hands_out_short_tests_first_then_the_longest(run_suite):
    """Nothing runs beside a long test on a device of one slot: long ones first would hold
    every short one back (the default `workers_per_device = 1`)."""
    options = {"suite": "dispatch", "suite_path": DISPATCH, "reruns": 0, "test_timeout": 30}
    run_suite("test_fast.py", "test_slow.py", **options)
    handed = _handed(run_suite("test_fast.py", "test_slow.py", **options))
    assert handed[:8] == [f"test_fast.py::test_fast[{i}]" for i in range(8)]
    assert handed[8:] == [f"test_slow.py::test_slow[{s}]" for s in (0.1, 2.1, 1.1)]


def test_a_test_cut_last_night_goes_first_among_the_long_ones(run_suite):
    args = ("test_outcomes.py", "test_hang.py")
    run_suite(*args, reruns=0)
    handed = _handed(run_suite(*args, reruns=0))
    hung = {"test_hang.py::test_hang", "test_hang.py::test_hard_hang"}
    assert set(handed[-2:]) == hung and len(handed) == 9  # after the short ones, on one slot


def test_a_crash_mid_queue_and_the_slot_carries_on(run_suite):
    detail = run_suite("test_crash.py", "test_fast.py", suite="dispatch", suite_path=DISPATCH)
    got = outcomes(detail)
    assert got["test_crash.py::test_abort"] == ("crashed", ["crashed", "crashed"])
    assert got["test_crash.py::test_after"] == ("passed", ["passed"])
    assert all(got[f"test_fast.py::test_fast[{i}]"][0] == "passed" for i in range(8))
    processes = {a["worker"] for r in detail["results"] for a in r["attempts"]}
    assert processes  # every attempt names its slot
    assert len(detail["results"]) == 11


def test_group_file_keeps_each_file_in_one_process(run_suite, tmp_path):
    detail = run_suite(
        "test_fast.py",
        "test_slow.py",
        "test_module.py",
        suite="dispatch",
        suite_path=DISPATCH,
        workers_per_device=2,
        group="file",
        test_timeout=30,
    )
    assert all(r["outcome"] == "passed" for r in detail["results"])
    files: dict[str, set[str]] = defaultdict(set)
    folder = Path(detail["run"]["artifacts"])
    for inbox in folder.glob("p*.inbox"):
        for nodeid in inbox.read_text().split():
            files[nodeid.split("::")[0]].add(inbox.stem)
    assert set(files) == {"test_fast.py", "test_slow.py", "test_module.py"}
    assert all(len(procs) == 1 for procs in files.values()), files
    setups = (tmp_path / "state" / "module_setups.txt").read_text().split()
    assert len(setups) == 1  # the module fixture ran once: its tests stayed together


def test_plan_predicts_from_the_last_run(tmp_path):
    import json

    from helpers import tracker

    config = '[runner]\nname = "ci"\n[[suites]]\nname = "s"\npath = "."\nworkers_per_device = 2\n'
    xml = (
        '<testsuite name="pytest">'
        '<testcase classname="t" name="slow" time="30"/>'
        '<testcase classname="t" name="mid" time="20"/>'
        '<testcase classname="t" name="fast" time="5"/>'
        '<testcase classname="u" name="cut" time="12"><failure message="Failed: Timeout"/>'
        "</testcase></testsuite>"
    )
    (tmp_path / "j.xml").write_text(xml)
    assert tracker(tmp_path, "plan", "s", config=config).returncode == 2  # nothing stored yet
    tracker(tmp_path, "ingest", "j.xml", "--suite", "s", "--runner", "ci")
    planned = json.loads(tracker(tmp_path, "plan", "s", "--json").stdout)
    assert [t["nodeid"] for t in planned["long_tests"]] == [
        "t.py::slow",
        "t.py::mid",
        "u.py::cut",
        "t.py::fast",
    ]
    assert planned["long_tests"][2]["cut"] is True and planned["cut_tests"] == 1
    said = " ".join(tracker(tmp_path, "plan", "s").stdout.split())
    assert "cut on a recent night: 1 test, each expected to take the longer of its time" in said
    assert "a device starts long tests on half its slots at most while others wait" in said
    assert {t["sharing"] for t in planned["long_tests"]} == {"unknown"}  # no timeline in JUnit
    # the cache is empty (cold): once half the slots run long tests, the shortest long one
    # goes next: cut 12 and fast 5 start, mid 20 follows fast (25), slow 30 cut (42)
    assert planned["kernel_cache"] == "cold" and planned["predicted_end"] == 42.0
    assert planned["done_by_minute"] == {"1": 4}
    # what tonight's cache will be, when the user knows better; warm, longest first: cut 12
    # and slow 30 start, mid 20 follows cut (32), fast 5 slow (35)
    for state, end in (("cold", 42.0), ("warm", 35.0)):
        asked = json.loads(tracker(tmp_path, "plan", "s", "--json", f"--{state}").stdout)
        assert asked["kernel_cache"] == state and asked["predicted_end"] == end
    assert planned["done_by_limit"] == 4 and "the run's limit" not in said  # 4 h by default
    # a limit of 30 s from the run's start: slow, the last, ends at 42 s
    short = config.replace("workers_per_device = 2", "workers_per_device = 2\nrun_timeout = 30")
    limited = json.loads(tracker(tmp_path, "plan", "s", "--json", config=short).stdout)
    assert limited["done_by_limit"] == 3
    said = " ".join(tracker(tmp_path, "plan", "s").stdout.split())
    assert "(run_timeout, 30 s from its start, a few seconds before its first test)" in said
    assert "cuts it: 3 of 4 tests predicted done by then" in said


def test_a_long_plan_prints_a_few_minutes_not_every_one(tmp_path):
    """A one-slot plan of a cold GPU night ran to 71 minutes and printed all of them."""
    from helpers import tracker

    config = '[runner]\nname = "ci"\n[[suites]]\nname = "s"\npath = "."\n'
    cases = "".join(f'<testcase classname="t" name="k{i}" time="300"/>' for i in range(15))
    (tmp_path / "j.xml").write_text(f'<testsuite name="pytest">{cases}</testsuite>')
    tracker(tmp_path, "ingest", "j.xml", "--suite", "s", "--runner", "ci", config=config)
    text = tracker(tmp_path, "plan", "s", "--devices", "1").stdout
    done = text[text.index("tests done by") : text.index("longest tests")]
    minutes = [int(m) for m in re.findall(r"(\d+) min:", done)]
    assert minutes == [1, 2, 5, 10, 15, 20, 30, 45, 60, 76]  # 15 x 300 s on one slot: 75 min
