"""The live path in a real kernel: the figure displays as a widget, moving a slider redraws."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.book

SETUP = """
import numpy as np
from flowlaws.book.interactive import compute_grid, interactive_figure, Knob, SliderPoint
from flowlaws.book.progress import track

def point(lr, runs):
    for _ in track(range(3), desc="steps", enabled=False):
        pass
    x = np.linspace(0, 1, 4)
    caption = f"lr = {lr:g}, runs = {runs}"
    return SliderPoint(x=x, curves={"error": lr * runs * (1 + x)}, caption=caption)

knobs = [Knob("lr", [0.01, 0.02, 0.04], default=0.02, log=True),
         Knob("runs", [4, 8], default=8, integer=True)]
grid = compute_grid(point, knobs, progress=False)
figure = interactive_figure(grid, compute=point)
figure
"""
MOVE_ON_GRID = (
    "figure.live.sliders[0].value = 0.04\nfigure.live.sliders[1].value = 4.0\n"
    "print(figure.live.caption.value)"
)
MOVE_OFF_GRID = (  # to a value between 0.02 and 0.04 that the menu offers, by its index
    "menu = figure.live.menus[0]\nmenu.index = [v for _, v in menu.options].index(0.028)\n"
    "figure.live.wait()\nprint(menu.label, figure.live.caption.value)"
)


def test_widget_moves_in_a_kernel():
    cells = [nbformat.v4.new_code_cell(src) for src in (SETUP, MOVE_ON_GRID, MOVE_OFF_GRID)]
    notebook = nbformat.v4.new_notebook(cells=cells)
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    shown = notebook.cells[0].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in shown and "text/html" in shown
    assert "image/png" in shown, "the picture a notebook saved by `make lab` keeps"
    assert notebook.cells[0].outputs[0]["metadata"].get("flowlaws_figure") is True
    assert "lr = 0.04, runs = 4" in notebook.cells[1].outputs[0]["text"]
    off_grid = notebook.cells[2].outputs[0]["text"]
    assert off_grid.startswith("0.028 ") and "lr = 0.028, runs = 4" in off_grid, "not computed"
