"""The deployment files: the compose file is valid Compose (checked by the compose-spec
validator after the variable interpolation Compose itself does), mounts what an Ascend container
needs, and its healthcheck command really passes against a running tracker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import compose_spec
import pytest
import yaml
from helpers import live_server, settings_for

from tracker.config import load_settings
from tracker.web.app import create_app

ROOT = Path(__file__).parent.parent
ASCEND_DEVICES = {"/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}
ASCEND_MOUNTS = {"/usr/local/dcmi", "/usr/local/bin/npu-smi", "/usr/local/Ascend/driver"}


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}` (an unset required one fails)."""

    def one(m: re.Match) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        if env.get(name):
            return env[name]
        if op == ":?":
            raise ValueError(f"required variable {name} is missing: {arg}")
        return arg or ""

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, text)


@pytest.fixture(scope="module")
def compose() -> dict:
    text = interpolate((ROOT / "docker-compose.yml").read_text(), {"TRACKER_TOKEN": "x" * 20})
    compose_spec.PyCompose.from_yaml(text).validate()  # raises on anything Compose would refuse
    return yaml.safe_load(text)


def test_required_token(compose):
    with pytest.raises(ValueError, match="TRACKER_TOKEN"):
        interpolate((ROOT / "docker-compose.yml").read_text(), {})


def test_ascend_service(compose):
    svc = compose["services"]["tracker"]
    assert svc["profiles"] == ["npu"] and svc["build"]["target"] == "npu"
    assert svc["ipc"] == "host" and svc["restart"] == "unless-stopped"
    assert {d.split(":")[0] for d in svc["devices"]} == ASCEND_DEVICES
    mounts = {v.split(":")[1]: v for v in svc["volumes"]}
    assert set(mounts) >= ASCEND_MOUNTS
    assert all(mounts[m].endswith(":ro") for m in ASCEND_MOUNTS)
    assert "/var/lib/tracker" in mounts and "/etc/tracker/tracker.toml" in mounts
    assert "/healthz" in " ".join(svc["healthcheck"]["test"])


def test_cpu_demo_profile(compose):
    svc = compose["services"]["tracker-cpu"]
    assert svc["profiles"] == ["cpu"] and svc["build"]["target"] == "cpu"
    assert "devices" not in svc


def test_named_volumes_are_declared(compose):
    used = {
        v.split(":")[0]
        for s in compose["services"].values()
        for v in s.get("volumes", [])
        if not v.startswith(("/", "."))
    }
    assert used <= set(compose["volumes"])


def test_dockerfile_targets_and_pins():
    text = (ROOT / "Dockerfile").read_text()
    assert {"cpu", "npu"} <= set(re.findall(r"^FROM \S+ AS (\w+)", text, re.M))
    pyproject = (ROOT / "pyproject.toml").read_text()
    for name, arg in (
        ("torch", "TORCH_VERSION"),
        ("torch-npu", "TORCH_NPU_VERSION"),
        ("triton-ascend", "TRITON_ASCEND_VERSION"),
    ):
        pinned = re.search(rf'"{name}==([\d.]+)"', pyproject).group(1)
        assert f"ARG {arg}={pinned}" in text


def test_deploy_config_is_valid():
    settings = load_settings(ROOT / "deploy" / "tracker.toml")
    assert settings.suites[0].schedule == "0 22 * * *"
    assert settings.scheduler.retention_days == 180


def test_healthcheck_command_passes_against_a_real_server(compose, tmp_path):
    app = create_app(settings_for(tmp_path))
    with live_server(app) as url:
        port = url.rsplit(":", 1)[1]
        cmd = compose["services"]["tracker"]["healthcheck"]["test"][1:]  # drop "CMD"
        cmd = [sys.executable if c == "python3" else c.replace("8000", port) for c in cmd]
        assert subprocess.run(cmd, timeout=30).returncode == 0


def test_postgres_profile_and_the_cann_pin(compose):
    pg = compose["services"]["postgres"]
    assert pg["profiles"] == ["postgres"] and pg["image"].startswith("postgres:")
    assert "ports" not in pg  # reached on the compose network only
    assert "pg_isready" in pg["healthcheck"]["test"]
    assert "postgres-data" in compose["volumes"]
    # the tracker waits for the database when the profile is on, and starts without it when not
    wait = compose["services"]["tracker"]["depends_on"]["postgres"]
    assert wait == {"condition": "service_healthy", "required": False}
    # Liger pins NPU at CANN 9.1.0 (with torch 2.9.0, torch_npu 2.9.0, triton-ascend 3.2.2)
    cann = compose["services"]["tracker"]["build"]["args"]["CANN_IMAGE"]
    assert cann.startswith("ascendai/cann:9.1.0-")
    assert "ARG CANN_IMAGE=ascendai/cann:9.1.0-" in (ROOT / "Dockerfile").read_text()
