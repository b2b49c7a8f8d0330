"""Tests of flowlaws.book.saved_outputs: what a notebook saved by `make lab` keeps."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from pathlib import Path

import nbformat
import numpy as np
import pytest
from jupyter_server.services.contents.filemanager import FileContentsManager
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from traitlets.config.loader import PyFileConfigLoader

from flowlaws.book import interactive
from flowlaws.book.interactive import Knob, SliderPoint, compute_grid
from flowlaws.book.saved_outputs import (
    FIGURE_KEY,
    WIDGET_VIEW,
    for_reopening,
    pre_save_hook,
)

ROOT = Path(__file__).resolve().parents[3]
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n...").decode()
CHART = '<div data-flowlaws-chart="vega"></div><script>vegaEmbed()</script>'


def view(model_id: str) -> dict:
    return {"version_major": 2, "version_minor": 0, "model_id": model_id}


def display(data: dict, metadata: dict | None = None) -> dict:
    return nbformat.v4.new_output("display_data", data=data, metadata=metadata or {})


def notebook(*outputs: dict, state: dict | None = None) -> dict:
    cell = nbformat.v4.new_code_cell("figure", outputs=list(outputs), execution_count=1)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# x"), cell])
    if state is not None:
        nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
            "version_major": 2, "version_minor": 0, "state": state}}
    return json.loads(json.dumps(nb))  # a plain dict, as the server receives it


FIGURE = display({WIDGET_VIEW: view("fig"), "text/html": CHART, "image/png": PNG,
                  "text/plain": "<interactive figure: Drift>"}, {FIGURE_KEY: True})
BAR = display({WIDGET_VIEW: view("bar"), "text/plain": "slider grid:   0%|          | 0/8"})
TABLE = display({"text/html": "<table></table>", "text/plain": "a table"})


def test_a_slider_figure_keeps_its_picture_and_nothing_that_needs_a_kernel_or_vega():
    nb = notebook(FIGURE)
    saved = for_reopening(nb)
    (output,) = saved["cells"][1]["outputs"]
    assert output["data"] == {"image/png": PNG, "text/plain": "<interactive figure: Drift>"}
    assert nb["cells"][1]["outputs"][0]["data"][WIDGET_VIEW], "the open notebook is not changed"
    nbformat.validate(nbformat.from_dict(saved))


def test_other_widgets_are_left_out_unless_they_have_a_static_view():
    html_figure = display({WIDGET_VIEW: view("x"), "text/html": CHART})  # no picture: keep HTML
    saved = for_reopening(notebook(BAR, TABLE, display({WIDGET_VIEW: view("lone")}), html_figure))
    assert [o["data"] for o in saved["cells"][1]["outputs"]] == [TABLE["data"],
                                                                 {"text/html": CHART}]


def test_a_widget_whose_state_was_saved_is_left_for_the_front_end_to_draw():
    nb = notebook(FIGURE, BAR, state={"fig": {"model_name": "VBoxModel", "state": {}}})
    outputs = for_reopening(nb)["cells"][1]["outputs"]
    assert len(outputs) == 1, "the bar's model was not saved"
    assert WIDGET_VIEW in outputs[0]["data"] and "text/html" in outputs[0]["data"]


def test_the_hook_changes_notebooks_only():
    text = {"type": "file", "format": "text", "content": "x"}
    before = copy.deepcopy(text)
    pre_save_hook(text, path="a.txt")
    assert text == before
    model = {"type": "notebook", "content": notebook(FIGURE)}
    pre_save_hook(model, path="a.ipynb")
    assert WIDGET_VIEW not in model["content"]["cells"][1]["outputs"][0]["data"]


@pytest.mark.parametrize("jupytext", [False, True])
def test_the_repository_config_makes_the_server_save_static_figures(tmp_path, jupytext):
    """The server as `make lab` configures it: jupytext's async manager, as Lab runs it."""
    config = PyFileConfigLoader("jupyter_server_config.py", path=str(ROOT)).load_config()
    model = {"type": "notebook", "content": notebook(FIGURE, BAR, TABLE)}
    if jupytext:
        from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

        manager_class = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)
        manager = manager_class(root_dir=str(tmp_path), config=config)
        asyncio.run(manager.save(model, "chapter.ipynb"))
    else:
        FileContentsManager(root_dir=str(tmp_path), config=config).save(model, "chapter.ipynb")
    outputs = nbformat.read(tmp_path / "chapter.ipynb", 4).cells[1].outputs
    assert [sorted(o.data) for o in outputs] == [["image/png", "text/plain"],
                                                 ["text/html", "text/plain"]]


def test_a_figure_in_a_kernel_carries_its_picture_and_is_marked(monkeypatch):
    monkeypatch.setattr(interactive, "_in_kernel", lambda: True)

    def point(lr):
        return SliderPoint(x=np.arange(3.0), curves={"e": lr * np.arange(1.0, 4.0)},
                           caption=f"lr = {lr:g}")

    grid = compute_grid(point, Knob("lr", (0.01, 0.02), log=True), progress=False)
    data, metadata = interactive.interactive_figure(grid)._repr_mimebundle_()
    assert metadata == {FIGURE_KEY: True}
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG")
    assert {WIDGET_VIEW, "text/html", "text/plain"} <= set(data)
    (saved,) = for_reopening(notebook(display(data, metadata)))["cells"][1]["outputs"]
    assert set(saved["data"]) == {"image/png", "text/plain"}
