"""The smoke-parameter checks refuse bad overrides before any notebook runs."""

from __future__ import annotations

import nbformat
import pytest
from _harness import SmokeParameterError, check_overrides, parameters_cell, toc_files

DEFAULTS = {"width": 3, "lr": 0.1, "lrs": [0.1, 0.2], "device": None, "verbose": True, "name": "a"}


def test_good_overrides_pass():
    check_overrides("nb", DEFAULTS, {"width": 5, "lr": 1, "lrs": [0.3], "device": "cpu"})


@pytest.mark.parametrize(
    "overrides, key",
    [({"widht": 3}, "widht"), ({"width": 2.5}, "width"), ({"width": True}, "width"),
     ({"lr": "0.1"}, "lr"), ({"lrs": ["a"]}, "lrs"), ({"verbose": 1}, "verbose"),
     ({"name": 3}, "name")],
)
def test_bad_overrides_are_refused_naming_notebook_and_key(overrides, key):
    with pytest.raises(SmokeParameterError, match=rf"^some/nb\.ipynb: smoke parameter '{key}'"):
        check_overrides("some/nb.ipynb", DEFAULTS, overrides)


def test_a_wrong_element_type_names_the_key_and_the_element():
    # issue 16: this read "has type list, ... has type list"
    with pytest.raises(SmokeParameterError, match=r"^nb: smoke parameter 'lrs': element \[1\] = "
                       r"'a' has type str, the elements of the notebook's default \(first: 0\.1\)"
                       r" have type float"):
        check_overrides("nb", DEFAULTS, {"lrs": [0.3, "a"]})
    nested = {"sizes": [[3, 2]]}
    with pytest.raises(SmokeParameterError, match=r"'sizes': element \[0\]\[1\] = 2\.5"):
        check_overrides("nb", nested, {"sizes": [[3, 2.5]]})


@pytest.mark.parametrize(
    "source, line, what",
    [("width = 4\nn = 2 * width\n", 2, "an expression, not a literal: 'n = 2 \\* width'"),
     ("width = 4\n%time x = 1\n", 2, "not plain Python"),
     ("!ls\n", 1, "not plain Python"),
     ("width = 4\nprint(width)\n", 2, "'print\\(width\\)', is not an assignment")],
)
def test_a_parameters_cell_with_an_expression_or_a_magic_names_notebook_and_line(
        source, line, what):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(source, metadata={"tags": ["parameters"]})])
    with pytest.raises(SmokeParameterError,
                       match=rf"^book/x\.ipynb: line {line} of the parameters cell.*{what}"):
        parameters_cell(nb, "book/x.ipynb")


def test_parameters_cell_is_read_from_the_tagged_cell():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("width = 4  # units\nlrs = [0.1]\n",
                                  metadata={"tags": ["parameters"]}),
    ])
    assert parameters_cell(nb) == {"width": 4, "lrs": [0.1]}


def test_a_notebook_without_parameters_cell_is_refused():
    with pytest.raises(SmokeParameterError, match="one cell tagged 'parameters'"):
        parameters_cell(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), "nb")


def test_toc_files_walks_parts_chapters_and_sections():
    toc = {"root": "intro", "parts": [{"chapters": [{"file": "a", "sections": [{"file": "b"}]}]}]}
    assert toc_files(toc) == ["intro", "a", "b"]
