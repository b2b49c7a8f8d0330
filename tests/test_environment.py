"""The pins live in one list (requirements/pins.txt); environment.yml must say the same."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _requirements(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)==(\S+)", line).groups()
            pins[name.lower()] = version
    return pins


def test_every_requirement_is_pinned_exactly():
    for line in (ROOT / "requirements" / "pins.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        assert not line or "==" in line, f"not pinned with ==: {line}"


def test_environment_yml_matches_the_pins():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    from_env = {}
    for entry in pip_section:
        name, version = entry.split("==")
        from_env[name.lower()] = version
    assert from_env == _requirements(ROOT / "requirements" / "pins.txt")


def test_torch_is_the_local_cpu_wheel_version():
    assert _requirements(ROOT / "requirements" / "pins.txt")["torch"] == "2.13.0"


def test_python_version_agrees():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
