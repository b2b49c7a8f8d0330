"""Every notebook in ``_toc.yml`` runs at smoke size, and its checked cells print what they must."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
import yaml
from _harness import ROOT, SmokeParameterError, checked_overrides, smoke_params, toc_notebooks

NOTEBOOKS = toc_notebooks()
EXPECTED_FILE = ROOT / "tests" / "nbval_expected.yaml"
# nbval checks the output of a cell tagged so (a tag, not a comment the reader would see).
CHECK_TAG = "nbval-check-output"


def test_toc_lists_notebooks():
    assert NOTEBOOKS, "_toc.yml names no notebook"


def test_every_toc_notebook_has_a_smoke_entry():
    missing = [p for p in NOTEBOOKS if p not in smoke_params()]
    assert not missing, f"_toc.yml notebooks with no entry in tests/smoke_params.yaml: {missing}"


def test_no_smoke_entry_for_a_notebook_outside_the_toc():
    stale = sorted(set(smoke_params()) - set(NOTEBOOKS))
    assert not stale, f"tests/smoke_params.yaml names notebooks that _toc.yml does not: {stale}"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_smoke_parameters_fit_the_parameters_cell(path):
    checked_overrides(path)  # raises SmokeParameterError naming the notebook and key


@pytest.mark.book
@pytest.mark.parametrize("path", NOTEBOOKS)
def test_notebook_runs_at_smoke_size(path, smoke_runs):
    result = smoke_runs[path]
    if isinstance(result, SmokeParameterError):
        pytest.fail(str(result))
    if isinstance(result, BaseException):
        pytest.fail(f"{path} failed at smoke size:\n{result}")
    executed = nbformat.read(result, 4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors


def _checked_cells(notebook) -> list[str]:
    return [c.id for c in notebook.cells
            if c.cell_type == "code" and CHECK_TAG in c.metadata.get("tags", [])]


def test_no_nbval_comment_is_left_in_a_cell():
    """nbval's marks are cell tags: a ``# NBVAL_...`` comment would be printed in the book."""
    left = [f"{path}#{c.id}" for path in NOTEBOOKS for c in nbformat.read(ROOT / path, 4).cells
            if c.cell_type == "code" and "NBVAL" in c.source]
    assert not left, f"cells with an nbval comment (use the tag {CHECK_TAG!r}): {left}"


def test_checked_cells_and_expected_outputs_agree():
    expected = yaml.safe_load(EXPECTED_FILE.read_text()) or {}
    for path in NOTEBOOKS:
        marked = _checked_cells(nbformat.read(ROOT / path, 4))
        assert sorted(marked) == sorted(expected.get(path, {})), (
            f"{path}: cells tagged {CHECK_TAG!r} {marked} and tests/nbval_expected.yaml "
            f"entries {sorted(expected.get(path, {}))} must name the same cells"
        )


def _prepared_copy(path: str, expected: dict[str, str], out_dir) -> str:
    """The smoke-parameterised notebook with the expected text stored as the checked outputs."""
    import papermill

    target = out_dir / path.replace("/", "__")
    papermill.execute_notebook(str(ROOT / path), str(target), parameters=checked_overrides(path),
                               prepare_only=True, progress_bar=False)
    notebook = nbformat.read(target, 4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.id in expected:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=expected[cell.id])]
            cell.execution_count = 1  # nbval ignores outputs of cells it thinks never ran
    nbformat.write(notebook, target)
    return str(target)


@pytest.mark.book
def test_nbval_checked_outputs(tmp_path):
    """``pytest --nbval-lax``: every cell runs; tagged cells must print the expected text.

    The expected text (tests/nbval_expected.yaml) states what the theory in the chapter says the
    cell prints; it is never pasted from a run. Notebooks are stored without outputs, so the
    expected text is put into a smoke-parameterised copy just before nbval runs it.
    """
    expected = yaml.safe_load(EXPECTED_FILE.read_text()) or {}
    copies = [_prepared_copy(p, expected[p], tmp_path) for p in NOTEBOOKS if expected.get(p)]
    if not copies:
        pytest.skip("no notebook has checked cells yet")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(tmp_path), "-c", "/dev/null", *copies],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
