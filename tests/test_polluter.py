"""Polluter search: delta debugging over the tests that ran before an order-dependent failure.
The search logic on predicates first (fast, exact), then real pytest processes on a fixture
suite, through the CLI."""

from __future__ import annotations

import itertools
import json
import re
import sys
from datetime import UTC, datetime

from fastapi.testclient import TestClient
from helpers import SUITES, settings_for, tracker

from tracker import store
from tracker.db import session_scope
from tracker.records import RunRecord
from tracker.runner import polluter
from tracker.web.app import create_app

TESTS = [f"t.py::test_{i:02}" for i in range(60)]
VICTIM, BEFORE = TESTS[-1], TESTS[:-1]


def search(fails_when):
    return polluter.search(VICTIM, BEFORE, fails_when, tries=3)


def test_one_polluter_thirty_tests_before_the_victim():
    found = search(lambda order: TESTS[29] in order)
    assert (found.verdict, found.culprits) == (polluter.ONE, [TESTS[29]])
    assert found.evidence == [f"fails after {TESTS[29]}: 3/3", "passes alone: 3/3"]
    assert found.probes < 40  # bisecting, not one probe per candidate


def test_a_polluter_that_pollutes_half_the_time():
    flip = itertools.cycle([True, False])
    found = search(lambda order: TESTS[10] in order and next(flip))
    assert (found.verdict, found.culprits) == (polluter.ONE, [TESTS[10]])


def test_two_tests_that_only_pollute_together():
    found = search(lambda order: TESTS[5] in order and TESTS[40] in order)
    assert (found.verdict, found.culprits) == (polluter.SET, [TESTS[5], TESTS[40]])


def test_a_plain_flaky_victim_is_not_blamed_on_a_neighbour():
    flip = itertools.cycle([False, True])
    found = search(lambda order: next(flip))
    assert found.verdict == polluter.FAILS_ALONE and found.culprits == []


def test_no_failure_after_the_prefix_is_not_reproduced():
    found = search(lambda order: False)
    assert found.verdict == polluter.NOT_REPRODUCED and found.culprits == []


def test_a_set_that_passes_when_run_again_is_not_blamed():
    """The device's case: the victim failed now and then, whatever ran before it; ddmin followed
    the failures to a set that then passed every try. Suspects, not polluters."""
    outcomes = itertools.cycle([True, False, False, False])  # 1 process in 4 after any test
    found = search(lambda order: len(order) > 1 and next(outcomes))
    assert found.verdict == polluter.NOT_CONFIRMED and found.culprits == []
    assert found.suspects and found.evidence[1].endswith(": 0/3")


def test_only_the_whole_prefix():
    found = polluter.search(VICTIM, TESTS[:4], lambda order: all(t in order for t in TESTS[:4]))
    assert (found.verdict, found.culprits) == (polluter.PREFIX, TESTS[:4])


def _config(tmp_path, files: list[str], budget: float, tries: int = 2) -> str:
    """The polluters fixture suite, each file in one process (so the victims fail in order)."""
    return f"""
[runner]
name = "ci"
device = "cpu"
[analysis]
polluter_tries = {tries}
polluter_budget_minutes = {budget}
[[suites]]
name = "polluters"
path = "{SUITES / "polluters"}"
python = "{sys.executable}"
args = {json.dumps(files)}
env = {{ FIXTURE_STATE = "{tmp_path}" }}
group = "file"
reruns = 1
"""


def test_the_polluter_is_found_in_real_processes_and_shown(tmp_path):
    config = _config(tmp_path, ["test_sixty.py", "test_plain.py"], budget=0)
    run = tracker(tmp_path, "run", "polluters", "--json", config=config)
    results = {r["nodeid"]: r for r in json.loads(run.stdout)["results"]}
    assert results["test_sixty.py::test_victim"]["outcome"] == "flaky"  # failed, passed alone
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    nightly = RunRecord("polluters", "ci", "runner", datetime.now(UTC))
    with session_scope(url) as session:  # a nightly run holds the suite: the search waits
        held = store.start_run(session, nightly).id
    beside = tracker(tmp_path, "polluter", "test_sixty.py::test_victim")
    assert beside.returncode == 2 and "already running" in beside.stderr
    with session_scope(url) as session:
        store.drop_run(session, held)
    found = tracker(tmp_path, "polluter", "test_sixty.py::test_victim", "--json")
    assert found.returncode == 0, found.stderr
    got = json.loads(found.stdout)
    assert (got["verdict"], got["culprits"]) == ("polluter", ["test_sixty.py::test_step[29]"])
    assert got["evidence"] == [
        "fails after test_sixty.py::test_step[29]: 2/2",
        "passes alone: 2/2",
    ]
    flaky = json.loads(tracker(tmp_path, "flaky", "--json").stdout)
    victim = next(f for f in flaky["flaky"] if f["nodeid"] == "test_sixty.py::test_victim")
    assert victim["polluter"]["culprits"] == ["test_sixty.py::test_step[29]"]
    table = tracker(tmp_path, "flaky").stdout
    assert "polluter search: polluter, after test_sixty.py::test_step[29]" in table
    app = create_app(settings_for(tmp_path, url))
    api = TestClient(app).get(f"/api/v1/tests/{victim['test_id']}").json()
    assert api["polluter"]["verdict"] == "polluter"
    page = TestClient(app).get(f"/tests/{victim['test_id']}").text
    assert "<h2>Polluter search</h2>" in page
    listed = TestClient(app).get("/suites/polluters/flaky").text
    assert "polluter: after test_sixty.py::test_step[29]" in listed
    assert re.search(r'fails after <a href="/tests/\d+">test_sixty.py::test_step\[29\]</a>', page)
    listed = json.loads(tracker(tmp_path, "runs", "--json").stdout)["runs"]
    assert [r["status"] for r in listed] == ["flaky"]  # the search's lock left no run behind

    plain = searched(tmp_path, "test_plain.py::test_plain_victim")  # no neighbour is blamed
    assert (plain["verdict"], plain["culprits"]) == ("fails alone", [])
    unknown = tracker(tmp_path, "polluter", "test_sixty.py::test_step[3]")
    assert unknown.returncode == 2 and "no failed first attempt" in unknown.stderr


def searched(tmp_path, victim: str) -> dict:
    return json.loads(tracker(tmp_path, "polluter", victim, "--json").stdout)


def test_a_polluter_caught_on_the_second_try_of_a_probe(tmp_path):
    tracker(tmp_path, "run", "polluters", config=_config(tmp_path, ["test_half.py"], budget=0))
    half = searched(tmp_path, "test_half.py::test_half_victim")
    assert (half["verdict"], half["culprits"]) == ("polluter", ["test_half.py::test_before[2]"])


def test_two_tests_that_pollute_only_together(tmp_path):
    # one try per probe: the pair is certain, and tries are test_half's
    config = _config(tmp_path, ["test_pair.py"], budget=0, tries=1)
    tracker(tmp_path, "run", "polluters", config=config)
    pair = searched(tmp_path, "test_pair.py::test_pair_victim")
    assert pair["verdict"] == "polluters"
    assert pair["culprits"] == ["test_pair.py::test_before[0]", "test_pair.py::test_before[2]"]


def test_a_nightly_budget_searches_new_suspects_after_the_run(tmp_path):
    config = _config(tmp_path, ["test_sixty.py"], budget=5)
    assert tracker(tmp_path, "run", "polluters", config=config).returncode == 0
    flaky = json.loads(tracker(tmp_path, "flaky", "--json").stdout)["flaky"]
    victim = next(f for f in flaky if f["nodeid"] == "test_sixty.py::test_victim")
    assert victim["polluter"]["culprits"] == ["test_sixty.py::test_step[29]"]


def test_no_probe_starts_once_the_budget_is_spent():
    import pytest

    probe = polluter.in_processes(job=None, until=0.0)  # type: ignore[arg-type]
    with pytest.raises(polluter.OutOfTime):
        polluter.search(VICTIM, BEFORE, probe)
