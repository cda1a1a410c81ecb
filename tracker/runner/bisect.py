"""First bad commit: bisect a broken test between its last good commit and a bad one.

Each step runs that one test in fresh pytest processes, `tries` times, in a scratch git worktree
(never the suite's checkout, which a nightly run may be using). A commit is `good` when every
try passes and `bad` when every try fails; a skip, a collection error, a missing test or a mix of
passes and failures is `ambiguous`: reported as such and stepped around (as `git bisect skip`
does), never guessed.
"""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tracker.records import FAILING, PASSED, bound_nodeid
from tracker.runner.checkout import is_git_checkout
from tracker.runner.process import Job, run_process

GOOD, BAD, AMBIGUOUS = "good", "bad", "ambiguous"
FOUND, RANGE, NO_RANGE = "first bad commit", "first bad among ambiguous commits", "no range"


class BisectError(Exception):
    """The commits cannot be bisected (not a git checkout, unknown commits, not an ancestor)."""


@dataclass
class Step:
    commit: str
    verdict: str
    outcomes: list[str]


@dataclass
class Bisect:
    test: str
    verdict: str
    first_bad: str | None = None
    subject: str | None = None
    candidates: list[str] = field(default_factory=list)  # when ambiguity hides which one
    steps: list[Step] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def judge(outcomes: list[str]) -> str:
    if outcomes and all(o == PASSED for o in outcomes):
        return GOOD
    if outcomes and all(o in FAILING for o in outcomes):
        return BAD
    return AMBIGUOUS


def bisect(commits: list[str], verdict_of: Callable[[str], Step]) -> tuple[list[str], list[Step]]:
    """`commits`: oldest first, after the last good one, the last of them bad. Returns the
    commits that may be the first bad one (one, unless ambiguous steps hide which) and the
    steps taken."""
    lo, hi = -1, len(commits) - 1  # commits[lo] good (or the good base), commits[hi] bad
    unknown: set[int] = set()
    steps: list[Step] = []
    while hi - lo > 1:
        middle = (lo + hi) // 2
        order = sorted(
            (i for i in range(lo + 1, hi) if i not in unknown), key=lambda i: abs(i - middle)
        )
        if not order:
            break
        step = verdict_of(commits[order[0]])
        steps.append(step)
        if step.verdict == GOOD:
            lo = order[0]
        elif step.verdict == BAD:
            hi = order[0]
        else:
            unknown.add(order[0])
    return commits[lo + 1 : hi + 1], steps


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise BisectError(f"git {' '.join(args)}: {done.stderr.strip()[:300]}")
    return done.stdout.strip()


def commit_range(repo: Path, good: str, bad: str) -> tuple[str, list[str]]:
    """`good` as a full hash, and the commits after it up to `bad`, oldest first, on the path
    between them. The suite must be its own git checkout: a folder inside another repository
    (the bundled example) would bisect that repository's history, not the suite's."""
    if not is_git_checkout(repo):
        raise BisectError(
            f"{repo} is not the top of a git checkout (its runs are recorded as a plain folder):"
            " bisect needs the suite's own repository"
        )
    good = _git(repo, "rev-parse", "--verify", "--end-of-options", f"{good}^{{commit}}")
    bad = _git(repo, "rev-parse", "--verify", "--end-of-options", f"{bad}^{{commit}}")
    if subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", good, bad]
    ).returncode:
        raise BisectError(f"{good[:12]} is not an ancestor of {bad[:12]}")
    listed = _git(repo, "rev-list", "--reverse", "--ancestry-path", f"{good}..{bad}")
    return good, listed.split()


def check_ends(good: Step, bad: Step) -> None:
    """Bisect only between a good end that passes and a bad end that fails; else say so."""
    for step, want in ((good, GOOD), (bad, BAD)):
        if step.verdict != want:
            raise BisectError(
                f"the {want} end {step.commit[:12]} is {step.verdict} "
                f"({', '.join(step.outcomes)}), not {want}: nothing to bisect, nothing stored"
            )


def subject(repo: Path, commit: str) -> str:
    return _git(repo, "log", "-1", "--format=%s", commit)


@contextlib.contextmanager
def worktree(repo: Path) -> Iterator[Path]:
    """A scratch checkout of the repository, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="tracker-bisect-") as tmp:
        path = Path(tmp) / "wt"
        _git(repo, "worktree", "add", "--detach", str(path), "HEAD")
        try:
            yield path
        finally:
            with contextlib.suppress(BisectError):
                _git(repo, "worktree", "remove", "--force", str(path))


def in_processes(job: Job, tree: Path, test: str, tries: int) -> Callable[[str], Step]:
    """Check `tree` out at a commit, then run the test alone `tries` times, each in a fresh
    process (`job` runs in `tree`)."""
    numbers = itertools.count()

    def verdict_of(commit: str) -> Step:
        _git(tree, "checkout", "--quiet", "--detach", commit)
        outcomes = []
        for _ in range(max(1, tries)):
            result = run_process(job, [test], f"step{next(numbers)}")
            mine = [a.outcome for a in result.attempts if a.nodeid == bound_nodeid(test)]
            outcomes.append(mine[0] if mine else "not collected")
        return Step(commit, judge(outcomes), outcomes)

    return verdict_of
