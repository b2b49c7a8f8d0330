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
