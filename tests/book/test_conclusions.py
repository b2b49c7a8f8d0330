"""A chapter's conclusions state no number that was not pasted from its own run.

A markdown cell tagged ``conclusions`` (a chapter's reading of its results, its summary) may
state a computed number only through a paste, ``{glue:text}`key:s```, of a value the same
notebook glues (``record_value``/``record_claim``). Every other number in it (outside roles
such as ``{doc}`` or ``{numref}``, whose targets may hold digits) must be declared in the cell's
metadata ``typed_numbers``, a mapping from the number as written to why it is typed (the seed's
claim, a rule's threshold declared before the run, a definition): so the prose cannot go stale
when a rerun changes a result. At smoke size every pasted key is glued by the executed chapter.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from _harness import ROOT, toc_notebooks
from test_ledger import _smoke_glue, glued_in_source

# the chapters whose conclusions issue 24 asked to paste (others may tag theirs too)
MUST_HAVE_CONCLUSIONS = [
    "book/02_percolation/05_dsi.ipynb",
    "book/02_percolation/06_adaptive.ipynb",
    "book/02_percolation/07_grokking.ipynb",
    "book/02_percolation/08_real_data.ipynb",
]
TAG = "conclusions"
PASTE = re.compile(r"\{glue:text\}`([^`:]+)(?::[^`]*)?`")
ROLE = re.compile(r"\{[a-z:-]+\}`[^`]*`")  # {doc}`05_dsi`, {numref}`fig-1`, {cite}`a2000`
LABEL = re.compile(r"^\(([^)]*)\)=$|:label: \S+", re.M)
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def conclusion_cells(path: str) -> list[nbformat.NotebookNode]:
    return [c for c in nbformat.read(ROOT / path, 4).cells
            if c.cell_type == "markdown" and TAG in c.metadata.get("tags", [])]


def typed_numbers(text: str) -> list[str]:
    """The numbers of a markdown text outside pastes, roles and labels."""
    return NUMBER.findall(LABEL.sub(" ", ROLE.sub(" ", text)))


def test_typed_numbers_finds_digits_outside_pastes_and_roles():
    text = ("λ = {glue:text}`lam:s` ({doc}`05_dsi`, {numref}`fig-2`), p = 0.63 at 1,000 "
            "surrogates\n(sec-3)=\n")
    assert typed_numbers(text) == ["0.63", "1,000"]


@pytest.mark.parametrize("path", MUST_HAVE_CONCLUSIONS)
def test_the_chapter_tags_its_conclusions(path):
    assert conclusion_cells(path), f"{path}: tag the cells that state its conclusions {TAG!r}"


@pytest.mark.parametrize("path", toc_notebooks())
def test_conclusions_paste_every_number_they_state(path):
    glued = glued_in_source(path)
    for cell in conclusion_cells(path):
        allowed = cell.metadata.get("typed_numbers", {})
        assert isinstance(allowed, dict) and all(
            isinstance(v, str) and v.strip() for v in allowed.values()), (
            f"{path} cell {cell.id}: typed_numbers maps each typed number to why it is typed")
        stray = sorted(set(typed_numbers(cell.source)) - set(allowed))
        assert not stray, (
            f"{path} cell {cell.id}: these numbers are typed, not pasted: {stray}; paste them "
            "with {glue:text}`key:s` (record_value), or declare why they are typed")
        unused = sorted(set(allowed) - set(typed_numbers(cell.source)))
        assert not unused, f"{path} cell {cell.id}: typed_numbers declares unused {unused}"
        missing = sorted({k for k in PASTE.findall(cell.source)} - glued)
        assert not missing, f"{path} cell {cell.id}: pastes keys never glued there: {missing}"


@pytest.mark.book
def test_every_key_the_conclusions_paste_is_glued_at_smoke_size(smoke_runs):
    glue = _smoke_glue(smoke_runs)
    for path in toc_notebooks():
        keys = {k for c in conclusion_cells(path) for k in PASTE.findall(c.source)}
        missing = sorted(keys - set(glue[path]))
        assert not missing, f"{path}: its conclusions paste keys not glued when run: {missing}"
