"""Dispatch on CPU, the tracker's nights side by side with plain `pytest -n SLOTS --dist worksteal`
in the same call, each against its lower bound:

- skewed: one file holds a few slow tests (sleeps: they share the CPU well), forty files hold
  fast ones; bound max(work / slots, longest test);
- shared: one simulated device that six tests fill (each needs 2 s of it, in slices under an
  exclusive lock, so tests that use it together take turns and all stretch, as kernels that fill
  a GPU do), among 600 light tests; bound: the 12 s the device must work.

Three nights per source tree (the later ones plan with the earlier ones' history).

    python bench/dispatch.py [before=/tmp/before] after=. [--slots 4] [--only shared]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLOW = [6.0, 5.0, 4.0, 3.0]  # seconds, all in test_a_slow.py
FAST_FILES, FAST_PER_FILE, FAST = 40, 10, 0.05
FILL, FILL_FILES = 2.0, (2, 6, 10)  # seconds of device work; files holding two such tests each
LIGHT_FILES, LIGHT_PER_FILE, LIGHT = 12, 50, 0.02
INI = "[pytest]\naddopts = -p no:cacheprovider -p no:schemathesis -p no:hypothesispytest\n"
DEVICE = """import fcntl, os, time

def use(seconds):  # slices under one exclusive lock: tests that use it together take turns
    with open(os.environ["DEVICE_LOCK"], "a") as fh:
        while seconds > 0:
            fcntl.flock(fh, fcntl.LOCK_EX)
            time.sleep(min(0.05, seconds))
            fcntl.flock(fh, fcntl.LOCK_UN)
            seconds -= 0.05
            time.sleep(0.002)
"""


def skewed(folder: Path, slots: int) -> float:
    """Writes the suite; returns its lower bound in seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text(INI)
    (folder / "test_a_slow.py").write_text(
        "import time, pytest\n\n"
        f"@pytest.mark.parametrize('s', {SLOW})\n"
        "def test_slow(s):\n    time.sleep(s)\n"
    )
    for i in range(FAST_FILES):
        (folder / f"test_fast_{i:02}.py").write_text(
            "import time, pytest\n\n"
            f"@pytest.mark.parametrize('i', range({FAST_PER_FILE}))\n"
            f"def test_fast(i):\n    time.sleep({FAST})\n"
        )
    return max((sum(SLOW) + FAST_FILES * FAST_PER_FILE * FAST) / slots, max(SLOW))


def shared(folder: Path, slots: int) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text(INI)
    (folder / "simulated_device.py").write_text(DEVICE)
    for i in range(LIGHT_FILES):
        body = "import time, pytest\nimport simulated_device\n\n"
        body += f"@pytest.mark.parametrize('i', range({LIGHT_PER_FILE}))\n"
        body += f"def test_light(i):\n    time.sleep({LIGHT})\n"
        if i in FILL_FILES:
            body += "\n\n@pytest.mark.parametrize('i', range(2))\ndef test_fill(i):\n"
            body += f"    simulated_device.use({FILL})\n"
        (folder / f"test_k{i:02}.py").write_text(body)
    light = LIGHT_FILES * LIGHT_PER_FILE * LIGHT
    return max(FILL * 2 * len(FILL_FILES), light / slots)


SCENARIOS = {"skewed": skewed, "shared": shared}


def night(src: Path, work: Path, slots: int) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env.update(
        PYTHONPATH=str(src.resolve()),
        TRACKER_DATABASE_URL=f"sqlite:///{work / 't.db'}",
        DEVICE_LOCK=str(work / "device.lock"),
    )
    (work / "tracker.toml").write_text(
        f'data_dir = "{work / "data"}"\n[runner]\nname = "bench"\ndevice = "cpu"\n'
        f'[[suites]]\nname = "s"\npath = "{work / "suite"}"\npython = "{sys.executable}"\n'
        f"reruns = 0\nworkers_per_device = {slots}\ntest_timeout = 60\n"
    )
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "tracker.cli", "run", "s", "--json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    return time.monotonic() - t0, json.loads(out.stdout)["run"]


def xdist(work: Path, slots: int) -> float:
    """Plain pytest-xdist on the same suite, the same slots: the tool a user would pick."""
    env = {**os.environ, "DEVICE_LOCK": str(work / "device.lock")}
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", str(slots), "--dist", "worksteal"],
        cwd=work / "suite",
        env=env,
        capture_output=True,
        check=True,
    )
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", default=["now=."], help="name=path of a source tree")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--nights", type=int, default=3)
    parser.add_argument("--only", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {args.slots} slots\n")
    print("| suite | tool | night | wall (process) | run duration | / bound | status |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for scenario, write in SCENARIOS.items():
        if args.only and scenario != args.only:
            continue
        for name, src in (t.split("=", 1) for t in args.trees):
            work = Path(tempfile.mkdtemp(prefix=f"dispatch-{scenario}-{name}-"))
            bound = write(work / "suite", args.slots)
            wall = xdist(work, args.slots)
            print(f"| {scenario} (bound {bound:.1f} s) | xdist | - | {wall:.1f} s | - | "
                  f"{wall / bound:.2f}x | - |")  # fmt: skip
            for n in range(1, args.nights + 1):
                wall, run = night(Path(src), work, args.slots)
                duration = run["duration"]
                print(f"| {scenario} | {name} | {n} | {wall:.1f} s | {duration:.1f} s | "
                      f"{duration / bound:.2f}x | {run['status']} {run['counts']} |")  # fmt: skip


if __name__ == "__main__":
    main()
