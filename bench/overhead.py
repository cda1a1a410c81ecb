"""Wall time of `tracker run` against plain `pytest` with the same arguments, side by side.

    python bench/overhead.py [--repeat 5]

Two suites: the bundled example (25 tests) and a generated CPU suite of 2,000 trivial tests in
40 files. Runs alternate (pytest, tracker, pytest, ...) so that the noise of a shared machine hits
both alike; the medians and their ratio are printed as a Markdown table. The tracker's time is the
whole command: probe, collection, the pytest process(es), reruns and the SQLite write.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracker.config import EXAMPLE_SUITE_DIR


def make_suite(root: Path, files: int = 40, tests: int = 50) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    for f in range(files):
        body = (
            f"import pytest\n\n\n@pytest.mark.parametrize('i', range({tests}))\n"
            "def test_k(i):\n    assert i * i >= 0\n"
        )
        (root / f"test_kernel_{f:02d}.py").write_text(body)
    return root


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def compare(name: str, suite: Path, reruns: int, repeat: int, work: Path) -> str:
    config = work / f"{name}.toml"
    config.write_text(
        f'database_url = "sqlite:///{work / "bench.db"}"\ndata_dir = "{work / "data"}"\n'
        f'[runner]\nname = "bench"\ndevice = "cpu"\n'
        f'[[suites]]\nname = "{name}"\npath = "{suite}"\npython = "{sys.executable}"\n'
        f'args = ["."]\nreruns = {reruns}\n'
    )
    env = {**os.environ, "TRACKER_CONFIG": str(config)}
    plain = [sys.executable, "-m", "pytest", ".", "-q", "-p", "no:cacheprovider"]
    tracked = [sys.executable, "-m", "tracker.cli", "run", name]
    a, b = [], []
    for _ in range(repeat):
        a.append(timed(plain, suite, env))
        b.append(timed(tracked, suite, env))
    pa, pb = statistics.median(a), statistics.median(b)
    return f"| {name} (reruns={reruns}) | {pa:.2f} s | {pb:.2f} s | {pb / pa:.2f}x |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        big = make_suite(work / "suite2000")
        rows = [
            compare("example", EXAMPLE_SUITE_DIR, 2, args.repeat, work),
            compare("example", EXAMPLE_SUITE_DIR, 0, args.repeat, work),
            compare("cpu2000", big, 2, args.repeat, work),
        ]
    print(f"median of {args.repeat}, {os.cpu_count()} cores, Python {sys.version.split()[0]}\n")
    print("| suite | plain pytest | tracker run | ratio |\n| --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
