"""How a test shares one GPU: the test alone, then N copies of it at once, each in a pytest
process of its own (as N slots would run N such tests), on the device machine.

    python3 bench/capacity.py --root .device/liger_kernel-0.8.5 --counts 1,1,2,4,8 NODEID ...

The first count of each test compiles its kernels (Triton's cache starts empty, in a folder of this
script's own, unless another test compiled them); the later ones find them compiled, as a warm night
does, but each process still tunes them (Triton keeps autotuning results in the process; in the
cache too with TRITON_CACHE_AUTOTUNING=1 in the caller's environment, call CE, as in a tracker
night's processes). A row gives the copies' times (setup + call + teardown, from each process's
report log; "(k failed)" after them when k copies failed), the mean GPU utilisation while they ran
(`nvidia-smi`, every 0.5 s) and `x serial`: how much faster the N copies ended than N runs of the
warm test alone one after another would (1.0: they took turns on the device; N: none slowed the
others), what `share.learn` guesses from the company counts of a night. `--mix "A=1;B=7"` adds a row
after them: 1 copy of A and 7 of B at once (a heavy test beside light files, as a chain's lane
beside the short tests), each one's times. All rows share one Triton cache. `--phase-limit` stops a
row's copies after that many seconds (their times are then lower bounds, marked `>`); `--deadline`
skips the rows that would start after it. `--cold`: every copy of every row starts with an empty
Triton cache of its own (and inductor's), so N copies at once all compile: whether compiling takes
turns on the device.
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


def times(log: Path) -> tuple[float, bool] | None:
    """A report log's test time (its setup, call and teardown) and whether any phase failed;
    None if it has no test. A time without its outcome says little: call CE's 4.8 s could have
    been a quick failure. Not `tracker.ingest.read_path`: this script runs with the device's
    python3, which lacks the tracker's dependencies (bench/liger_on_device.sh installs them in a
    venv of its own)."""
    total, seen, failed = 0.0, False, False
    for line in log.read_text().splitlines() if log.exists() else []:
        report = json.loads(line)
        if report.get("$report_type") == "TestReport":
            total += report.get("duration", 0.0)
            failed |= report.get("outcome") == "failed"
            seen = True
    return (total, failed) if seen else None


def sample_gpu() -> subprocess.Popen | None:
    try:
        return subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
             "-lms", "500"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
    except FileNotFoundError:
        return None


def phase(
    runs: dict[str, int], root: Path, env: dict, work: Path, limit: float, cold: bool = False
) -> dict:
    """Copies of tests at once (`runs`: test -> copies): each test's copies' times, the GPU's
    mean use, the wall time; with `cold`, each copy with empty compile caches of its own."""
    logs = {n: [work / f"{time.monotonic_ns()}-{k}-{i}.jsonl" for i in range(c)]
            for k, (n, c) in enumerate(runs.items())}  # fmt: skip
    gpu = sample_gpu()
    start = time.monotonic()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]

    def own_env(log: Path) -> dict:
        if not cold:
            return env
        return {**env, "TRITON_CACHE_DIR": f"{log}.triton", "TORCHINDUCTOR_CACHE_DIR": f"{log}.ind"}

    procs = [
        subprocess.Popen(
            [*pytest, nodeid, f"--report-log={log}"], cwd=root, env=own_env(log), **quiet
        )
        for nodeid, own in logs.items()
        for log in own
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
    timed = {n: [] if cut else [t for log in own if (t := times(log)) is not None]
             for n, own in logs.items()}  # fmt: skip
    gpu_use = round(mean(use), 1) if use else None
    return {"runs": runs, "times": {n: [t for t, _ in v] for n, v in timed.items()},
            "failed": {n: sum(f for _, f in v) for n, v in timed.items()},
            "cut": cut, "wall": round(wall, 1), "gpu": gpu_use}  # fmt: skip


def row_text(label: str, row: dict, alone: float | None, count: int) -> str:
    """A table row; `alone`, for rows of one test: its warm time alone, for `x serial`."""
    took = [t for own in row["times"].values() for t in own]
    # cut: every copy ran the whole phase, unfinished (lower bounds)
    end = row["wall"] if row["cut"] else max(took, default=0.0)
    serial = f"{count * alone / end:.2f}" if alone and end and count > 1 else "-"
    shown = f"> {row['wall']:.1f} each" if row["cut"] else "; ".join(
        " / ".join(f"{t:.1f}" for t in sorted(own)) for own in row["times"].values())  # fmt: skip
    if failed := sum(row["failed"].values()):
        shown += f" ({failed} failed)"
    gpu = f"{row['gpu']} %" if row["gpu"] is not None else "-"
    bound = "< " if row["cut"] and serial != "-" else ""
    return f"| {label} | {count or '-'} | {shown or '-'} | {gpu} | {bound}{serial} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nodeids", nargs="*")
    parser.add_argument("--root", type=Path, required=True, help="the suite's folder")
    parser.add_argument("--counts", default="1,1,2,4,8", help="copies at once, row by row")
    parser.add_argument(
        "--mix", action="append", default=[], help='after the rows: "A=1;B=7", tests at once'
    )
    parser.add_argument("--phase-limit", type=float, default=300.0)
    parser.add_argument("--cold", action="store_true", help="every copy compiles (`phase`)")
    parser.add_argument("--deadline", type=float, default=560.0, help="seconds from the start")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    args = parser.parse_args()
    began = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    print("| test | copies | times (s) | GPU use | x serial |\n| --- | ---: | --- | ---: | ---: |")
    plan = [({n: int(c)}, k) for n in args.nodeids for k, c in enumerate(args.counts.split(","))]
    for mix in args.mix:
        plan.append(({n: int(c) for n, c in (part.rsplit("=", 1) for part in mix.split(";"))}, 2))
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TRITON_CACHE_DIR": f"{tmp}/triton"}  # one cache, as a night's
        alone: dict[str, float] = {}
        for runs, k in plan:
            left = args.deadline - (time.monotonic() - began)
            if left < 10:
                break
            limit = min(args.phase_limit, left)
            row = phase(runs, args.root, env, Path(tmp), limit, args.cold)
            row["cold"] = k == 0 or args.cold
            rows.append(row)
            ((nodeid, count),) = runs.items() if len(runs) == 1 else ((None, 0),)
            if count == 1 and (k > 0 or args.cold) and row["times"][nodeid]:
                alone[nodeid] = min(alone.get(nodeid, float("inf")), row["times"][nodeid][0])
            label = " + ".join(f"{n.split('/')[-1]}" + (f" x {c}" if len(runs) > 1 else "")
                               for n, c in runs.items())  # fmt: skip
            label += "" if len(runs) > 1 else " (cold)" if row["cold"] else " (warm)"
            print(row_text(label, row, alone.get(nodeid), count), flush=True)
            (args.out / "capacity.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
