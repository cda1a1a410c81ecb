"""The normalized record stream that both the runner and the ingesters produce, and the words of
docs/design.md (attempt outcome, final outcome, run status) computed from it in one place.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from tracker.models import LONGREPR_MAX, MESSAGE_MAX, NODEID_MAX
from tracker.words import spoken

# the versioned JSON of one whole run (`tracker show --json`, a push); a reader refuses others
RUN_FORMAT = "tracker-run/1"

# attempt outcomes
PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
XFAILED, XPASSED, CRASHED, TIMEOUT, INTERRUPTED = (
    "xfailed",
    "xpassed",
    "crashed",
    "timeout",
    "interrupted",
)
# a timeout or crash beside other long tests on the same device, not confirmed alone: the company
# (the tracker's own co-scheduling) may have caused it, so it is no evidence (like `interrupted`)
UNCONFIRMED = "unconfirmed"
# final-only outcomes
FLAKY, NOT_RUN = "flaky", "not_run"
ATTEMPT_OUTCOMES = (
    PASSED,
    FAILED,
    ERROR,
    SKIPPED,
    XFAILED,
    XPASSED,
    CRASHED,
    TIMEOUT,
    INTERRUPTED,
    UNCONFIRMED,
)
FINAL_OUTCOMES = (*ATTEMPT_OUTCOMES, FLAKY, NOT_RUN)
# seconds: a test shorter than this never holds a device long enough to matter (the plan ranks
# longer ones; only longer ones count as a test's company on its device)
LONG = 1.0
# attempts cut short: their duration is a lower bound of the test's
CUT = frozenset({TIMEOUT, CRASHED, INTERRUPTED, UNCONFIRMED})
# a first attempt with one of these is rerun alone and makes a run fail unless the rerun passes
FAILING = frozenset({FAILED, ERROR, CRASHED, TIMEOUT})
# what long tests beside it on its device can cause: it counts once confirmed alone
CROWDING = frozenset({TIMEOUT, CRASHED})
# a final outcome that says nothing of whether the test works: it did not run to an end
SILENT = frozenset({NOT_RUN, SKIPPED, INTERRUPTED, UNCONFIRMED})

# run statuses
RUN_PASSED, RUN_FLAKY, RUN_FAILED = "passed", "flaky", "failed"
RUN_INFRA, RUN_TIMED_OUT, RUN_INTERRUPTED, RUN_RUNNING = (
    "infra_error",
    "timed_out",
    "interrupted",
    "running",
)


def bound(text: str | None, limit: int) -> str | None:
    """Keep head and tail of long text: the exception is at the end, the context at the start."""
    if text is None or len(text) <= limit:
        return text
    half = (limit - 40) // 2
    return f"{text[:half]}\n… [{len(text) - 2 * half} characters cut] …\n{text[-half:]}"


def bound_nodeid(nodeid: str) -> str:
    """Keep ids unique while bounded: a cut id carries a hash of the whole. A cut id is 17
    characters over the limit and is left as it is, so cutting twice gives the same id."""
    if len(nodeid) <= NODEID_MAX + 17:
        return nodeid
    digest = hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{nodeid[:NODEID_MAX]}…{digest}"


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def kernel_of(nodeid: str) -> str:
    """`test/transformers/test_rms_norm.py::x` -> `rms_norm`: the file's stem sans test_."""
    stem = PurePosixPath(file_of(nodeid)).stem
    return stem.removeprefix("test_").removesuffix("_test") or stem


@dataclass(slots=True)
class AttemptRecord:
    nodeid: str
    outcome: str
    duration: float = 0.0
    message: str | None = None
    longrepr: str | None = None
    started_at: datetime | None = None
    isolated: bool = False
    process: int | None = None
    position: int | None = None
    worker: str | None = None

    def __post_init__(self) -> None:
        self.nodeid = bound_nodeid(self.nodeid)
        self.message = bound(self.message, MESSAGE_MAX)
        self.longrepr = bound(self.longrepr, LONGREPR_MAX)


@dataclass
class RunRecord:
    """One run of a suite, as the runner or an ingested file saw it."""

    suite: str
    runner: str
    source: str
    started_at: datetime
    finished_at: datetime | None = None
    commit: str | None = None
    ref: str | None = None
    collected: list[str] = field(default_factory=list)  # the expected tests, in suite order
    attempts: list[AttemptRecord] = field(default_factory=list)  # in the order they happened
    status: str | None = None  # forced status (infra_error, timed_out, interrupted), else derived
    message: str | None = None
    environment: dict[str, Any] | None = None
    artifacts: str | None = None
    kernel_cache: str | None = None  # "warm" or "cold": the compiled-kernel cache it started with

    def by_test(self) -> dict[str, list[AttemptRecord]]:
        """Attempts grouped per test, every collected test present, in suite order."""
        grouped: dict[str, list[AttemptRecord]] = {bound_nodeid(n): [] for n in self.collected}
        for attempt in self.attempts:
            grouped.setdefault(attempt.nodeid, []).append(attempt)
        return grouped


@dataclass(frozen=True)
class Sample:
    """One stored attempt, with when and where it ran: what the run plan learns from."""

    run: int
    nodeid: str
    number: int  # 1: the first attempt; later: a rerun
    duration: float
    outcome: str
    started_at: datetime | None = None
    worker: str | None = None  # the slot: `d0w3` ran on device 0
    warm: bool | None = None  # the run's compiled-kernel cache was warm

    @property
    def device(self) -> str:
        return device_of(self.worker)


def natural_order(name: str) -> list[tuple[int, int, str]]:
    """Worker names in the order people count them: gw2 before gw10, d0w3 before d1w0."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


def device_of(worker: str | None) -> str:
    """The device of a runner slot (`d0w3`: device 0); "" for anything else, which counts as
    one device: a CPU run, or another tool's workers."""
    worker = worker or ""
    return worker[1:].split("w", 1)[0] if worker.startswith("d") and "w" in worker else ""


@dataclass
class FileResults:
    """What a results file says: attempts in the order they happened and, where the file states
    them, the wall time its tests spanned."""

    attempts: list[AttemptRecord]
    started_at: datetime | None
    finished_at: datetime | None
    cut: bool = False  # it ends before its session did: tests not started by then are not in it


def final_outcome(attempts: list[AttemptRecord]) -> str:
    """The first attempt decides, except that a test with a failed and a passed attempt is flaky
    (our reruns, or another tool's retries in any order). A skipped attempt before one that ran is
    a retry as TestNG reports it, and an unconfirmed one was followed by a rerun alone: the
    attempt that ran (alone) decides."""
    if not attempts:
        return NOT_RUN
    outcomes = [a.outcome for a in attempts]
    if PASSED in outcomes and any(o in FAILING for o in outcomes):
        return FLAKY
    # an unconfirmed attempt says nothing: the rerun alone that followed it decides
    return next((o for o in outcomes if o not in (SKIPPED, UNCONFIRMED)), outcomes[0])


def summarize(
    record: RunRecord, quarantined: frozenset[str] | set[str] = frozenset()
) -> tuple[dict[str, str], str, Counter[str]]:
    """Final outcome per test, the run's status and the counts of final outcomes. Quarantined
    tests are counted but do not decide the status: they keep running, they no longer fail runs."""
    finals = {nodeid: final_outcome(atts) for nodeid, atts in record.by_test().items()}
    counts = Counter(finals.values())
    deciding = Counter(o for n, o in finals.items() if n not in quarantined)
    if record.status:
        status = record.status
    elif not finals:
        status = RUN_INFRA
    elif any(deciding[o] for o in (*FAILING, NOT_RUN)):
        status = RUN_FAILED
    elif deciding[INTERRUPTED] or deciding[UNCONFIRMED]:
        status = RUN_INTERRUPTED
    elif deciding[FLAKY]:
        status = RUN_FLAKY
    else:
        status = RUN_PASSED
    return finals, status, counts


def status_text(status: str, quarantined_failures: int = 0) -> str:
    """A run's status as people read it: "passed" must not hide failures the quarantine
    absorbed. In words: `timed out`, not the stored `timed_out`."""
    words = spoken(status)
    if not quarantined_failures:
        return words
    s = "" if quarantined_failures == 1 else "s"
    return f"{words} ({quarantined_failures} quarantined failure{s})"
