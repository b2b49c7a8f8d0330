"""The package is laid out like the book: every module on the map, parts that do not cross."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx
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


MAX_MODULES = 14  # modules in one folder: more, and the folder wants rooms


def modules(packages: bool = True) -> list[str]:
    found = pkgutil.walk_packages(flowlaws.__path__, "flowlaws.")
    return [m.name for m in found if not m.name.rsplit(".", 1)[-1].startswith("_")
            and (packages or not m.ispkg)]


def imported_modules(path: Path) -> set[str]:
    """Every flowlaws module ``path`` imports: import statements, and ``import_module`` calls
    with a literal name (a cycle must not hide behind one)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flowlaws."):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("flowlaws.")}
        elif isinstance(node, ast.Call) and literal_import_module(node).startswith("flowlaws."):
            found.add(node.args[0].value)
    return found


def literal_import_module(call: ast.Call) -> str:
    """The literal module name of an ``import_module("...")`` call, or ''."""
    name = getattr(call.func, "attr", getattr(call.func, "id", ""))
    if name == "import_module" and call.args and isinstance(call.args[0], ast.Constant):
        return str(call.args[0].value)
    return ""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def flowlaws_imports(path: Path) -> set[str]:
    return {name.split(".")[1] for name in imported_modules(path)}


def test_every_module_is_on_the_map_in_the_package_docstring():
    doc = flowlaws.__doc__
    leaves = modules(packages=False)
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
    for path in (PACKAGE / subpackage).rglob("*.py"):
        crossing = flowlaws_imports(path) - ALLOWED[subpackage] - {subpackage}
        if crossing:
            bad[str(path.relative_to(PACKAGE))] = sorted(crossing)
    assert not bad, f"flowlaws.{subpackage} imports what it may not: {bad}"


def test_no_module_is_longer_than_the_limit():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"


def test_no_folder_holds_more_modules_than_a_reader_can_scan():
    crowded = {str(d.relative_to(PACKAGE)): n for d in [PACKAGE, *PACKAGE.rglob("*")]
               if d.is_dir() and (n := len([f for f in d.glob("*.py")
                                            if f.name != "__init__.py"])) > MAX_MODULES}
    assert not crowded, f"split these folders into rooms (over {MAX_MODULES} modules): {crowded}"


def import_graph() -> nx.DiGraph:
    names = set(modules())
    graph = nx.DiGraph()
    for path in PACKAGE.rglob("*.py"):
        source = module_name(path)
        graph.add_node(source)
        graph.add_edges_from((source, t) for t in imported_modules(path) & names if t != source)
    return graph


def test_no_import_cycle_even_behind_import_module():
    cycles = [c for c in nx.simple_cycles(import_graph()) if len(c) > 1]
    assert not cycles, f"these modules import each other: {cycles}"


def test_no_private_name_crosses_a_subpackage():
    """``from flowlaws.x.y import _name`` only inside the folder that defines it."""
    crossing = []
    for path in PACKAGE.rglob("*.py"):
        here = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else ""
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flowlaws."):
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private and node.module.rsplit(".", 1)[0] != here:
                    crossing.append(f"{path.relative_to(PACKAGE)}: {node.module}.{private}")
    assert not crossing, f"make these names public or move the code: {crossing}"


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
    target = copy / "percolation" / "cascade" / "variance.py"
    target.write_text(target.read_text() + "\n# an edit deep inside a subpackage\n")
    assert fingerprint() != before
