"""Run by the suite's own interpreter (`python -c`): what that environment has, as one JSON line.
Standard library only: this environment is the suite's, not the tracker's."""

import importlib.metadata as md
import json
import platform
import sys


def version(*names):
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return None


out = {
    "python": platform.python_version(),
    "executable": sys.executable,
    "torch": version("torch"),
    "torch_npu": version("torch-npu", "torch_npu"),
    "triton": None,
    "pytest": version("pytest"),
    "pytest_reportlog": version("pytest-reportlog"),
    "pytest_timeout": version("pytest-timeout"),
    "suite_package": None,
}
ascend = version("triton-ascend")  # installs as triton-ascend, imports as triton
out["triton"] = f"triton-ascend {ascend}" if ascend else version("triton")
if len(sys.argv) > 1 and sys.argv[1]:
    out["suite_package"] = f"{sys.argv[1]} {version(sys.argv[1]) or '(not installed)'}"
want_devices = len(sys.argv) > 2 and sys.argv[2] != "cpu"
if want_devices and out["torch"]:
    try:
        import torch

        out["cuda"] = {
            "available": torch.cuda.is_available(),
            "count": torch.cuda.device_count(),
            "names": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
            "toolkit": torch.version.cuda,
        }
    except Exception as exc:  # a broken torch is a finding, not a crash of the probe
        out["cuda"] = {"available": False, "count": 0, "error": repr(exc)[:500]}
    if out["torch_npu"]:
        try:
            import torch
            import torch_npu

            out["npu"] = {
                "available": bool(torch_npu.npu.is_available()),
                "count": int(torch.npu.device_count()),
            }
        except Exception as exc:
            out["npu"] = {"available": False, "count": 0, "error": repr(exc)[:500]}
print(json.dumps(out))
