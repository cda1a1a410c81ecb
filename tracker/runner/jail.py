"""A cgroup per run folder, so that nothing a test starts outlives its run.

The pytest processes run in sessions of their own and die with the tracker (a parent-death
signal), and recovery finds what they started by the environment it inherited. A test can
escape both: a grandchild in a session of its own with a cleared environment. A cgroup is the
one thing an unprivileged process cannot leave, and its children are born in it. So each pytest
process is moved into its run folder's cgroup as it starts; at the run's end, at exit and in
the next recovery (after a `kill -9` of the tracker) every process still in it is killed.

Where no cgroup can be written (no cgroup filesystem, a read-only one in a container, not
Linux), `enter` says so and the run goes on with the other two guards; the README says what is
then not covered. A process that runs as root can still leave the cgroup.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import signal
import time
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")


def _own(hierarchy: str) -> str | None:
    """This process's cgroup path in a hierarchy: "" for cgroup2, else a v1 controller."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if (hierarchy == "" and controllers == "") or hierarchy in controllers.split(","):
                return path.lstrip("/")
    return None


@functools.cache
def base() -> Path | None:
    """The writable cgroup folder new run cgroups go under, or None: cgroup2 (mounted at the
    root, or at `unified` beside v1), else v1's `pids` controller."""
    for mount, hierarchy in ((CGROUPS, ""), (CGROUPS / "unified", ""), (CGROUPS / "pids", "pids")):
        own = _own(hierarchy)
        if own is None or not (mount / "cgroup.procs").exists():
            continue
        if hierarchy == "" and not (mount / "cgroup.controllers").exists():
            continue  # a v1 hierarchy where cgroup2 was looked for
        folder = mount / own
        if os.access(folder, os.W_OK):
            return folder
    return None


def path_for(workdir: Path) -> Path | None:
    root = base()
    if root is None:
        return None
    return root / f"tracker-{hashlib.sha1(str(workdir).encode()).hexdigest()[:16]}"


def enter(workdir: Path, pid: int) -> bool:
    """Move a just-started process (before it can start anything) into the run's cgroup."""
    folder = path_for(workdir)
    if folder is None:
        return False
    try:
        folder.mkdir(exist_ok=True)
        (folder / "cgroup.procs").write_text(str(pid))
    except OSError:
        return False
    return True


def kill(workdir: Path) -> int:
    """Kill every process in the run's cgroup and remove it; how many were killed."""
    folder = path_for(workdir)
    if folder is None or not folder.is_dir():
        return 0
    killed = 0
    for _ in range(200):  # until nothing is left: a fork may race a kill
        try:
            pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            break
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.01)
    with contextlib.suppress(OSError):
        folder.rmdir()
    return killed
