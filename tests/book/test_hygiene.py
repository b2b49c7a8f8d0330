"""Notebooks are stored clean and follow the book's outline (CONTRIBUTING.md)."""

from __future__ import annotations

import ast
import re
import tomllib

import nbformat
import pytest
import yaml
from _harness import ROOT, install_commands, nodeps_requirements, toc_notebooks

NOTEBOOKS = toc_notebooks()
ALL_NOTEBOOKS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "book").rglob("*.ipynb")
                       if ".ipynb_checkpoints" not in p.parts)
REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def _code_cells(path: str):
    return [c for c in nbformat.read(ROOT / path, 4).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", ALL_NOTEBOOKS)
def test_stored_without_outputs(path):
    dirty = [c.id for c in _code_cells(path) if c.outputs or c.execution_count is not None]
    assert not dirty, f"{path}: cells with outputs or execution counts: {dirty} (clear them)"


def test_every_notebook_is_in_the_toc():
    assert sorted(NOTEBOOKS) == ALL_NOTEBOOKS, "a notebook under book/ is missing from _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_file_names_follow_reading_order(path):
    assert re.fullmatch(r"book/\d\d_[a-z_]+/\d\d_[a-z0-9_]+\.ipynb", path), path


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_parameters_cell_comes_before_the_rest_of_the_code(path):
    cells = _code_cells(path)
    tagged = [i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path}: needs exactly one cell tagged 'parameters'"
    before = [c.source for c in cells[: tagged[0]]]
    assert all("import flowlaws" in s for s in before), f"{path}: only the install cell first"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_notebook_prints_its_device(path):
    assert any("pick_device(" in c.source for c in _code_cells(path)), f"{path}: no pick_device()"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_colab_link_and_install_cell_point_at_this_repository(path):
    cells = nbformat.read(ROOT / path, 4).cells
    owner_repo = REPOSITORY.removeprefix("https://github.com/")
    colab = f"https://colab.research.google.com/github/{owner_repo}/blob/main/{path}"
    links = re.findall(r"https://colab\.research\.google\.com/[^\s)]+", cells[0].source)
    assert links == [colab], f"{path}: its first cell must link to {colab}, found {links}"
    install = _code_cells(path)[0].source
    assert f"git+{REPOSITORY}" in install and "%pip install" in install, f"{path}: install cell"


INSTALL_EXTRAS = ("charts", "data")  # slider charts; scikit-learn's digits (pyproject.toml)


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_install_cell_installs_what_every_chapter_needs(path):
    """On Colab the install cell is all there is: flowlaws with its extras (charts, data), and
    the data packages of requirements/nodeps.txt without their declared dependencies."""
    commands = install_commands(nbformat.read(ROOT / path, 4))
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    assert set(INSTALL_EXTRAS) <= set(extras), f"pyproject.toml lacks an extra of {INSTALL_EXTRAS}"
    library = f"flowlaws[{','.join(INSTALL_EXTRAS)}] @ git+{REPOSITORY}"
    assert commands == [["--quiet", library], ["--quiet", "--no-deps", *nodeps_requirements()]], (
        f"{path}: the install cell must run, in this order,\n"
        f'  %pip install --quiet "{library}"\n'
        f"  %pip install --quiet --no-deps {' '.join(nodeps_requirements())}\n"
        f"found {commands}"
    )


def test_every_install_cell_is_the_same():
    first = {p: next(c.source for c in _code_cells(p)) for p in NOTEBOOKS}
    assert len(set(first.values())) == 1, "install cells differ; copy one to all chapters"


LONG_CELL_LINES = 25  # a code cell longer than this computes: its work belongs in flowlaws
MAX_LONG_CELLS = 8  # in the whole book: parameters cells and import cells, a few checks


def test_few_code_cells_are_long():
    """The library computes, the notebook teaches (CONTRIBUTING.md): at most MAX_LONG_CELLS
    code cells in the whole book are longer than LONG_CELL_LINES lines."""
    long = [f"{path}#{c.id} ({n} lines)" for path in ALL_NOTEBOOKS for c in _code_cells(path)
            if (n := len(c.source.splitlines())) > LONG_CELL_LINES]
    assert len(long) <= MAX_LONG_CELLS, (
        f"{len(long)} code cells are longer than {LONG_CELL_LINES} lines, at most "
        f"{MAX_LONG_CELLS} may be (move the computation into flowlaws): {long}"
    )


def _calls(source: str, name: str) -> list[ast.Call]:
    """Every call of a function called ``name`` (``name(...)`` or ``module.name(...)``)."""
    code = "\n".join(  # an IPython magic (%pip, !ls) is read as a pass at its indentation
        line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!"))
        else line for line in source.splitlines())
    return [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == name]


@pytest.mark.parametrize("path", ALL_NOTEBOOKS)
def test_no_noise_free_sde_stands_in_for_a_plain_loop(path):
    """SGD or GD without noise is a loop over steps (dynamics.sgd.sgd_discrete,
    dynamics.gd.gd_discrete) that counts steps, never Euler-Maruyama fed ``eta=0``."""
    zero = [c.id for c in _code_cells(path) for call in _calls(c.source, "euler_maruyama")
            for k in call.keywords if k.arg == "eta" and isinstance(k.value, ast.Constant)
            and k.value.value == 0]
    assert not zero, f"{path}: euler_maruyama(..., eta=0) in cells {zero}; use a plain loop"


def test_the_noise_free_sde_check_sees_a_call_spread_over_lines():
    source = "%time\npath = dynamics.sde.euler_maruyama(\n    f, theta0, lr, 10,\n    eta=0.0,\n)"
    assert [k.value.value for call in _calls(source, "euler_maruyama") for k in call.keywords
            if k.arg == "eta"] == [0.0]
