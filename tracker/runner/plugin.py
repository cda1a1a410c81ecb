"""pytest plugin loaded inside the suite's own interpreter (copied next to the run's files and
loaded with `-p tracker_plugin`), so it imports nothing from the tracker and only the standard
library. It is steered by environment variables:

TRACKER_EVENTS   JSON-lines file: `start` of every test (so the supervisor knows which test a
                 dead or hung process was in), `fatal` when a device-fatal error was seen,
                 `collected` (the ordered test ids) in collect-only and pull modes, `timeout`
                 when pytest-timeout's limit ended pytest itself.
TRACKER_SELECT   file with the test ids to run, one per line, in this order; files holding none of
                 them are not even imported.
TRACKER_FATAL    regular expression of device-fatal errors: the first failure that matches ends the
                 session after that test, so one poisoned device context cannot fail the rest.
TRACKER_PULL     "WANT,GIVE": two pipe descriptors. The process collects the suite, reports it
                 (`collected`), then pulls its tests one at a time: a byte on WANT asks, a
                 line on GIVE answers (empty: no more). The next test is asked for only when
                 pytest tears the running one down, so a long test never waits behind another
                 in this process while a slot elsewhere is free.
TRACKER_PARENT   pid of the tracker: on Linux the process asks the kernel to kill it when the
                 tracker dies (even by kill -9), so no orphan holds the device into the next run.

Results themselves are streamed by pytest-reportlog.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time

import pytest


def _die_with_the_tracker() -> None:
    parent = os.environ.get("TRACKER_PARENT")
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


_die_with_the_tracker()
_events = None
_fatal_re = re.compile(os.environ["TRACKER_FATAL"]) if os.environ.get("TRACKER_FATAL") else None
_selected: list[str] | None = None
_selected_files: set[str] = set()


def _emit(**data) -> None:
    if _events is not None:
        _events.write(json.dumps(data) + "\n")
        _events.flush()


def pytest_configure(config) -> None:
    global _events, _selected
    path = os.environ.get("TRACKER_EVENTS")
    if path and not hasattr(config, "workerinput"):
        _events = open(path, "a", encoding="utf-8")  # noqa: SIM115  (closed at unconfigure)
    select = os.environ.get("TRACKER_SELECT")
    if select:
        with open(select, encoding="utf-8") as fh:
            _selected = [line.rstrip("\n") for line in fh if line.strip()]
        _selected_files.update(n.split("::", 1)[0] for n in _selected)


def pytest_unconfigure(config) -> None:
    global _events
    if _events is not None:
        _events.close()
        _events = None


def pytest_ignore_collect(collection_path, config):
    if _selected is None or not collection_path.is_file() or collection_path.suffix != ".py":
        return None
    if collection_path.name == "conftest.py":
        return None
    try:
        rel = collection_path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return None
    return True if rel not in _selected_files else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    if _selected is None:
        return
    order = {nodeid: i for i, nodeid in enumerate(_selected)}
    keep = sorted((it for it in items if it.nodeid in order), key=lambda it: order[it.nodeid])
    dropped = [it for it in items if it.nodeid not in order]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


class _Inbox:
    """The two pipes to the tracker: a byte on one asks for a test, a line on the other is
    the answer (an empty line, or the tracker gone: no more)."""

    def __init__(self, fds: str) -> None:
        want, give = (int(fd) for fd in fds.split(","))
        self.want, self.give = want, open(give, encoding="utf-8")  # noqa: SIM115

    def pull(self) -> str | None:
        os.write(self.want, b"w")
        return self.give.readline().rstrip("\n") or None


class _Next:
    """The item after the running one, pulled when pytest asks for it: in the running test's
    teardown, which keeps the fixtures the two share (module, class, session)."""

    def __init__(self, inbox: _Inbox, items: dict) -> None:
        self.inbox, self.items, self.asked, self.item = inbox, items, False, None

    def __bool__(self) -> bool:
        return True

    def listchain(self) -> list:
        if not self.asked:
            self.asked = True
            self.item = self.take()
        return self.item.listchain() if self.item is not None else []

    def take(self):
        while (nodeid := self.inbox.pull()) is not None:
            if nodeid in self.items:
                return self.items[nodeid]
            _emit(e="unknown", nodeid=nodeid)  # not collected here: the tracker reports it
        return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    fds = os.environ.get("TRACKER_PULL")
    if not fds or session.config.option.collectonly:
        return None
    items = {item.nodeid: item for item in session.items}
    inbox = _Inbox(fds)
    item = _Next(inbox, items).take()
    while item is not None:
        following = _Next(inbox, items)
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=following)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        item = following.item if following.asked else following.take()
    return True


def pytest_collection_finish(session) -> None:
    if session.config.option.collectonly or os.environ.get("TRACKER_PULL"):
        _emit(e="collected", nodeids=[item.nodeid for item in session.items])


def pytest_runtest_logstart(nodeid, location) -> None:
    _emit(e="start", nodeid=nodeid, t=time.time(), pid=os.getpid())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _fatal_re is None or not report.failed or getattr(item, "_tracker_fatal", False):
        return
    match = _fatal_re.search(str(report.longrepr))
    if match:
        item._tracker_fatal = True
        _emit(e="fatal", nodeid=item.nodeid, signature=match.group(0)[:200])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    # Stop only after the test's teardown, so its own reports are complete.
    if getattr(item, "_tracker_fatal", False):
        item.session.shouldstop = "device-fatal error: the tracker reruns the rest in a new process"


def pytest_internalerror(excrepr, excinfo) -> None:
    """pytest-timeout's limit covers a test's reporting too, and its alarm landing in a reporting
    hook (a report of megabytes, under load) ends pytest with an internal error: the test ran out
    of its time, it did not crash, so say so before pytest goes."""
    if str(excinfo.value).endswith("from pytest-timeout."):
        _emit(e="timeout", message=str(excinfo.value)[:200])
