"""ruff is clean on the library, tests, benchmarks, tools and notebooks (config: pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "lib", "tests", "bench", "tools", "book",
                             "jupyter_server_config.py"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_notebooks_are_formatted_to_fit_the_column():
    """Chapters' code is `ruff format`-ed at the project's line length (CONTRIBUTING.md)."""
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "format", "--check", "book"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, "run `ruff format book`:\n" + result.stdout + result.stderr
