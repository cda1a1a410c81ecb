"""Dispatch on CPU, the tracker's nights side by side with plain `pytest -n SLOTS --dist worksteal`
in the same call, each against its lower bound:

- skewed: one file holds a few slow tests (sleeps: they share the CPU well), forty files hold
  fast ones; bound max(work / slots, longest test);
- shared: one simulated device that six tests fill (each needs 2 s of it, in slices under an
  exclusive lock, so tests that use it together take turns and all stretch, as kernels that fill
  a GPU do), among 600 light tests; bound: the 12 s the device must work;
- shared2: the same on two simulated devices (12 filling tests, the slots half on each, xdist's
  workers pinned to device i % 2): a 2-GPU night, whose filling chains must be split between the
  devices; bound: 12 s.
- cut: more device work (6 x 3 s + 16 x 1 s) than the run's limit (14 s) allows, among 400
  light tests, as a cold night on one GPU: tests finished by each checkpoint, for both tools
  (most: the light ones, then the 1 s ones one at a time; started together, they take turns).
- rerun: the cut suite, and a light test that fails the first time it runs each night (as an
  order-dependent test fails in a crowded process), with `reruns = 1`: whether the night that
  hits its limit still reruns it (at once, beside the tests), and what that costs by each
  checkpoint.
- warmup: six heavy tests that compile (6 s, on the CPU: they share it) and then fill the
  device (1 s each, under its lock), among 400 light ones: two cold nights, then the first two
  warm ones (the cache kept, nothing to compile), as a GPU runner's first nights with the cache
  kept (bench/README.md, calls AO, AR and AS); xdist runs with the same warm cache; bound: the
  device's 6 s.
- warmshare: the same nights, but the heavy tests, once compiled, share the device (3 s each
  of sleep, no lock), as fused_moe's cases shared an H200 (calls BA and BB): untried on the
  first warm nights, and waiting on each other's kernel; bound: all the warm work / slots.
- warmpair: the same nights on a device that runs two heavy tests at once at full speed (2 s
  each, under one of two locks; more than two take turns): three or four at once, each is 1.5-2x
  slower, which the model reads as filling, though two at a time do twice the work of one (calls
  BD and BE read the H200's heavy cases so; measured, they take strict turns: calls BF-BH);
  bound: 6 s.
- warmcut: `warmup`'s suite with 10 heavy tests of 2.5 s of the device each, its cold nights
  cut at 11 s, before most of them have compiled: the warm night after compiles those (side by
  side) while all take turns on the device, as an H200's warm night did after a cut cold one
  (calls BZ, CA, CB); xdist runs with the cache the cut night left; bound: 25 s.
- warmchain: `warmcut`'s suite and 6 tests that fill the device for 2 s each and compile
  nothing, its cold nights cut at 16 s: on the warm night, a chain of filling tests shorter than
  the heavy ones stands before those the cache lacks, as test_dyt's cases stood before
  fused_moe's (calls BZ, CA; the cold nights cut some of the 6 too); bound: 37 s.
- warmtune: `warmup`'s suite and a kernel tuned once per process: 18 cases of 3 shapes, the
  first case of a shape in a process tunes it on the device (0.6 s under its lock), the others
  use it for 0.02 s, as test_mlp's first case of a shape was slow in each process of a warm
  H200 night (calls CL-CN); spread over processes, each tunes the shapes again; bound: the
  heavy tests' 6 s and the 3 shapes tuned once.
- compile: four files of eight tests, each test 1.2 s of work, and each file's kernel compiled
  (2 s) by the first of its tests in each process, as Triton compiles in-process, and left in
  the suite's Triton cache; every night starts with that cache emptied (cold, as the device's
  nights in bench/liger_on_device.sh); bound: one compile per file, all work spread over the
  slots. The other suites compile nothing: after their first night the tracker marks them so
  and does not plan their nights as cold ones.

Three nights per source tree (the later ones plan with the earlier ones' history).

    python bench/dispatch.py [before=/tmp/before] after=. [--slots 4] [--only cut] [--nights 3]

(`--nights N`: N nights of each tree; the warm suites run two cold ones, then N - 1 warm.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from finished_by import first_stops

SLOW = [6.0, 5.0, 4.0, 3.0]  # seconds, all in test_a_slow.py
FAST_FILES, FAST_PER_FILE, FAST = 40, 10, 0.05
FILL, FILL_FILES = 2.0, (2, 6, 10)  # seconds of device work; files holding two such tests each
LIGHT_FILES, LIGHT_PER_FILE, LIGHT = 12, 50, 0.02
INI = "[pytest]\naddopts = -p no:cacheprovider -p no:schemathesis -p no:hypothesispytest\n"
DEVICE = """import fcntl, os, time

def use(seconds, units=1):  # slices under one of `units` exclusive locks: more tests than
    # units, used together, take turns (a device that runs `units` at once at full speed)
    # one lock per device: the slot's (or the pinned xdist worker's) visible device
    lock = os.environ["DEVICE_LOCK"] + os.environ.get("CUDA_VISIBLE_DEVICES", "")
    handles = [open(lock if u == 0 else f"{lock}.{u}", "a") for u in range(units)]
    n = 0
    while seconds > 0:
        for fh in handles:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
        else:
            fh = handles[n % units]
            fcntl.flock(fh, fcntl.LOCK_EX)
        time.sleep(min(0.05, seconds))
        fcntl.flock(fh, fcntl.LOCK_UN)
        seconds -= 0.05
        n += 1
        time.sleep(0.002)
    for fh in handles:
        fh.close()
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


FILL_FILES_2 = (1, 3, 5, 7, 9, 11)  # `shared2`: twice the filling work, for two devices
PIN = """import os

worker = os.environ.get("PYTEST_XDIST_WORKER")  # xdist's workers pinned to device i % 2, as
if worker and "CUDA_VISIBLE_DEVICES" not in os.environ:  # bench/liger_on_device.sh pins them
    os.environ["CUDA_VISIBLE_DEVICES"] = str(int(worker[2:]) % 2)
"""
# what a 2-GPU machine's nvidia-smi says, for the tracker's probe (`--query-gpu=...`)
NVIDIA_SMI = "#!/bin/sh\necho '0, Simulated, 0.0, 1, 0'\necho '1, Simulated, 0.0, 1, 0'\n"


def shared(folder: Path, slots: int, fill_files: tuple = FILL_FILES, devices: int = 1) -> float:
    """`devices` > 1: xdist's workers pinned to them (`PIN`); the bound is each one's share."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text(INI)
    (folder / "simulated_device.py").write_text(DEVICE)
    if devices > 1:
        (folder / "conftest.py").write_text(PIN)
    for i in range(LIGHT_FILES):
        body = "import time, pytest\nimport simulated_device\n\n"
        body += f"@pytest.mark.parametrize('i', range({LIGHT_PER_FILE}))\n"
        body += f"def test_light(i):\n    time.sleep({LIGHT})\n"
        if i in fill_files:
            body += "\n\n@pytest.mark.parametrize('i', range(2))\ndef test_fill(i):\n"
            body += f"    simulated_device.use({FILL})\n"
        (folder / f"test_k{i:02}.py").write_text(body)
    light = LIGHT_FILES * LIGHT_PER_FILE * LIGHT
    return max(FILL * 2 * len(fill_files) / devices, light / slots)


def shared2(folder: Path, slots: int) -> float:
    """`shared` on two simulated devices, each filled by its own filling tests (12 of 2 s,
    spread over six files), the slots half on each: a CPU proxy of a 2-GPU night, where the
    filling chains must be split between the devices (xdist splits the files' order)."""
    return shared(folder, slots, FILL_FILES_2, devices=2)


CUT_LIMIT, CHECKPOINTS = 14, (4, 8, 12)
KERNELS, PER_KERNEL, COMPILE, WORK = 4, 8, 2.0, 1.2
HEAVY, HEAVY_COMPILE, HEAVY_WORK, WARM_CHECKPOINTS = 6, 6.0, 1.0, (2, 4, 6, 8)
HEAVY_SHARE = 3.0  # seconds of a `warmshare` heavy test once compiled, shared well
WARMCUT_LIMIT = 11.0  # `warmcut`'s cold nights: the light tests and some heavy compiles
WARMCUT_HEAVY, WARMCUT_WORK = 10, 2.5  # more heavy tests than slots, in turns once compiled
WARMCUT_CHECKPOINTS = tuple(range(4, 44, 4))  # its warm nights, to their tail
WARMCHAIN_LIMIT, WARMCHAIN_MID, WARMCHAIN_MID_WORK = 16.0, 6, 2.0  # `warmchain`: cached ones too
WARMCHAIN_CHECKPOINTS = tuple(range(4, 52, 4))
COMPILER = """import os, pathlib, time

_compiled = set()


def run(kernel, seconds, cached=False):  # once per process, or once per cache with `cached`
    folder = os.environ.get("TRITON_CACHE_DIR")
    if kernel in _compiled or (cached and folder and pathlib.Path(folder, kernel).exists()):
        return
    time.sleep(seconds)
    _compiled.add(kernel)
    if folder:  # left behind, as Triton does
        pathlib.Path(folder, kernel).write_text("compiled")
"""


def cut(folder: Path, slots: int) -> float:
    """Writes the suite; returns the tests a run can finish by the limit at best."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text(INI)
    (folder / "simulated_device.py").write_text(DEVICE)
    head = "import time, pytest\nimport simulated_device\n\n"
    (folder / "test_a_heavy.py").write_text(
        head + "@pytest.mark.parametrize('i', range(6))\n"
        "def test_heavy(i):\n    simulated_device.use(3.0)\n"
    )
    for i in range(4):
        (folder / f"test_mid{i}.py").write_text(
            head + "@pytest.mark.parametrize('i', range(4))\n"
            "def test_mid(i):\n    simulated_device.use(1.0)\n"
        )
    for i in range(8):
        (folder / f"test_light{i}.py").write_text(
            head + "@pytest.mark.parametrize('i', range(50))\n"
            f"def test_light(i):\n    time.sleep({LIGHT})\n"
        )
    return 400 + CUT_LIMIT - 2  # the light ones, then a 1 s one each second of the device


def rerun(folder: Path, slots: int) -> float:
    cut(folder, slots)
    (folder / "test_b_once.py").write_text(
        "import os, pathlib\n\n\ndef test_fails_first_time():\n"
        "    marker = pathlib.Path(os.environ['DEVICE_LOCK'] + '.ran')\n"
        "    if not marker.exists():\n"
        "        marker.write_text('1')\n"
        "        raise AssertionError('failed in the night, passes when rerun')\n"
    )
    return 400 + 1 + CUT_LIMIT - 2


def compiled(folder: Path, slots: int) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text(INI)
    (folder / "simulated_kernels.py").write_text(COMPILER)
    for k in range(KERNELS):
        (folder / f"test_kernel{k}.py").write_text(
            "import time, pytest\nimport simulated_kernels\n\n"
            f"@pytest.mark.parametrize('i', range({PER_KERNEL}))\n"
            f"def test_kernel(i):\n    simulated_kernels.run('k{k}', {COMPILE})\n"
            f"    time.sleep({WORK})\n"
        )
    return (KERNELS * COMPILE + KERNELS * PER_KERNEL * WORK) / slots


def warmup(
    folder: Path, slots: int, fills: bool = True, units: int = 1, heavy: int = HEAVY,
    work: float = HEAVY_WORK
) -> float:  # fmt: skip
    """`fills`: the heavy tests use the device once compiled, `units` of them at once at full
    speed (else they share it: `warmshare`); `heavy` of them, `work` seconds each."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text(INI)
    (folder / "simulated_device.py").write_text(DEVICE)
    (folder / "simulated_kernels.py").write_text(COMPILER)
    for i in range(8):
        (folder / f"test_light{i}.py").write_text(
            "import time, pytest\n\n@pytest.mark.parametrize('i', range(50))\n"
            f"def test_light(i):\n    time.sleep({LIGHT})\n"
        )
    (folder / "test_a_heavy.py").write_text(
        "import time, pytest\nimport simulated_device, simulated_kernels\n\n"
        f"@pytest.mark.parametrize('i', range({heavy}))\n"
        f"def test_heavy(i):\n    simulated_kernels.run(f'h{{i}}', {HEAVY_COMPILE}, cached=True)\n"
        + (
            f"    simulated_device.use({work * units}, {units})\n"
            if fills
            else f"    time.sleep({HEAVY_SHARE})\n"
        )
    )
    if fills:  # work * units each, `units` at once
        return heavy * work
    return max((HEAVY * HEAVY_SHARE + 8 * 50 * LIGHT) / slots, HEAVY_SHARE)


def warmshare(folder: Path, slots: int) -> float:
    """`warmup`'s nights with heavy tests that share the device once compiled."""
    return warmup(folder, slots, fills=False)


def warmpair(folder: Path, slots: int) -> float:
    """`warmup`'s nights on a device that runs two heavy tests at once at full speed."""
    return warmup(folder, slots, units=2)


def warmcut(folder: Path, slots: int) -> float:
    """`warmup`'s suite, its cold nights cut by a limit (`WARMCUT_LIMIT`) before every heavy
    test has compiled: the warm night after compiles those (side by side, on the CPU) and takes
    turns on the device with the others, as an H200's warm night did after a cold one that cut
    8 heavy cases (calls BZ, CA; compiling side by side, warm turns: call CB)."""
    return warmup(folder, slots, heavy=WARMCUT_HEAVY, work=WARMCUT_WORK)


def warmchain(folder: Path, slots: int) -> float:
    """`warmcut`'s suite and a file of tests that fill the device and compile nothing: on the
    warm night after the cut cold ones, a chain of shorter filling tests stands before the heavy
    ones the cache lacks, as test_dyt's cases stood before fused_moe's on an H200 (calls BZ, CA;
    a warm night that sent those out first, call CD, bench/README.md)."""
    warmup(folder, slots, heavy=WARMCUT_HEAVY, work=WARMCUT_WORK)
    (folder / "test_b_mid.py").write_text(
        "import pytest\nimport simulated_device\n\n"
        f"@pytest.mark.parametrize('i', range({WARMCHAIN_MID}))\n"
        f"def test_mid(i):\n    simulated_device.use({WARMCHAIN_MID_WORK})\n"
    )
    return WARMCUT_HEAVY * WARMCUT_WORK + WARMCHAIN_MID * WARMCHAIN_MID_WORK


TUNE, TUNED_CASES, SHAPES = 0.6, 18, 3  # `warmtune`: seconds of the device a shape's tuning takes
TUNED_USE = 0.02  # seconds of the device each tuned case uses once its shape is tuned
WARMTUNE_CHECKPOINTS = tuple(range(2, 20, 2))
TUNER = f"""import pytest
import simulated_device

_tuned = set()  # in this process only


@pytest.mark.parametrize("case", range({TUNED_CASES}))
def test_tuned(case):
    shape = case % {SHAPES}
    if shape not in _tuned:
        simulated_device.use({TUNE})
        _tuned.add(shape)
    simulated_device.use({TUNED_USE})
"""


def warmtune(folder: Path, slots: int) -> float:
    """`warmup`'s suite and a kernel each process tunes anew (`TUNER`): the night's cost of
    spreading a function's cases over processes, as test_mlp's on an H200 (472 s of slot time
    in 8 processes against xdist's 199 s, calls CL-CN)."""
    warmup(folder, slots)
    (folder / "test_b_tune.py").write_text(TUNER)
    return HEAVY * HEAVY_WORK + SHAPES * TUNE + TUNED_CASES * TUNED_USE


SCENARIOS = {"skewed": skewed, "shared": shared, "shared2": shared2, "cut": cut, "rerun": rerun,
             "compile": compiled, "warmup": warmup, "warmshare": warmshare, "warmpair": warmpair,
             "warmcut": warmcut, "warmchain": warmchain, "warmtune": warmtune}  # fmt: skip


def finished_by(launch: float, logs: list[Path], marks: tuple = CHECKPOINTS) -> str:
    """Tests finished by each checkpoint after `launch` (epoch seconds), from report logs."""
    stops = [s - launch for s in first_stops([str(p) for p in logs]).values()]
    return " / ".join(str(sum(1 for s in stops if s <= t)) for t in marks)


def night(
    src: Path,
    work: Path,
    slots: int,
    limit: float = 600,
    reruns: int = 0,
    cold: bool = True,
    marks: tuple = CHECKPOINTS,
    devices: int = 1,
) -> tuple[float, dict, str]:
    """`devices` > 1: that many simulated CUDA devices (a fake `nvidia-smi` for the probe), the
    slots split between them, each slot's tests on its device's lock."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    env.update(
        PYTHONPATH=str(src.resolve()),
        TRACKER_DATABASE_URL=f"sqlite:///{work / 't.db'}",
        DEVICE_LOCK=str(work / "device.lock"),
    )
    device = 'device = "cpu"'
    if devices > 1:
        smi = work / "bin" / "nvidia-smi"
        smi.parent.mkdir(exist_ok=True)
        smi.write_text(NVIDIA_SMI)
        smi.chmod(0o755)
        env["PATH"] = f"{smi.parent}:{env['PATH']}"
        device = f'device = "cuda"\ndevices = {list(range(devices))}'
    (work / "tracker.toml").write_text(
        f'data_dir = "{work / "data"}"\n[runner]\nname = "bench"\n{device}\n'
        f'[[suites]]\nname = "s"\npath = "{work / "suite"}"\npython = "{sys.executable}"\n'
        f"reruns = {reruns}\nworkers_per_device = {slots // devices}\ntest_timeout = 60\n"
        f"run_timeout = {limit}\n"
    )
    (work / "device.lock.ran").unlink(missing_ok=True)  # the `rerun` scenario's test fails anew
    # cold, as the device's nights: compiled kernels go (the mark of a suite that compiles
    # nothing stays beside them)
    if cold:
        shutil.rmtree(work / "data" / "cache" / "s" / "triton", ignore_errors=True)
    launch, t0 = time.time(), time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "tracker.cli", "run", "s", "--json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    got = json.loads(out.stdout)
    run = got["run"]
    run["once"] = next((r["outcome"] for r in got["results"] if "once" in r["nodeid"]), None)
    folder = max((work / "data" / "runs" / "s").iterdir())  # named by start time: tonight's
    logs = sorted(folder.glob("p*.reportlog.jsonl"))
    return time.monotonic() - t0, run, finished_by(launch, logs, marks)


def xdist(
    work: Path,
    slots: int,
    limit: float | None = None,
    cache: Path | None = None,
    marks: tuple = CHECKPOINTS,
) -> tuple[float, str]:
    """Plain pytest-xdist on the same suite, the same slots: the tool a user would pick."""
    env = {**os.environ, "DEVICE_LOCK": str(work / "device.lock")}
    if cache:
        env["TRITON_CACHE_DIR"] = str(cache)
    (work / "device.lock.ran").unlink(missing_ok=True)
    log = work / "xdist.jsonl"
    launch, t0 = time.time(), time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-n", str(slots), "--dist", "worksteal",
         f"--report-log={log}"],
        cwd=work / "suite",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its workers too are stopped at the limit, as a night's are
    )  # fmt: skip
    try:
        code = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
    if limit is None and code != 0:
        raise SystemExit(f"xdist failed on {work / 'suite'} (exit {code})")
    return time.monotonic() - t0, finished_by(launch, [log], marks)


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
            if scenario in ("cut", "rerun"):  # tests finished by each checkpoint
                _, done = xdist(work, args.slots, CUT_LIMIT)
                print(f"| {scenario} (at best {bound:.0f} by {CUT_LIMIT} s) | xdist | - | - | - "
                      f"| - | by {CHECKPOINTS} s: {done} |")  # fmt: skip
                reruns = int(scenario == "rerun")
                for n in range(1, args.nights + 1):
                    _, run, done = night(Path(src), work, args.slots, CUT_LIMIT, reruns)
                    once = f"; the failing test: {run['once']}" if reruns else ""
                    print(f"| {scenario} | {name} | {n} | - | {run['duration']:.1f} s | - | "
                          f"by {CHECKPOINTS} s: {done}{once} |")  # fmt: skip
                continue
            if scenario.startswith("warm"):  # two cold nights, then `nights - 1` warm ones
                cache = work / "xdist-cache"  # as warm as the tracker's warm nights
                limit, marks = {"warmcut": (WARMCUT_LIMIT, WARMCUT_CHECKPOINTS),
                                "warmchain": (WARMCHAIN_LIMIT, WARMCHAIN_CHECKPOINTS),
                                "warmtune": (600, WARMTUNE_CHECKPOINTS)
                                }.get(scenario, (600, WARM_CHECKPOINTS))  # fmt: skip
                for n in range(1, args.nights + 2):
                    if n == 3 and limit < 600:  # as the cut cold night left it
                        shutil.copytree(work / "data" / "cache" / "s" / "triton", cache)
                    wall, run, done = night(Path(src), work, args.slots, limit if n < 3 else 600,
                                            cold=n < 3, marks=marks)  # fmt: skip
                    print(f"| {scenario} | {name} | {n} | {wall:.1f} s | {run['duration']:.1f} s "
                          f"| {run['duration'] / bound:.2f}x | {run['kernel_cache']}, by "
                          f"{marks} s: {done} |")  # fmt: skip
                if not cache.exists():
                    shutil.copytree(work / "data" / "cache" / "s" / "triton", cache)
                wall, done = xdist(work, args.slots, cache=cache, marks=marks)
                print(f"| {scenario} (bound {bound:.1f} s) | xdist | warm | {wall:.1f} s | - | "
                      f"{wall / bound:.2f}x | by {marks} s: {done} |")  # fmt: skip
                continue
            wall, _ = xdist(work, args.slots)
            print(f"| {scenario} (bound {bound:.1f} s) | xdist | - | {wall:.1f} s | - | "
                  f"{wall / bound:.2f}x | - |")  # fmt: skip
            devices = 2 if scenario == "shared2" else 1
            for n in range(1, args.nights + 1):
                wall, run, _ = night(Path(src), work, args.slots, devices=devices)
                duration = run["duration"]
                print(f"| {scenario} | {name} | {n} | {wall:.1f} s | {duration:.1f} s | "
                      f"{duration / bound:.2f}x | {run['status']} {run['counts']} |")  # fmt: skip


if __name__ == "__main__":
    main()
