"""Probe parsers on recorded outputs of Ascend runners, and the probe on this (CPU-only) host."""

from __future__ import annotations

import os
import sys

from helpers import DATA

from tracker.config import RunnerConfig, SuiteConfig
from tracker.runner.probe import parse_cann_info, parse_npu_smi, probe


def test_npu_smi_910b4():
    info = parse_npu_smi((DATA / "npu-smi-910b4.txt").read_text())
    assert info["driver"] == "24.1.rc3"
    assert [(c["npu"], c["name"], c["health"], c["busy"]) for c in info["chips"]] == [
        (0, "910B4", "OK", False),
        (3, "910B4", "OK", False),
    ]
    assert info["chips"][0]["hbm_total_mb"] == 32768
    assert info["chips"][1]["bus_id"] == "0000:82:00.0"


def test_npu_smi_busy_and_alarm():
    busy = parse_npu_smi((DATA / "npu-smi-910b4-busy.txt").read_text())
    assert [c["busy"] for c in busy["chips"]] == [True, False]
    alarm = parse_npu_smi((DATA / "npu-smi-910b4-alarm.txt").read_text())
    assert [c["health"] for c in alarm["chips"]] == ["OK", "Alarm"]


def test_npu_smi_a3_two_chips_per_npu():
    info = parse_npu_smi((DATA / "npu-smi-a3.txt").read_text())
    assert info["driver"] == "25.2.0"
    assert [(c["npu"], c["chip"], c["name"]) for c in info["chips"]] == [
        (0, 0, "Ascend910"),
        (0, 1, "Ascend910"),
    ]


def test_cann_version():
    assert parse_cann_info((DATA / "ascend_toolkit_install.info").read_text()) == "8.2.RC1"
    assert parse_cann_info("Version=8.5.0\nsomething=else\n") == "8.5.0"
    assert parse_cann_info("nothing here") is None


def test_probe_on_a_cpu_host(tmp_path):
    suite = SuiteConfig(name="s", path=tmp_path, python=sys.executable, package="pytest")
    found = probe(suite, RunnerConfig(name="ci", device="cpu"))
    assert found.problem is None
    assert found.env["device_kind"] == "cpu"
    assert found.env["device_model"].startswith("CPU only")
    assert found.env["suite_package"].startswith("pytest ")
    assert found.env["python"] == ".".join(map(str, sys.version_info[:3]))


def test_probe_with_a_broken_interpreter(tmp_path):
    suite = SuiteConfig(name="s", path=tmp_path, python=str(tmp_path / "no-python"))
    found = probe(suite, RunnerConfig(name="ci", device="cpu"))
    assert "failed" in found.problem


def test_probe_without_the_npu(tmp_path):
    suite = SuiteConfig(name="s", path=tmp_path, python=sys.executable)
    found = probe(suite, RunnerConfig(name="ci", device="npu"))
    assert found.problem == "no NPU: npu-smi is not on PATH"


def test_a_run_on_some_of_the_devices_counts_those_it_uses(tmp_path, monkeypatch):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    smi = bin_ / "npu-smi"
    smi.write_text(f"#!/bin/sh\ncat {DATA / 'npu-smi-910b4.txt'}\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    suite = SuiteConfig(name="s", path=tmp_path, python=sys.executable)
    found = probe(suite, RunnerConfig(name="ci", device="npu", devices=[1]))
    assert found.problem is None and found.devices == [1]
    assert (found.env["device_count"], found.env["devices_present"]) == (1, 2)
    everything = probe(suite, RunnerConfig(name="ci", device="npu"))
    assert (everything.env["device_count"], everything.env["devices_present"]) == (2, 2)
