"""How a test shares one GPU: the test alone, then N copies of it at once, each in a pytest
process of its own (as N slots would run N such tests), on the device machine.

    python3 bench/capacity.py --root .device/liger_kernel-0.8.5 --counts 1,1,2,4,8 NODEID ...

The first count of each test compiles its kernels (Triton's cache starts empty, in a folder of
this script's own); the later ones find them compiled, as a warm night does, but each process
still tunes them (Triton keeps autotuning results in the process). A row gives the copies'
times (setup + call + teardown, from each process's report log), the mean GPU utilisation
while they ran (`nvidia-smi`, every 0.5 s) and `x serial`: how much faster the N copies ended
than N runs of the warm test alone one after another would (1.0: they took turns on the device;
N: none slowed the others). That is what `share.learn` guesses from company counts on a night.
`--phase-limit` stops a row's copies after that many seconds (their times are then lower bounds,
marked `>`); `--deadline` skips the rows that would start after it.
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
from statistics import mean


def times(log: Path) -> float | None:
    """A report log's test time: its setup, call and teardown; None if it has no test."""
    total, seen = 0.0, False
    for line in log.read_text().splitlines() if log.exists() else []:
        report = json.loads(line)
        if report.get("$report_type") == "TestReport":
            total += report.get("duration", 0.0)
            seen = True
    return total if seen else None


def sample_gpu() -> subprocess.Popen | None:
    try:
        return subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
             "-lms", "500"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
    except FileNotFoundError:
        return None


def phase(nodeid: str, count: int, root: Path, env: dict, work: Path, limit: float) -> dict:
    """`count` copies of the test at once; their times, the GPU's mean use, the wall time."""
    logs = [work / f"{time.monotonic_ns()}-{i}.jsonl" for i in range(count)]
    gpu = sample_gpu()
    start = time.monotonic()
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", nodeid]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [
        subprocess.Popen([*pytest, f"--report-log={log}"], cwd=root, env=env, **quiet)
        for log in logs
    ]
    cut = False
    for p in procs:
        try:
            p.wait(timeout=max(1.0, limit - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            cut = True
            p.kill()
            p.wait()
    wall = time.monotonic() - start
    use = []
    if gpu is not None:
        gpu.terminate()
        out, _ = gpu.communicate()
        use = [float(v) for v in out.split() if v.replace(".", "", 1).isdigit()]
    took = [] if cut else [t for log in logs if (t := times(log)) is not None]
    return {"nodeid": nodeid, "count": count, "times": took, "cut": cut, "wall": round(wall, 1),
            "gpu": round(mean(use), 1) if use else None}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nodeids", nargs="+")
    parser.add_argument("--root", type=Path, required=True, help="the suite's folder")
    parser.add_argument("--counts", default="1,1,2,4,8", help="copies at once, row by row")
    parser.add_argument("--phase-limit", type=float, default=300.0)
    parser.add_argument("--deadline", type=float, default=560.0, help="seconds from the start")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    args = parser.parse_args()
    began = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    print("| test | copies | times (s) | GPU use | x serial |\n| --- | ---: | --- | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for nodeid in args.nodeids:
            env = {**os.environ, "TRITON_CACHE_DIR": f"{tmp}/triton-{len(rows)}"}
            alone = None
            for k, count in enumerate(int(c) for c in args.counts.split(",")):
                left = args.deadline - (time.monotonic() - began)
                if left < 10:
                    break
                row = phase(nodeid, count, args.root, env, Path(tmp),
                            min(args.phase_limit, left))  # fmt: skip
                row["cold"] = k == 0
                rows.append(row)
                took = row["times"]
                if count == 1 and k > 0 and took:
                    alone = took[0] if alone is None else min(alone, took[0])
                # cut: every copy ran the whole phase, unfinished (lower bounds)
                end = row["wall"] if row["cut"] else max(took, default=0.0)
                serial = f"{count * alone / end:.2f}" if alone and end and k > 1 else "-"
                shown = f"> {row['wall']:.1f} each" if row["cut"] else " / ".join(
                    f"{t:.1f}" for t in sorted(took))  # fmt: skip
                label = "cold" if k == 0 else "warm"
                print(f"| {nodeid.split('/')[-1]} ({label}) | {count} | {shown or '-'} | "
                      f"{row['gpu'] if row['gpu'] is not None else '-'} % | "
                      f"{'< ' if row['cut'] and serial != '-' else ''}{serial} |",
                      flush=True)  # fmt: skip
                (args.out / "capacity.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
