"""One run of a suite: probe, checkout, collect, run in contained pytest processes (several side
by side when there are several devices or workers), rerun each failure alone, and hand back a
RunRecord for the store.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from tracker.config import Settings, SuiteConfig
from tracker.ingest.confirm import contended, settle
from tracker.records import (
    CROWDING,
    FAILING,
    INTERRUPTED,
    PASSED,
    RUN_INFRA,
    RUN_TIMED_OUT,
    AttemptRecord,
    RunRecord,
    Sample,
    bound_nodeid,
)
from tracker.runner import plan, share
from tracker.runner.cache import (
    cache_state,
    forget_tuning,
    kernel_cache,
    note_compiled,
    prune,
    relocate,
    tuning,
)
from tracker.runner.checkout import CheckoutError, checkout
from tracker.runner.feed import Feed
from tracker.runner.probe import Probe, probe
from tracker.runner.process import Job, Pull, end_run, run_process
from tracker.signatures import fatal_regex
from tracker.words import plural

T = TypeVar("T")
VISIBLE_DEVICES = {"npu": "ASCEND_RT_VISIBLE_DEVICES", "cuda": "CUDA_VISIBLE_DEVICES"}


class Reporter:
    """What the runner tells the person watching; the CLI plugs a Rich progress bar in here."""

    def collected(self, total: int) -> None: ...
    def attempt(self, attempt: AttemptRecord, rerun: bool) -> None: ...
    def note(self, text: str) -> None: ...


@dataclass
class Slot:
    """A place where one pytest process runs at a time: a device (or the CPU) and a name."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    device: str = ""


def slots_for(kind: str, devices: list[int], per_device: int) -> list[Slot]:
    var = VISIBLE_DEVICES.get(kind)
    if not var or not devices:
        return [Slot(f"w{i}") for i in range(per_device)]
    return [
        Slot(f"d{dev}w{i}", {var: str(dev)}, str(dev)) for dev in devices for i in range(per_device)
    ]


def run_folder(settings: Settings, kind: str, suite: str, started: datetime) -> Path:
    """Where a run's (or an investigation's) processes keep their files."""
    folder = settings.data_dir / kind / suite / started.strftime("%Y%m%dT%H%M%S.%fZ")
    folder.resolve().mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def job_for(settings: Settings, suite: SuiteConfig, workdir: Path, deadline: float) -> Job:
    """What every pytest process of a suite needs. Nothing in it waits for the probe, so the
    processes start while it runs (`execute`)."""
    cache = kernel_cache(settings, suite)
    cached: dict[str, str] = {"TRITON_CACHE_DIR": str(cache)} if cache else {}
    if cache and tuning(suite.env) == "night":  # shared by the night's processes
        cached["TRITON_CACHE_AUTOTUNING"] = "1"
    return Job(
        python=suite.python,
        cwd=suite.path,
        args=[*suite.args, *(f"--deselect={d}" for d in suite.deselect)],
        env={**cached, **suite.env},
        workdir=workdir,
        test_timeout=suite.test_timeout,
        deadline=deadline,
        fatal_regex=fatal_regex(settings.fatal_patterns),
    )


class Phases:
    """Seconds from the run's start to the end of each phase, kept in the run's folder
    (`phases.json`): where a run's start-up time goes (bench/README.md)."""

    def __init__(self, path: Path, t0: float) -> None:
        self.path, self.t0, self.marks = path, t0, {}
        self.lock = threading.Lock()  # the probe's end is marked from its own thread

    def mark(self, phase: str, seconds: float | None = None) -> None:
        with self.lock:
            self.marks[phase] = round(time.monotonic() - self.t0 if seconds is None else seconds, 3)
            self.path.write_text(json.dumps(self.marks), encoding="utf-8")


def _on_each(slots: list[Slot], worker: Callable[[Slot], None]) -> None:
    """One thread per slot (daemons: Ctrl-C is not held up by them). A worker that raises ends
    the run with its own error, not with what its silence looked like ("collection failed")."""
    errors: list[BaseException] = []

    def guarded(slot: Slot) -> None:
        try:
            worker(slot)
        except BaseException as exc:  # handed to the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(s,), daemon=True) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


class _Execution:
    """The shared state of one run's processes: numbering, reporting, the timeout flag."""

    def __init__(self, job: Job, reporter: Reporter) -> None:
        self.job, self.reporter = job, reporter
        self.lock = threading.Lock()
        self.process_numbers = itertools.count()
        self.timed_out = False
        self.cut_short = False  # the tests stopped early, to leave the rest to the reruns
        self.notes: list[str] = []

    def queue(self, slot: Slot, nodeids: list[str], rerun: bool) -> list[AttemptRecord]:
        """Fresh processes until every test of the list has an attempt or no progress is made."""
        job = replace(self.job, env={**self.job.env, **slot.env})
        attempts: list[AttemptRecord] = []
        remaining = nodeids
        while remaining and not self.timed_out:
            with self.lock:
                number = next(self.process_numbers)
            result = run_process(
                job, remaining, f"p{number}", on_attempt=lambda a: self.reporter.attempt(a, rerun)
            )
            for attempt in result.attempts:
                attempt.process, attempt.isolated, attempt.worker = number, rerun, slot.name
            attempts.extend(result.attempts)
            if result.note:
                with self.lock:
                    self.notes.append(f"{slot.name}/p{number}: {result.note}")
                self.reporter.note(result.note)
            if result.run_timed_out:
                self.timed_out = True
            if not result.attempts:
                break
            remaining = result.remaining
        return attempts

    def pull(
        self,
        slots: list[Slot],
        feed: Feed,
        on_collected: Callable[[list[str]], None],
        reserve_from: float,
        runnable: dict[str, str],
        spares: list[Slot],
    ) -> tuple[list[AttemptRecord], list[AttemptRecord]]:
        """Each slot keeps one pytest process that pulls tests from the feed until it is
        empty; the first process to collect the suite fills the feed. A process that dies or
        hangs is blamed on its running test, gives back what it was handed and did not run,
        and the slot starts a fresh one that carries on pulling.

        A failure in `runnable` (ids as stored -> as pytest selects them; empty: no reruns) is rerun
        at once, in a fresh process beside the tests (in `spares`, one more slot per device, and in
        a slot with no test left to pull: `rerun_idle`): a cold GPU night runs to its limit, and a
        rerun left for after the tests either never came (call X: 11 failures, none rerun) or, with
        time kept for it, cost up to 7 finished tests (calls AA and AB in bench/README.md).

        A timeout or a crash is the exception: it counts once confirmed with its device to
        itself (`_rerun`). Once one has come, no test goes out after `reserve_from` (at once,
        when later), and the tests running then stop: at once when tests were left to hand
        out, else after half of what is left (a night that would end in that time ends as it
        would have). Returns the tests' attempts, the reruns after them, and the collection
        errors (every process reports them: kept once)."""
        collected: list[AttemptRecord] = []
        reran: list[AttemptRecord] = []  # after the first attempts: they come first in a record
        errors: dict[str, AttemptRecord] = {}
        crowded, stopped, cut, over = (threading.Event() for _ in range(4))
        pulling = replace(self.job, cut=cut)
        grace = (self.job.deadline - reserve_from) / 2
        timers: list[threading.Timer] = []
        again: queue.SimpleQueue[str | None] = queue.SimpleQueue()  # failures to rerun
        rerunners: list[threading.Thread] = []
        raised: list[BaseException] = []  # by a rerunner
        left = False  # tests were left to hand out when the reserve began

        def later(seconds: float, then: Callable[[], None]) -> None:
            timer = threading.Timer(max(0.0, seconds), then)
            timer.daemon = True
            timers.append(timer)
            timer.start()

        def rerun(slot: Slot, nodeid: str) -> None:
            got = self.queue(slot, [nodeid], rerun=True)
            with self.lock:
                reran.extend(got)

        def rerun_beside(slot: Slot) -> None:
            try:  # none after the tests: `_rerun` shares what is left over every slot
                while not over.is_set() and (nodeid := again.get()) is not None:
                    rerun(slot, nodeid)
            except BaseException as exc:  # raised in the main thread below
                raised.append(exc)

        def stop() -> None:
            """No test goes out any more: a timeout or crash is to be confirmed alone."""
            nonlocal left
            with self.lock:
                if stopped.is_set():
                    return
                stopped.set()
            left = feed.close()
            later(0 if left else grace, cut.set)

        def seen(attempt: AttemptRecord) -> None:
            self.reporter.attempt(attempt, False)
            if attempt.outcome in CROWDING:
                crowded.set()
                if time.monotonic() >= reserve_from:
                    stop()
            elif attempt.outcome in FAILING and runnable and attempt.nodeid in runnable:
                with self.lock:
                    if over.is_set():
                        return
                    again.put(runnable[attempt.nodeid])
                    if not rerunners:  # the first failure starts them
                        for slot in spares:
                            rerunners.append(threading.Thread(target=rerun_beside, args=(slot,)))
                            rerunners[-1].daemon = True
                            rerunners[-1].start()

        def rerun_idle(slot: Slot) -> bool:
            """A slot with no test to pull reruns a failure still waiting for the spare slot:
            on a night that ran to its limit, the spare alone reran 6 of 13 failures, one after
            the other (a fresh process and a cold kernel each, ~40 s), while most slots had
            nothing left to run, and 7 stayed failed (call AQ). Not once the tests stopped for
            a timeout or crash to be confirmed alone: the time left is for that. Whether it
            reran one."""
            if stopped.is_set():
                return False
            try:
                nodeid = again.get_nowait()
            except queue.Empty:
                return False
            if nodeid is None:  # the spares' signal to end: theirs, not this slot's
                again.put(None)
                return False
            rerun(slot, nodeid)
            return True

        def worker(slot: Slot) -> None:
            job = replace(pulling, env={**pulling.env, **slot.env})
            pull = Pull(feed, slot.name, on_collected)
            while not self.timed_out:
                if not feed.pending(slot.name):
                    if rerun_idle(slot):
                        continue
                    return
                with self.lock:
                    number = next(self.process_numbers)
                result = run_process(job, [], f"p{number}", seen, pull)
                handed = {bound_nodeid(n) for n in result.handed}
                ran = [a for a in result.attempts if a.nodeid in handed]
                for attempt in ran:
                    attempt.process, attempt.worker = number, slot.name
                feed.give_back(slot.name, result.remaining)
                notes = [result.note] if result.note else []
                if result.unknown:
                    notes.append(f"not collected in this process: {result.unknown[:5]}")
                with self.lock:
                    collected.extend(ran)
                    for attempt in result.attempts:
                        if attempt.nodeid not in handed:
                            errors.setdefault(attempt.nodeid, attempt)
                    self.notes.extend(f"{slot.name}/p{number}: {n}" for n in notes)
                    self.timed_out = self.timed_out or result.run_timed_out
                for note in notes:
                    self.reporter.note(note)
                if not ran:  # no progress: the next process would do the same
                    return

        def at_reserve() -> None:
            if crowded.is_set():
                stop()

        later(reserve_from - time.monotonic(), at_reserve)
        try:
            _on_each(slots, worker)
        finally:
            for timer in timers:
                timer.cancel()
            with self.lock:
                over.set()
            for _ in rerunners:
                again.put(None)
        for thread in rerunners:  # not on Ctrl-C: a rerun may take a test_timeout to end
            thread.join()
        if raised:
            raise raised[0]
        if stopped.is_set() and time.monotonic() < self.job.deadline:  # tests were left, or cut
            self.timed_out, self.cut_short = False, left or self.timed_out
        return [*collected, *reran], list(errors.values())

    def in_parallel(
        self, slots: list[Slot], work: Iterable[list[str]], rerun: bool
    ) -> list[AttemptRecord]:
        """Each slot takes the next piece of work until none is left, each piece in fresh
        processes (the reruns: one failed test per piece)."""
        pending = list(work)
        collected: list[AttemptRecord] = []

        def worker(slot: Slot) -> None:
            while not self.timed_out:
                with self.lock:
                    if not pending:
                        return
                    piece = pending.pop(0)
                got = self.queue(slot, piece, rerun)
                with self.lock:
                    collected.extend(got)

        _on_each(slots, worker)
        return collected


def execute(
    settings: Settings,
    suite: SuiteConfig,
    reporter: Reporter | None = None,
    on_start: Callable[[RunRecord], None] = lambda r: None,
    read_history: Callable[[], list[Sample]] = list,
) -> RunRecord:
    """Run the suite once. `on_start` sees the record first, before the checkout moves anything:
    it stores the `running` row, and refuses (by raising) when the suite is running already.
    `read_history` gives this runner's recent attempts of the suite, which the plan learns
    from; it is called while the device is probed. (The runner opens no database: the caller
    that stores the run knows where the history is.)"""
    reporter = reporter or Reporter()
    t0 = time.monotonic()
    started = datetime.now(UTC)
    workdir = run_folder(settings, "runs", suite.name, started)
    record = RunRecord(
        suite=suite.name,
        runner=settings.runner.name,
        source="runner",
        started_at=started,
        ref=suite.ref,
        artifacts=str(workdir),
    )

    def finish(status: str | None = None, message: str | None = None) -> RunRecord:
        record.status, record.message = status, message
        end_run(workdir)
        record.finished_at = datetime.now(UTC)
        relocating.join()
        if status != RUN_INFRA:
            record.kernel_cache = note_compiled(cache, record.kernel_cache)
            prune(cache, suite.kernel_cache_gb, started.timestamp())
            # claimed only where the night had a cache to speak of: not a suite that compiles
            # nothing, whose first night found its cache empty ("cold") and left it so
            shared = {"kept": "kept", "night": "per night"}.get(tuned or "")
            if record.kernel_cache and shared and record.environment:
                record.environment = {**record.environment, "autotuning": shared}
        return record

    cache = kernel_cache(settings, suite)
    record.kernel_cache = cache_state(cache)
    tuned = tuning(suite.env) if cache else None
    # an earlier night's tuning, gone before the first test goes out (`plan_run`): beside the
    # start-up too (0.1 s for 3,000 kernels on 2 slow cores)
    forgetting = _beside(lambda: forget_tuning(cache) if tuned == "night" else 0)
    # beside the start-up, not before it: 0.3 s for 3,000 kernels in place on 2 slow cores, long
    # done when the first test compiles (collection takes 12 s on the GPU), and a kernel looked
    # up meanwhile only compiles again, as it would have without
    relocating = threading.Thread(target=relocate, args=(cache,), name="kernel-cache", daemon=True)
    relocating.start()

    on_start(record)
    phases = Phases(workdir / "phases.json", t0)

    def probed() -> Probe:
        found = probe(suite, settings.runner)
        phases.mark("probe")
        return found

    warm = record.kernel_cache != "cold"

    def learned() -> tuple[dict[str, list[tuple[float, str]]], dict[str, share.Sharing]]:
        samples = read_history()
        return share.first_attempts(samples, warm), share.learn(samples, warm)

    # The probe (torch imported in the suite's interpreter: 4-7 s on a GPU) runs beside the
    # checkout and, when the configuration names the devices, beside the first processes'
    # collection (~15 s there): no test goes out before it has found the devices fit. The
    # plan's history is read beside them too.
    probing, history = _beside(probed), _beside(learned)
    try:
        record.commit = checkout(suite.path, suite.ref)
    except (CheckoutError, OSError, subprocess.TimeoutExpired) as exc:
        record.environment = probing.result().env
        return finish(RUN_INFRA, f"checkout failed: {exc}")
    phases.mark("checkout")
    known = _known_devices(settings)
    if known is None:
        found = probing.result()
        if found.problem:
            record.environment = found.env
            return finish(RUN_INFRA, found.problem)
        known = found.env["device_kind"], found.devices
    job = job_for(settings, suite, workdir, t0 + suite.run_timeout)
    per_device = suite.workers_per_device
    slots = slots_for(*known, per_device)
    # where failures are rerun beside the tests: the next slot of each device
    spares = [s for s in slots_for(*known, per_device + 1) if s not in slots]
    execution = _Execution(job, reporter)
    feed = Feed({slot.name: slot.device for slot in slots}, warm)
    nodeids: list[str] = []
    runnable: dict[str, str] = {}  # ids as stored -> as pytest selects them

    def plan_run(collected: list[str]) -> None:
        """The suite's one collection: the first process to report it fills the feed, once
        the probe has found the device fit (else nothing goes out)."""
        found = probing.result()
        with execution.lock:
            if feed.filled:
                return
            if found.problem:
                feed.close()
                return
            phases.mark("collected")
            forgetting.result()
            nodeids.extend(collected)
            runnable.update((bound_nodeid(n), n) for n in nodeids)
            expected = plan.estimates(nodeids, *history.result(), warm)
            plan.fill(feed, nodeids, expected, suite.group)
        reporter.collected(len(nodeids))

    reserve_from = t0 + suite.run_timeout * (1 - suite.rerun_reserve)
    beside = runnable if suite.reruns else {}
    attempts, collect_errors = execution.pull(slots, feed, plan_run, reserve_from, beside, spares)
    found = probing.result()
    record.environment = found.env
    if found.problem:  # the processes started beside the probe collected, and ran nothing
        return finish(RUN_INFRA, found.problem)
    phases.mark("tests")
    record.collected = [*nodeids, *(a.nodeid for a in collect_errors)]
    record.attempts.extend([*collect_errors, *attempts])
    if not feed.filled:
        why = "; ".join(execution.notes) or "not within the run's time limit"
        return finish(RUN_INFRA, f"collection failed: {why[:4000]}")
    if not record.collected:
        return finish(RUN_INFRA, "collection found no tests")

    _rerun(record, execution, slots, suite.reruns, runnable)
    settle(record)
    phases.mark("reruns")
    limited = execution.timed_out or execution.cut_short
    if suite.reruns and limited and (unrerun := _not_rerun(record, runnable)):
        execution.notes.append(
            f"{plural(len(unrerun), 'failure')} without a finished rerun, the run's limit came "
            f"first (each failed once; whether it passes alone is not known): "
            f"{', '.join(unrerun[:5])}"
            + (f" and {len(unrerun) - 5} more" if len(unrerun) > 5 else "")
        )
    if starts := [a.started_at for a in attempts if a.started_at]:
        phases.mark("first_test", (min(starts) - started).total_seconds())

    notes = "; ".join(execution.notes)[:4000] or None
    if execution.timed_out or execution.cut_short:
        why = f"run_timeout of {suite.run_timeout:g} s reached"
        if execution.cut_short:
            why = (
                f"the tests stopped before the run_timeout of {suite.run_timeout:g} s, to leave "
                f"its last {suite.rerun_reserve:.0%} to the reruns"
            )
        return finish(RUN_TIMED_OUT, why + (f"; {notes}" if notes else ""))
    return finish(None, notes)


def _beside(work: Callable[[], T]) -> Future[T]:
    """`work` in a daemon thread: Ctrl-C is not held up by a probe that has not answered."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # raised where the result is asked for
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return future


def _known_devices(settings: Settings) -> tuple[str, list[int]] | None:
    """The device kind and devices the probe will find if it finds no problem, when the
    configuration names them (the probe then only checks them). Not on an NPU: there the probe
    calls a device busy when `npu-smi` lists a process on it, and the slots' processes,
    collecting beside the probe, may already hold it (npu-smi may show a container's processes
    by their host ids, so they cannot be told apart from another job's)."""
    runner = settings.runner
    if runner.device == "cpu" or (runner.device == "cuda" and runner.devices is not None):
        return runner.device, list(runner.devices or [])
    return None


def _not_rerun(record: RunRecord, runnable: dict[str, str]) -> list[str]:
    """The failures whose rerun the run's limit came before, or cut (call AL: 4 test_mlp
    failures with one attempt each, which read like confirmed ones)."""
    tests = record.by_test()
    return [n for n, atts in tests.items()
            if n in runnable and atts and atts[0].outcome in FAILING
            and all(a.outcome == INTERRUPTED for a in atts[1:])]  # fmt: skip


def _rerun(
    record: RunRecord,
    execution: _Execution,
    slots: list[Slot],
    reruns: int,
    runnable: dict[str, str],
) -> None:
    """Rerun each failure alone in a fresh process, up to `reruns` times, side by side. A
    timeout or crash that had long tests beside it on its device is rerun with the device to
    itself (one slot per device, after the others), even with `reruns = 0`: until then it
    is not evidence (`confirm.settle`). `runnable`: ids as stored -> as pytest selects them
    (over-long ones are cut in the store); collection errors are not rerun."""
    per_device = {slot.device: slot for slot in slots}
    for round_ in range(max(reruns, 1)):
        tests = record.by_test()
        beside = contended(record, tests)
        retry = [
            n
            for n, atts in tests.items()
            if n in runnable
            and atts
            and atts[0].outcome in FAILING
            and all(a.outcome != PASSED for a in atts)
        ]
        confirm = [n for n in retry if n in beside and len(tests[n]) == 1]
        # this round's, not one a rerun beside the tests (`pull`) has had already
        again = [n for n in retry if n not in confirm and len(tests[n]) <= round_ + 1]
        confirm, again = [runnable[n] for n in confirm], [runnable[n] for n in again]
        again = again if round_ < reruns else []
        if execution.timed_out:
            return
        if not (confirm or again):
            continue
        record.attempts.extend(execution.in_parallel(slots, ([n] for n in again), rerun=True))
        alone = execution.in_parallel(list(per_device.values()), ([n] for n in confirm), True)
        record.attempts.extend(alone)
