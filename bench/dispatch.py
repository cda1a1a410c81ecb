"""Dispatch on a skewed suite, on CPU: one file holds a few slow tests, forty files hold fast
ones. Two nights in a row per source tree (the second has the first's durations to plan with),
side by side, against the lower bound max(work / slots, longest test).

    python bench/dispatch.py before=/tmp/before after=. [--slots 4]
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


def suite(folder: Path) -> float:
    """Writes the suite; returns its total work in seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text(
        "[pytest]\naddopts = -p no:cacheprovider -p no:schemathesis -p no:hypothesispytest\n"
    )
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
    return sum(SLOW) + FAST_FILES * FAST_PER_FILE * FAST


def night(src: Path, work: Path, slots: int) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env.update(PYTHONPATH=str(src.resolve()), TRACKER_DATABASE_URL=f"sqlite:///{work / 't.db'}")
    (work / "tracker.toml").write_text(
        f'data_dir = "{work / "data"}"\n[runner]\nname = "bench"\ndevice = "cpu"\n'
        f'[[suites]]\nname = "skewed"\npath = "{work / "suite"}"\npython = "{sys.executable}"\n'
        f"reruns = 0\nworkers_per_device = {slots}\ntest_timeout = 60\n"
    )
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "tracker.cli", "run", "skewed", "--json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    return time.monotonic() - t0, json.loads(out.stdout)["run"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="name=path of a source tree")
    parser.add_argument("--slots", type=int, default=4)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {args.slots} slots")
    work_total = None
    rows = []
    for name, src in (t.split("=", 1) for t in args.trees):
        work = Path(tempfile.mkdtemp(prefix=f"dispatch-{name}-"))
        work_total = suite(work / "suite")
        for n in (1, 2):
            wall, run = night(Path(src), work, args.slots)
            rows.append((name, n, wall, run["duration"], run["status"], run["counts"]))
    bound = max(work_total / args.slots, max(SLOW))
    print(f"work {work_total:.1f} s; lower bound max(work / slots, longest) = {bound:.1f} s\n")
    print("| tree | night | wall (process) | run duration | / bound | status |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, n, wall, duration, status, counts in rows:
        print(
            f"| {name} | {n} | {wall:.1f} s | {duration:.1f} s | {duration / bound:.2f}x "
            f"| {status} {counts} |"
        )


if __name__ == "__main__":
    main()
