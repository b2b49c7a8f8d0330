"""Tests of flowlaws.book.sphinxext: the executed notebook in the download menu."""

from __future__ import annotations

from types import SimpleNamespace

import nbformat

from flowlaws.book.sphinxext import EXECUTED_FOLDER, offer_executed_notebook


def _theme_menu() -> list[dict]:
    """The header buttons sphinx-book-theme builds for a page whose source is a notebook."""
    buttons = [{"type": "link", "url": "../_sources/book/ch.ipynb", "text": ".ipynb",
                "label": "download-source-button"},
               {"type": "javascript", "text": ".pdf", "label": "download-pdf-button"}]
    return [{"type": "group", "label": "download-buttons", "buttons": buttons}]


def _app(tmp_path):
    config = SimpleNamespace(output_folder=str(tmp_path / "jupyter_execute"))
    return SimpleNamespace(outdir=str(tmp_path / "html"), env=SimpleNamespace(mystnb_config=config))


def test_the_executed_notebook_is_copied_and_offered(tmp_path):
    executed = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "print(1)", outputs=[nbformat.v4.new_output("stream", text="1\n")])])
    (tmp_path / "jupyter_execute" / "book").mkdir(parents=True)
    nbformat.write(executed, tmp_path / "jupyter_execute" / "book" / "ch.ipynb")
    context = {"header_buttons": _theme_menu(), "pathto": lambda name, resource: f"../{name}"}
    offer_executed_notebook(_app(tmp_path), "book/ch", "page.html", context, None)
    copied = nbformat.read(tmp_path / "html" / EXECUTED_FOLDER / "book" / "ch.ipynb", 4)
    assert copied.cells[0].outputs[0].text == "1\n", "the download keeps the outputs"
    source, offered, pdf = context["header_buttons"][0]["buttons"]
    assert offered["url"] == f"../{EXECUTED_FOLDER}/book/ch.ipynb"
    assert offered["text"] == ".ipynb with outputs" and source["text"] == ".ipynb without outputs"
    assert pdf["text"] == ".pdf"


def test_a_page_without_an_executed_notebook_is_left_alone(tmp_path):
    context = {"header_buttons": _theme_menu(), "pathto": lambda name, resource: name}
    offer_executed_notebook(_app(tmp_path), "book/intro", "page.html", context, None)
    assert context["header_buttons"] == _theme_menu()
    assert not (tmp_path / "html").exists()
