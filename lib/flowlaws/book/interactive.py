"""One figure, two views: live ipywidgets sliders in a kernel, Vega-Lite sliders in the book.

:func:`interactive_figure` is the one call a chapter makes. Its result displays as a live
widget in JupyterLab and Colab (:mod:`flowlaws.book.live`) and as a Vega-Lite chart in the
static HTML book (:mod:`flowlaws.book.vega`). Both views draw the same numbers from the same
grid (:mod:`flowlaws.book.sliders`), so they cannot disagree. The book's build keeps the HTML
view (``nb_mime_priority_overrides`` in ``_config.yml``), and executes its notebooks as a
static build (:func:`flowlaws.book.progress.static_build`), where no live widget is made. In a
kernel the output also holds the figure as first drawn, an ``image/png``: a notebook saved by
``make lab`` keeps only that picture, so it shows the figure when reopened without a kernel
(:mod:`flowlaws.book.saved_outputs`).

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import base64
from collections.abc import Callable

from flowlaws.book.live import LiveFigure
from flowlaws.book.progress import static_build
from flowlaws.book.saved_outputs import FIGURE_KEY, WIDGET_VIEW
from flowlaws.book.sliders import Knob, SliderGrid, SliderPoint, compute_grid
from flowlaws.book.vega import static_html

# Knob, SliderPoint, SliderGrid and compute_grid are re-exported: a chapter imports one module.
__all__ = [
    "Knob",
    "SliderPoint",
    "SliderGrid",
    "compute_grid",
    "InteractiveFigure",
    "interactive_figure",
]


class InteractiveFigure:
    """Displays as the live widget where a front end can show one, else as the static chart."""

    def __init__(self, grid: SliderGrid, compute: Callable[..., SliderPoint] | None = None):
        self.grid = grid
        self.html = static_html(grid)
        # A static build's page shows the chart, never the widget: no widget is made there.
        self.live = LiveFigure(grid, compute) if _in_kernel() and not static_build() else None

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        """The chart for the book, and in a kernel the widget and its picture as drawn now.

        Front ends pick the widget, the book picks the HTML; the ``image/png`` is what a
        notebook saved by ``make lab`` keeps (:mod:`flowlaws.book.saved_outputs`).
        """
        bundle = {"text/html": self.html, "text/plain": f"<interactive figure: {self.grid.title}>"}
        if self.live is None:
            return bundle, {}
        bundle[WIDGET_VIEW] = self.live.widget._repr_mimebundle_()[WIDGET_VIEW]
        bundle["image/png"] = base64.b64encode(self.live.image.value).decode("ascii")
        return bundle, {FIGURE_KEY: True}


def interactive_figure(
    grid: SliderGrid, compute: Callable[..., SliderPoint] | None = None
) -> InteractiveFigure:
    """The chapter's one-line figure: live in a kernel, a static chart in the HTML book.

    ``compute`` takes the knobs' values as keyword arguments; without it the live sliders
    move over the grid only.
    """
    return InteractiveFigure(grid, compute)


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
