"""First bad commit, in a git repository built here: 20 commits, the 13th breaks the test, the
10th makes it skip and the 11th makes it flaky (both ambiguous: reported, stepped around)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from helpers import settings_for, tracker

from tracker.runner import bisect
from tracker.runner.bisect import Step
from tracker.web.app import create_app

TARGET = "test_target.py::test_target"
BODY = {
    10: "import pytest\n\ndef test_target():\n    pytest.skip('not on this commit')\n",
    11: (  # flaky on this commit: fails every other time it runs
        "import os, pathlib\n\ndef test_target():\n"
        "    p = pathlib.Path(os.environ['FIXTURE_STATE']) / 'n'\n"
        "    n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "    p.write_text(str(n))\n    assert n % 2\n"
    ),
}


def _repo(path):
    def git(*args):
        return subprocess.run(
            ["git", "-C", str(path), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    path.mkdir()
    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    (path / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    shas = {}
    for i in range(1, 21):
        value = 2 if i >= 13 else 1  # commit 13 breaks it
        body = BODY.get(i, f"def test_target():\n    assert {value} == 1\n")
        (path / "test_target.py").write_text(body)
        (path / "notes.txt").write_text(f"change {i}\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"change {i}" + (": the breaking one" if i == 13 else ""))
        shas[i] = git("rev-parse", "HEAD")
    return shas


def test_the_search_steps_around_ambiguous_commits():
    commits = [f"c{i}" for i in range(2, 21)]
    verdicts = {f"c{i}": "good" if i < 13 else "bad" for i in range(2, 21)}
    verdicts |= {"c10": "ambiguous", "c11": "ambiguous", "c12": "ambiguous"}
    suspects, steps = bisect.bisect(commits, lambda c: Step(c, verdicts[c], []))
    # c9 is good, c13 bad, and 10-12 ambiguous: it says which commits it could be, no guess
    assert suspects == ["c10", "c11", "c12", "c13"]
    assert {s.commit for s in steps if s.verdict == "ambiguous"} == {"c10", "c11", "c12"}
    verdicts["c11"] = verdicts["c12"] = "good"  # with them readable, one commit is left
    assert bisect.bisect(commits, lambda c: Step(c, verdicts[c], []))[0] == ["c13"]


def _night(tmp_path) -> list[str]:
    """The repository of 21 commits, and a nightly run at its head that sees the target fail."""
    shas = _repo(tmp_path / "repo")
    config = f"""
[runner]
name = "ci"
device = "cpu"
[analysis]
polluter_tries = 2
[[suites]]
name = "repo"
path = "{tmp_path / "repo"}"
python = "{sys.executable}"
env = {{ FIXTURE_STATE = "{tmp_path}" }}
"""
    night = tracker(tmp_path, "run", "repo", config=config)
    assert night.returncode == 1, night.stderr
    return shas


def test_first_bad_commit_in_a_real_repository(tmp_path):
    shas = _night(tmp_path)
    proc = tracker(tmp_path, "bisect", TARGET, "--good", shas[1], "--bad", shas[20], "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert (got["verdict"], got["first_bad"]) == ("first bad commit", shas[13])
    assert got["subject"] == "change 13: the breaking one"
    verdicts = {s["commit"]: s["verdict"] for s in got["steps"]}
    assert all(verdicts[c] == "good" for c in verdicts if c in [shas[i] for i in range(1, 10)])
    assert verdicts.get(shas[13]) in (None, "bad")
    # the suite's checkout did not move: the search ran in a scratch worktree
    head = subprocess.run(
        ["git", "-C", str(tmp_path / "repo"), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    assert head.stdout.strip() == shas[20]
    listed = subprocess.run(
        ["git", "-C", str(tmp_path / "repo"), "worktree", "list"], capture_output=True, text=True
    )
    assert len(listed.stdout.strip().splitlines()) == 1  # the scratch worktree is gone
    app = create_app(settings_for(tmp_path, f"sqlite:///{tmp_path / 'cli.db'}"))
    test_id = json.loads(tracker(tmp_path, "show", "last", "--json").stdout)["results"][0]
    api = TestClient(app).get(f"/api/v1/tests/{test_id['test_id']}").json()
    assert api["bisect"]["first_bad"] == shas[13]
    page = TestClient(app).get(f"/tests/{test_id['test_id']}").text
    assert "<h2>First bad commit</h2>" in page and "change 13: the breaking one" in page
    table = tracker(tmp_path, "flaky").stdout  # next to "failing on every run"
    assert f"first bad commit: {shas[13]} change 13: the breaking one" in table
    wrong = tracker(tmp_path, "bisect", TARGET, "--good", shas[20], "--bad", shas[1])
    assert wrong.returncode == 2 and "not an ancestor" in wrong.stderr


def test_both_ends_are_checked_first_and_a_wrong_one_stores_nothing(tmp_path):
    shas = _night(tmp_path)
    both_bad = tracker(tmp_path, "bisect", TARGET, "--good", shas[14], "--bad", shas[20])
    assert both_bad.returncode == 2, both_bad.stdout
    assert f"the good end {shas[14][:12]} is bad (failed, failed)" in both_bad.stderr
    app = create_app(settings_for(tmp_path, f"sqlite:///{tmp_path / 'cli.db'}"))
    test_id = json.loads(tracker(tmp_path, "show", "last", "--json").stdout)["results"][0]
    assert TestClient(app).get(f"/api/v1/tests/{test_id['test_id']}").json()["bisect"] is None
    both_good = tracker(tmp_path, "bisect", TARGET, "--good", shas[1], "--bad", shas[9])
    assert both_good.returncode == 2 and "the bad end" in both_good.stderr


def test_a_folder_inside_another_repository_is_not_bisected(tmp_path):
    _repo(tmp_path / "repo")
    (tmp_path / "repo" / "suite").mkdir()  # as the bundled example sits in the tracker's repo
    with pytest.raises(bisect.BisectError, match="not the top of a git checkout"):
        bisect.commit_range(tmp_path / "repo" / "suite", "HEAD~1", "HEAD")
