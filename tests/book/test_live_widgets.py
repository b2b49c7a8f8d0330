"""The live path in a real kernel: the figure displays as a widget, moving it redraws."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.book

SETUP = """
import numpy as np
from flowlaws.interactive import SliderPoint, compute_grid, interactive_figure

def point(lr):
    x = np.linspace(0, 1, 4)
    return SliderPoint(x=x, curves={"error": lr * (1 + x)}, caption=f"lr = {lr:g}")

grid = compute_grid(point, [0.01, 0.02, 0.04], parameter="lr", default=0.02, log_slider=True,
                    progress=False)
figure = interactive_figure(grid, compute=point)
figure
"""
MOVE_ON_GRID = "figure.live.slider.value = 0.04\nprint(figure.live.caption.value)"
MOVE_OFF_GRID = (
    "figure.live.slider.value = 0.03\nfigure.live.wait()\nprint(figure.live.caption.value)"
)


def test_widget_moves_in_a_kernel():
    cells = [nbformat.v4.new_code_cell(src) for src in (SETUP, MOVE_ON_GRID, MOVE_OFF_GRID)]
    notebook = nbformat.v4.new_notebook(cells=cells)
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    shown = notebook.cells[0].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in shown and "text/html" in shown
    assert "lr = 0.04" in notebook.cells[1].outputs[0]["text"]
    assert "lr = 0.03" in notebook.cells[2].outputs[0]["text"], "off-grid value not computed"
