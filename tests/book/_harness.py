"""Run the book's notebooks at smoke size: find them, check the overrides, execute them.

The overrides live in ``tests/smoke_params.yaml`` (notebook path → {parameter: value}). A key
that the notebook's ``parameters`` cell does not define, or a value whose type differs from the
default's, is refused before anything runs (an ``int`` is accepted where the default is a
``float``; a default of ``None`` accepts any value).
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[2]
SMOKE_FILE = ROOT / "tests" / "smoke_params.yaml"


class SmokeParameterError(ValueError):
    """A smoke override that the notebook cannot take."""


def toc_files(toc: dict | list) -> list[str]:
    """Every ``file:`` entry of a Jupyter Book ``_toc.yml`` tree, in reading order."""
    found: list[str] = []
    if isinstance(toc, dict):
        if "root" in toc:
            found.append(toc["root"])
        if "file" in toc:
            found.append(toc["file"])
        for key in ("parts", "chapters", "sections"):
            for entry in toc.get(key, []):
                found += toc_files(entry)
    elif isinstance(toc, list):
        for entry in toc:
            found += toc_files(entry)
    return found


def toc_notebooks(root: Path = ROOT) -> list[str]:
    """Paths (relative to ``root``, with ``.ipynb``) of the notebooks listed in ``_toc.yml``."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    return [f + ".ipynb" for f in toc_files(toc) if (root / (f + ".ipynb")).exists()]


def smoke_params() -> dict[str, dict]:
    """The whole smoke-parameter file, notebook path → overrides."""
    return yaml.safe_load(SMOKE_FILE.read_text()) or {}


def parameters_cell(notebook: nbformat.NotebookNode, name: str = "") -> dict[str, object]:
    """The literal defaults assigned in the notebook's one cell tagged ``parameters``."""
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise SmokeParameterError(
            f"{name}: expected one cell tagged 'parameters', found {len(cells)}"
        )
    source = cells[0].source
    lines = source.splitlines()
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        n = error.lineno or 0
        line = lines[n - 1].strip() if 0 < n <= len(lines) else ""
        raise SmokeParameterError(
            f"{name}: line {n} of the parameters cell is not plain Python (a magic or a shell "
            f"command?): {line!r}; the cell holds assignments of literals only"
        ) from None
    defaults: dict[str, object] = {}
    for node in tree.body:
        text = lines[node.lineno - 1].strip()
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            raise SmokeParameterError(
                f"{name}: line {node.lineno} of the parameters cell, {text!r}, is not an "
                "assignment `name = literal`; papermill and the smoke test read only those"
            )
        try:
            defaults[node.targets[0].id] = ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            raise SmokeParameterError(
                f"{name}: line {node.lineno} of the parameters cell assigns "
                f"{node.targets[0].id!r} an expression, not a literal: {text!r}; compute it "
                "in a later cell"
            ) from None
    return defaults


def _type_problem(default: object, value: object, element: str = "") -> str | None:
    """Why ``value`` cannot replace ``default``, or ``None`` when it can; ``element`` names a
    list element (``"[1]"``)."""
    if default is None:
        return None
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(default, bool) and isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float)
    elif isinstance(default, list | tuple):
        if isinstance(value, list | tuple):
            for i, v in enumerate(value):
                if default and (problem := _type_problem(default[0], v, f"{element}[{i}]")):
                    return problem
            return None
        ok = False
    else:
        ok = type(value) is type(default)
    if ok:
        return None
    if element:
        return (f"element {element} = {value!r} has type {type(value).__name__}, the elements "
                f"of the notebook's default (first: {default!r}) have type "
                f"{type(default).__name__}")
    return (f"{value!r} has type {type(value).__name__}, the notebook's default {default!r} "
            f"has type {type(default).__name__}")


def _type_ok(default: object, value: object) -> bool:
    return _type_problem(default, value) is None


def check_overrides(name: str, defaults: dict[str, object], overrides: dict[str, object]) -> None:
    """Refuse unknown keys and values of the wrong type, naming the notebook and the key (and
    the element of a list)."""
    for key, value in overrides.items():
        if key not in defaults:
            raise SmokeParameterError(
                f"{name}: smoke parameter {key!r} is not defined in the parameters cell "
                f"(defined: {', '.join(sorted(defaults))})"
            )
        if problem := _type_problem(defaults[key], value):
            raise SmokeParameterError(f"{name}: smoke parameter {key!r} = {problem}"
                                      if not problem.startswith("element") else
                                      f"{name}: smoke parameter {key!r}: {problem}")


def checked_overrides(path: str) -> dict[str, object]:
    """The smoke overrides of one TOC notebook, validated against its parameters cell."""
    entries = smoke_params()
    if path not in entries:
        raise SmokeParameterError(f"{path}: no entry in {SMOKE_FILE.relative_to(ROOT)}")
    overrides = entries[path] or {}
    check_overrides(path, parameters_cell(nbformat.read(ROOT / path, 4), path), overrides)
    return overrides


def execute_smoke(
    path: str, out_path: Path, timeout: int = 600, *, notebook: Path | None = None,
    kernel_name: str = "python3", extra: dict | None = None,
) -> Path:
    """Execute one notebook with its checked smoke overrides into ``out_path`` (papermill).

    ``notebook``: a copy of ``path`` to run instead (in ``path``'s folder, with ``path``'s
    overrides); ``kernel_name``: the kernel to run it in; ``extra``: parameters set on top of
    the smoke overrides (``tools/gpu_check.py`` forces ``device``).
    """
    import papermill

    overrides = dict(checked_overrides(path)) | dict(extra or {})
    out_path.parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(
        str(notebook or ROOT / path),
        str(out_path),
        parameters=overrides,
        cwd=str((ROOT / path).parent),
        kernel_name=kernel_name,
        progress_bar=False,
        execution_timeout=timeout,
    )
    return out_path


def install_commands(notebook: nbformat.NotebookNode) -> list[list[str]]:
    """The arguments of every ``%pip install`` line of the notebook's install cell (its first
    code cell), split as a shell would: ``[["--quiet", "flowlaws[charts] @ git+…"], …]``."""
    import shlex

    first = next(c for c in notebook.cells if c.cell_type == "code")
    return [shlex.split(line.strip().removeprefix("%pip install"))
            for line in first.source.splitlines() if line.strip().startswith("%pip install")]


def nodeps_requirements() -> list[str]:
    """The entries of ``requirements/nodeps.txt``: data packages installed with ``--no-deps``."""
    lines = (ROOT / "requirements" / "nodeps.txt").read_text().splitlines()
    return [s for s in (line.split("#")[0].strip() for line in lines) if s]
