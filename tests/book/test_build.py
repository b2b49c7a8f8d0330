"""The book builds with warnings as errors, works offline, and a failing cell fails the build."""

from __future__ import annotations

import re
import shutil

import nbformat
import pytest
import yaml
from _harness import ROOT, toc_files
from conftest import build_book

pytestmark = pytest.mark.book
TOC_PAGES = toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))


def test_every_toc_page_is_built(smoke_book):
    missing = [p for p in TOC_PAGES if not (smoke_book / f"{p}.html").exists()]
    assert not missing


def test_no_page_loads_a_script_or_stylesheet_from_the_network(smoke_book):
    remote = re.compile(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"(https?:)?//", re.I)
    offenders = {str(p.relative_to(smoke_book)): remote.findall(p.read_text())
                 for p in smoke_book.rglob("*.html")}
    assert not {p: hits for p, hits in offenders.items() if hits}


def test_math_and_widgets_are_served_from_the_build(smoke_book):
    assert (smoke_book / "_static" / "mathjax" / "tex-chtml.js").exists()
    assert (smoke_book / "_static" / "html-manager" / "embed-amd.js").exists()
    page = (smoke_book / "book" / "01_conservation" / "01_gradient_flow.html").read_text()
    assert "_static/mathjax/tex-chtml.js" in page


def _failing_book(tmp_path):
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / "references.bib", tmp_path / "book" / "references.bib")
    (tmp_path / "_vendor").symlink_to(ROOT / "_vendor", target_is_directory=True)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/broken\n")
    cells = [nbformat.v4.new_markdown_cell("# Broken"), nbformat.v4.new_code_cell("x = 1"),
             nbformat.v4.new_code_cell("raise RuntimeError('planted failure in cell three')")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / "book" / "broken.ipynb")
    return tmp_path


def test_a_failing_cell_fails_the_build_and_names_notebook_and_cell(tmp_path):
    result = build_book(_failing_book(tmp_path), execute="force")
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "broken.ipynb" in log or "book/broken" in log
    assert "planted failure in cell three" in log


def test_every_chapter_offers_its_executed_notebook(smoke_book):
    """The download menu links the notebook with its outputs, copied into the site."""
    chapters = [p for p in TOC_PAGES if (ROOT / f"{p}.ipynb").exists()]
    for page in chapters:
        executed = smoke_book / "_executed" / f"{page}.ipynb"
        assert executed.is_file(), f"{page}: no executed notebook in the site"
        cells = [c for c in nbformat.read(executed, 4).cells if c.cell_type == "code"]
        assert any(c.outputs for c in cells), f"{page}: the offered notebook has no outputs"
        html = (smoke_book / f"{page}.html").read_text()
        assert f'_executed/{page}.ipynb"' in html, f"{page}: the download menu does not link it"
