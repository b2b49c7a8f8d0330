"""The package is laid out like the book: every module on the map, parts that do not cross."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import flowlaws

PACKAGE = Path(flowlaws.__file__).parent
MAX_LINES = 450
# which subpackages each subpackage may import (besides itself)
ALLOWED = {
    "book": set(),
    "common": {"book"},
    "data": {"book", "common"},
    "conservation": {"book", "common", "data"},
    "percolation": {"book", "common", "data"},
}


def modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(flowlaws.__path__, "flowlaws.")]
    return [n for n in names if not n.rsplit(".", 1)[-1].startswith("_")]


def flowlaws_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flowlaws."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("flowlaws.")}
    return found


def test_every_module_is_on_the_map_in_the_package_docstring():
    doc = flowlaws.__doc__
    leaves = [m for m in modules() if m.count(".") == 2]
    missing = [m for m in leaves if f":mod:`{m}`" not in doc]
    assert not missing, f"add these modules to the map in flowlaws/__init__.py: {missing}"
    stale = [line for line in doc.splitlines() if ":mod:`flowlaws." in line
             and line.split("`")[1] not in leaves]
    assert not stale, f"the map names modules that do not exist: {stale}"


def test_every_module_imports():
    for name in modules():
        importlib.import_module(name)


@pytest.mark.parametrize("subpackage", sorted(ALLOWED))
def test_subpackages_import_only_what_they_may(subpackage):
    """book imports nothing scientific; Part II never imports Part I; common imports no part."""
    bad = {}
    for path in (PACKAGE / subpackage).glob("*.py"):
        crossing = flowlaws_imports(path) - ALLOWED[subpackage] - {subpackage}
        if crossing:
            bad[path.name] = sorted(crossing)
    assert not bad, f"flowlaws.{subpackage} imports what it may not: {bad}"


def test_no_module_is_longer_than_the_limit():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"


def test_tests_mirror_the_package():
    tests = Path(__file__).parent
    for sub in ALLOWED:
        assert (tests / sub).is_dir(), f"tests/unit/{sub}/ is missing"


def test_an_edit_inside_a_subpackage_changes_the_library_fingerprint(tmp_path):
    """The fingerprint (cache keys, make book's re-execution) reads subpackages too."""
    copy = tmp_path / "flowlaws"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    code = "from flowlaws.book.cache import library_fingerprint; print(library_fingerprint())"

    def fingerprint() -> str:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env={"PYTHONPATH": str(tmp_path)}).stdout.strip()

    before = fingerprint()
    target = copy / "percolation" / "dsi.py"
    target.write_text(target.read_text() + "\n# an edit deep inside a subpackage\n")
    assert fingerprint() != before
