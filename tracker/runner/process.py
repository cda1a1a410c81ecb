"""One pytest process over a list of tests, watched from outside: results stream in through
pytest-reportlog and our plugin's start events, so the supervisor always knows which test is
running. A process that dies blames that test (`crashed`); one that hangs past the per-test limit
is killed and the test is `timeout`; a device-fatal error makes the plugin end the session early.
Whatever did not run is handed back for the next process.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tracker.ingest.reportlog import ReportLogParser
from tracker.records import CRASHED, INTERRUPTED, TIMEOUT, AttemptRecord, bound_nodeid
from tracker.runner import jail
from tracker.runner.artifacts import bound_output, output_tail, process_files
from tracker.runner.feed import Feed

PLUGIN_SOURCE = Path(__file__).with_name("plugin.py")
POLL_S = 0.1


def watchdog_limit(test_timeout: float) -> float:
    """pytest-timeout fires at test_timeout inside the process; the kill from outside comes later,
    for hangs no signal can interrupt (a kernel stuck in the driver)."""
    return test_timeout + max(2.0, 0.1 * test_timeout)


@dataclass
class Job:
    """What one pytest process needs; `workdir` holds its select, reportlog, events and output."""

    python: str
    cwd: Path
    args: list[str]
    env: dict[str, str]
    workdir: Path
    test_timeout: float
    deadline: float  # time.monotonic() at which the run's time is up
    cut: threading.Event | None = None  # set: the tests stop, the rest of the run is for reruns
    fatal_regex: str = ""


@dataclass
class ProcessResult:
    attempts: list[AttemptRecord] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    note: str | None = None  # why the process ended without running what it was given
    run_timed_out: bool = False
    unknown: list[str] = field(default_factory=list)  # handed out, but not collected there
    handed: list[str] = field(default_factory=list)  # what a pulling process was given


class _Tail:
    """Complete lines appended to a file since the last read (a half-written line waits)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def lines(self) -> list[str]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        *done, self.partial = (self.partial + chunk).split(b"\n")
        return [line.decode("utf-8", "replace") for line in done]


def plugin_dir(workdir: Path) -> Path:
    """The plugin travels as a copy, so the suite's interpreter imports nothing of the tracker.
    Written once, whole, by a rename: rewritten in place for each process, it was once empty
    when a rerun's process imported it, as a fresh process started beside it, and the rerun
    ran its whole file instead of its one test, without the plugin's selection."""
    target = workdir / "plugin"
    plugin = target / "tracker_plugin.py"
    if not plugin.exists():
        target.mkdir(parents=True, exist_ok=True)
        partial = target / f".tracker_plugin.{os.getpid()}.{threading.get_ident()}"
        shutil.copyfile(PLUGIN_SOURCE, partial)
        partial.replace(plugin)
    return target


def suite_env(env: dict[str, str]) -> dict[str, str]:
    """The environment the suite's processes start from: the runner's, then the suite's `env`."""
    return {**os.environ, **env}


def pytest_env(job: Job, **tracker_vars: str) -> dict[str, str]:
    env = suite_env(job.env)
    path = str(plugin_dir(job.workdir))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (path, env.get("PYTHONPATH")) if p)
    env["TRACKER_FATAL"] = job.fatal_regex
    # pytest-timeout's own limit, where the suite's interpreter has it (ignored where not):
    # above the suite's ini, below a --timeout in its args
    env["PYTEST_TIMEOUT"] = f"{job.test_timeout:g}"
    env["TRACKER_PARENT"] = str(os.getpid())
    env["TRACKER_WORKDIR"] = str(job.workdir)  # finds leftovers after a crash of ours
    env.update(tracker_vars)
    return env


# The pytest processes run in sessions of their own (so that a kill takes their children too),
# which also means they outlive us unless we end them: on Ctrl-C, on a crash, at exit.
_live: set[subprocess.Popen] = set()
_jails: set[Path] = set()  # the run folders whose cgroups hold our processes (runner/jail.py)
_live_lock = threading.Lock()
_stopping = threading.Event()  # set once the tracker is ending: no new pytest process starts


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def kill_all(final: bool = True) -> None:
    """Kill every pytest process of ours. `final` (Ctrl-C, exit): and start none after, or a
    slot thread that sees its process die would start the next one while we shut down."""
    with _live_lock:
        if final:
            _stopping.set()
        procs, jails = list(_live), list(_jails)
    for proc in procs:
        _kill(proc)
        proc.wait()
    for workdir in jails:
        end_run(workdir)


def end_run(workdir: Path) -> None:
    """Kill what the run's tests left behind (a daemon, a grandchild in its own session)."""
    jail.kill(workdir)
    with _live_lock:
        _jails.discard(workdir)


atexit.register(kill_all)


def kill_leftovers(workdir: Path) -> int:
    """Kill every process of this host still working for a run's folder (the pytest processes
    and anything they started, found by the environment they inherited): the recovery after a
    tracker that died too hard to clean up after itself."""
    marker = f"TRACKER_WORKDIR={workdir}".encode()
    killed = jail.kill(workdir)
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker in (proc / "environ").read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            continue
    return killed


def pytest_command(job: Job, report: Path, *options: str) -> list[str]:
    """pytest in the suite's interpreter, with our plugin and a reportlog, then the suite's args."""
    return [
        job.python,
        "-m",
        "pytest",
        "-p",
        "tracker_plugin",
        f"--report-log={report}",
        *options,
        *job.args,
    ]


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Watch:
    """What the supervisor knows of one pytest process, from its two streams."""

    def __init__(self) -> None:
        self.parser = ReportLogParser()
        self.done: list[AttemptRecord] = []
        self.finished: set[str] = set()
        self.positions: dict[str, int] = {}  # order in which tests started in the process
        self.fatal: str | None = None
        self.timeout: str | None = None  # pytest-timeout's limit ended pytest itself
        self.last_start: tuple[str, float] | None = None

    def event(self, event: dict) -> None:
        if event["e"] == "start":
            nodeid = bound_nodeid(event["nodeid"])  # as the attempts hold it
            self.last_start = (nodeid, time.monotonic())
            self.positions.setdefault(nodeid, len(self.positions))
        elif event["e"] == "fatal":
            self.fatal = f"{event['signature']} in {event['nodeid']}"
        elif event["e"] == "timeout":
            self.timeout = event["message"]

    def report(self, line: str) -> None:
        attempt = self.parser.feed_line(line)
        if attempt is not None:
            self.done.append(attempt)
            self.finished.add(attempt.nodeid)

    def running(self) -> tuple[str, float] | None:
        """The test in progress and since when. The streams are read one after the other, so a
        fast test's reports can arrive before its start: a test that ended is never running."""
        if self.last_start and self.last_start[0] not in self.finished:
            return self.last_start
        return None

    def blame(self, nodeid: str, outcome: str, why: str, output: str, ran_for: float) -> None:
        """End the running test as crashed or timed out, keeping its reports so far. Its
        duration is how long it ran: a cut test is at least that long (the plan needs it)."""
        if nodeid not in self.parser.open_tests():
            self.parser.feed(
                {
                    "$report_type": "TestReport",
                    "nodeid": nodeid,
                    "when": "setup",
                    "outcome": "passed",
                    "duration": 0.0,
                    "start": time.time() - ran_for,  # the timeline and the company need it
                }
            )
        self.parser.close_open(outcome, why)
        attempt = self.parser.attempts[-1]
        attempt.duration = max(attempt.duration, ran_for)
        attempt.longrepr = f"{why}\n----- last output of the process -----\n{output}"
        self.done.append(attempt)
        self.finished.add(nodeid)


@dataclass
class Pull:
    """A process that pulls its tests: from which feed, for which slot, and who hears the
    suite's collection (the first process to report it fills the feed)."""

    feed: Feed
    taker: str
    on_collected: Callable[[list[str]], None] = lambda nodeids: None


def run_process(
    job: Job,
    nodeids: list[str],
    name: str,
    on_attempt: Callable[[AttemptRecord], None] = lambda a: None,
    pull: Pull | None = None,
) -> ProcessResult:
    """Run `nodeids` (in this order) in one fresh pytest process; return what happened to each.
    With `pull`, the process collects the suite and runs what it pulls from the feed instead,
    until the feed is empty; `remaining` is then what it was handed and did not run."""
    job.workdir.mkdir(parents=True, exist_ok=True)
    chosen, report, events, output, inbox = process_files(job.workdir, name)
    cmd = pytest_command(job, report, "--continue-on-collection-errors")
    env = pytest_env(job, TRACKER_EVENTS=str(events))
    pipes = _Pipes(pull, inbox) if pull else None
    if pipes:
        env["TRACKER_PULL"] = pipes.child_fds
    else:
        chosen.write_text("".join(f"{n}\n" for n in nodeids), encoding="utf-8")
        env["TRACKER_SELECT"] = str(chosen)
    with _live_lock, output.open("wb") as out:  # started and known to kill_all, or neither
        if _stopping.is_set():
            return ProcessResult(remaining=list(nodeids), note="the tracker is stopping")
        proc = subprocess.Popen(
            cmd,
            cwd=job.cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=pipes.pass_fds if pipes else (),
        )
        _live.add(proc)
        if jail.enter(job.workdir, proc.pid):  # long before pytest is imported, let alone a test
            _jails.add(job.workdir)
    if pipes:
        pipes.started()
    try:
        return _watch(job, proc, nodeids, name, report, events, output, on_attempt, pipes)
    finally:
        with _live_lock:
            _live.discard(proc)
        if pipes:
            pipes.close()


class _Pipes:
    """The pulling process's two pipes: it asks on one, the feed answers on the other (and in
    `<name>.inbox`, the record of what the process was handed)."""

    def __init__(self, pull: Pull, inbox: Path) -> None:
        self.pull, self.inbox = pull, inbox.open("w", encoding="utf-8")
        self.want_r, self.want_w = os.pipe()
        self.give_r, self.give_w = os.pipe()
        self.pass_fds = (self.want_w, self.give_r)
        self.child_fds = f"{self.want_w},{self.give_r}"
        self.handed: list[str] = []

    def started(self) -> None:
        os.close(self.want_w)  # the child's ends: its death closes them, which we then see
        os.close(self.give_r)

    def wait(self, seconds: float, drain: Callable[[], None]) -> None:
        """Sleep until the process asks for work (or `seconds` pass), and answer each ask. The
        process reports its collection before it first asks, so `drain` reads that report
        before the feed is asked (the first process to collect fills it)."""
        ready, _, _ = select.select([self.want_r], [], [], seconds)
        if not ready:
            return
        asks = os.read(self.want_r, 4096)
        if not asks:  # the process is gone
            time.sleep(seconds)
            return
        drain()
        for _ in asks:
            nodeid = self.pull.feed.take(self.pull.taker)
            if nodeid is not None:
                self.handed.append(nodeid)
            self.inbox.write(f"{nodeid or ''}\n")
            self.inbox.flush()
            with contextlib.suppress(BrokenPipeError):
                os.write(self.give_w, f"{nodeid or ''}\n".encode())

    def close(self) -> None:
        for fd in (self.want_r, self.give_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.inbox.close()


def _watch(
    job: Job,
    proc: subprocess.Popen,
    nodeids: list[str],
    name: str,
    report: Path,
    events: Path,
    output: Path,
    on_attempt: Callable[[AttemptRecord], None],
    pipes: _Pipes | None = None,
) -> ProcessResult:
    """Follow the process's two streams until it ends, or kill it on a hang or the run limit;
    when it pulls its tests, hand them out as it asks."""
    watch = Watch()
    report_tail, event_tail = _Tail(report), _Tail(events)
    unknown: list[str] = []

    def drain() -> None:
        for line in event_tail.lines():
            event = json.loads(line)
            watch.event(event)
            if event["e"] == "unknown":
                unknown.append(event["nodeid"])
            elif event["e"] == "collected" and pipes:
                pipes.pull.on_collected(event["nodeids"])
        for line in report_tail.lines():
            watch.report(line)

    reported = 0

    def report_done() -> None:
        """Each attempt as it ends: the run's progress, and its reserve for reruns, hear of a
        failure while the process runs on (a pulling process may run all night)."""
        nonlocal reported
        for attempt in watch.done[reported:]:
            attempt.worker = name
            on_attempt(attempt)
        reported = len(watch.done)

    killed: str | None = None
    while True:
        code = proc.poll()
        drain()
        report_done()
        if code is not None:
            break
        now, current = time.monotonic(), watch.running()
        if current and now - current[1] > watchdog_limit(job.test_timeout):
            killed = TIMEOUT
        elif now > job.deadline:
            killed = "run_timeout"
        elif job.cut is not None and job.cut.is_set():
            killed = "reserve"
        if killed:
            _kill(proc)
            code = proc.wait()
            drain()
            break
        if pipes:
            pipes.wait(POLL_S, drain)
        else:
            time.sleep(POLL_S)

    bound_output(output)
    current = watch.running()
    if current:
        if killed == TIMEOUT:
            why = f"no result after {watchdog_limit(job.test_timeout):g} s: killed"
        elif killed == "run_timeout":
            why = "the run's time limit was reached during this test"
        elif killed == "reserve":
            why = "the run stopped its tests here, to keep the rest of its time for reruns"
        elif watch.timeout:  # its alarm came in a reporting hook: not a crash of the test
            why = f"{watch.timeout} It came while pytest reported the test, and ended pytest."
        else:
            why = f"the test process died ({_exit_text(code)})"
        # a test the run's limit cut did not fail: it is interrupted, no evidence either way
        died = TIMEOUT if watch.timeout else CRASHED
        outcome = {None: died, TIMEOUT: TIMEOUT}.get(killed, INTERRUPTED)
        watch.blame(current[0], outcome, why, output_tail(output), time.monotonic() - current[1])
    report_done()
    for attempt in watch.done:  # a fast test's report may be read before its start
        attempt.position = watch.positions.get(attempt.nodeid)
    given = pipes.handed if pipes else nodeids
    result = ProcessResult(
        attempts=watch.done,
        remaining=[n for n in given if bound_nodeid(n) not in watch.finished and n not in unknown],
        run_timed_out=killed in ("run_timeout", "reserve"),
        unknown=unknown,
        handed=list(given),
    )
    waiting = pipes and pipes.pull.feed.pending(pipes.pull.taker)
    if (result.remaining or waiting) and not watch.done and not result.run_timed_out:
        # (stopped by the run's limit, it did nothing wrong: the run says why it stopped)
        tail = output_tail(output, 1500).strip()[-1500:]
        result.note = f"pytest ended ({_exit_text(code)}) before running any test" + (
            f": {tail}" if tail else ""
        )
    elif watch.fatal and result.remaining:
        result.note = f"device-fatal error ({watch.fatal}): the rest runs in a new process"
    return result
