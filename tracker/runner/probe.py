"""Before each run: which device, how many, how healthy, which driver/CANN/torch/triton versions the
suite's interpreter sees. A missing, busy or unhealthy device makes the run `infra_error` instead
of hundreds of test failures.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker.config import RunnerConfig, SuiteConfig

SCRIPT = (Path(__file__).parent / "probe_script.py").read_text(encoding="utf-8")
HEALTHY = {"OK", "Warning"}


@dataclass
class Probe:
    env: dict[str, Any]
    devices: list[int] = field(default_factory=list)  # device ids the run may use
    problem: str | None = None  # set: the run is an infra_error


def _run(cmd: list[str], timeout: float = 60) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, errors="replace"
        )
    except FileNotFoundError:
        return 127, f"{cmd[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(cmd[:3])}: no answer within {timeout:.0f} s"
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def parse_npu_smi(text: str) -> dict[str, Any]:
    """`npu-smi info` -> driver version and one entry per NPU chip (name, health, HBM, busy)."""
    version = re.search(r"Version:\s*(\S+)", text)
    chips: list[dict[str, Any]] = []
    busy: set[int] = set()
    npu: dict[str, Any] | None = None
    in_processes = False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2:
            continue
        if "Process id" in line:
            in_processes = True
            continue
        if in_processes:
            head = cells[0].split()
            if head and head[0].isdigit() and len(cells) >= 3 and cells[1].isdigit():
                busy.add(int(head[0]))
            continue
        head = cells[0].split()
        if len(head) >= 2 and head[0].isdigit() and re.fullmatch(r"[A-Za-z]+", cells[1] or "-"):
            npu = {"npu": int(head[0]), "name": " ".join(head[1:]), "health": cells[1]}
        elif npu and head and head[0].isdigit() and re.match(r"[0-9A-Fa-f]{4}:", cells[1]):
            hbm = re.findall(r"(\d+)\s*/\s*(\d+)", cells[2]) if len(cells) > 2 else []
            chip = {**npu, "chip": int(head[0]), "bus_id": cells[1]}
            if len(hbm) >= 2:  # Memory-Usage then HBM-Usage; 310-class cards have no HBM column
                chip["hbm_used_mb"], chip["hbm_total_mb"] = int(hbm[-1][0]), int(hbm[-1][1])
            chips.append(chip)
    for chip in chips:
        chip["busy"] = chip["npu"] in busy
    return {"driver": version.group(1) if version else None, "chips": chips}


def parse_cann_info(text: str) -> str | None:
    """`version=8.2.RC1` in ascend_toolkit_install.info, `Version=...` in version.info."""
    match = re.search(r"^\s*version\s*=\s*(\S+)", text, re.IGNORECASE | re.MULTILINE)
    return match.group(1) if match else None


def cann_version() -> str | None:
    home = os.environ.get("ASCEND_TOOLKIT_HOME")
    arch = f"{platform.machine()}-linux"
    candidates = []
    if home:
        candidates += [Path(home, "cann", "version.info"), Path(home, "toolkit", "version.info")]
        candidates.append(Path(home).parent / arch / "ascend_toolkit_install.info")
    candidates.append(
        Path("/usr/local/Ascend/ascend-toolkit/latest", arch, "ascend_toolkit_install.info")
    )
    for path in candidates:
        if path.is_file():
            return parse_cann_info(path.read_text(errors="replace"))
    return None


def _npu(env: dict[str, Any], py: dict[str, Any]) -> str | None:
    code, out = _run(["npu-smi", "info"])
    if code == 127:
        return None if py.get("npu", {}).get("available") else "no NPU: npu-smi is not on PATH"
    if code != 0 or "Error" in out[:500]:
        return f"npu-smi info failed (exit {code}): {out[:300]}"
    info = parse_npu_smi(out)
    chips = info["chips"]
    env.update(driver=info["driver"], cann=cann_version(), devices=chips)
    env["device_model"] = chips[0]["name"] if chips else None
    env["device_count"] = py.get("npu", {}).get("count") or len(chips)
    bad = [c for c in chips if c["health"] not in HEALTHY]
    if bad:
        return "; ".join(f"NPU {c['npu']} health is {c['health']}" for c in bad)
    return None


def _cuda(env: dict[str, Any], py: dict[str, Any]) -> str | None:
    code, out = _run(
        [
            "nvidia-smi",
            "--query-gpu=index,name,driver_version,memory.total,memory.used",
            "--format=csv,noheader,nounits",
        ]
    )
    if code != 0:
        return f"nvidia-smi failed (exit {code}): {out[:300]}"
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 5 and parts[0].isdigit():
            gpus.append(
                {
                    "index": int(parts[0]),
                    "name": parts[1],
                    "driver": parts[2],
                    "memory_total_mb": parts[3],
                    "memory_used_mb": parts[4],
                }
            )
    env.update(
        device_model=gpus[0]["name"] if gpus else None,
        device_count=py.get("cuda", {}).get("count") or len(gpus),
        driver=gpus[0]["driver"] if gpus else None,
        cann=None,
        devices=gpus,
    )
    env["cuda_toolkit"] = py.get("cuda", {}).get("toolkit")
    if py.get("torch") and not py.get("cuda", {}).get("available"):
        why = py.get("cuda", {}).get("error", "is_available() is False")
        return f"torch in the suite's interpreter sees no CUDA device ({why})"
    return None


def detect_kind(runner: RunnerConfig, py: dict[str, Any]) -> str:
    if runner.device != "auto":
        return runner.device
    if shutil.which("npu-smi") or py.get("npu", {}).get("available"):
        return "npu"
    if shutil.which("nvidia-smi") or py.get("cuda", {}).get("available"):
        return "cuda"
    return "cpu"


def probe(suite: SuiteConfig, runner: RunnerConfig) -> Probe:
    code, out = _run([suite.python, "-c", SCRIPT, suite.package or "", runner.device], timeout=300)
    if code != 0:
        return Probe(
            {"device_kind": runner.device},
            problem=f"the suite's interpreter {suite.python!r} failed: {out[-500:]}",
        )
    py = json.loads(out.splitlines()[-1])
    kind = detect_kind(runner, py)
    env: dict[str, Any] = {"device_kind": kind, "device_count": 0, "hostname": platform.node()}
    env.update({k: py.get(k) for k in ("python", "torch", "torch_npu", "triton", "suite_package")})
    env["pytest"] = py.get("pytest")
    problem = {"npu": _npu, "cuda": _cuda}.get(kind, lambda *_: None)(env, py)
    if kind == "cpu":
        env["device_model"] = f"CPU only ({platform.machine()}, {os.cpu_count()} cores)"
    if not py.get("pytest_reportlog") and not problem:
        problem = (
            f"pytest-reportlog is not installed in the suite's interpreter ({suite.python}): "
            "pip install pytest-reportlog"
        )
    env["pytest_timeout"] = py.get("pytest_timeout")
    found = list(range(env["device_count"])) if kind != "cpu" else []
    devices = found if runner.devices is None else runner.devices
    missing = sorted(set(devices) - set(found)) if kind != "cpu" else []
    if missing and not problem:
        problem = f"configured devices {missing} not found ({len(found)} {kind} device(s) present)"
    if kind != "cpu" and not devices and not problem:
        problem = f"no {kind} device found"
    if kind != "cpu":  # the devices the run uses: a night on 1 of 2 GPUs is not a 2-GPU night
        env["device_count"], env["devices_present"] = len(devices), len(found)
    busy = [c["npu"] for c in env.get("devices", []) if c.get("busy")]
    if busy and not problem:
        problem = f"device busy: NPU {busy} runs another process"
    return Probe(env, devices=devices, problem=problem)
