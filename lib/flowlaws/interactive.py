"""One figure, two views: a live ipywidgets slider in a kernel, a Vega-Lite slider in the book.

A chapter computes a :class:`SliderGrid` (curves, marked points and a caption for each slider
value) and calls :func:`interactive_figure` once. The result displays as

- a live widget (slider, status line, figure, caption) in JupyterLab and Colab: moving the
  slider redraws from the grid, or computes the new point (cached) when ``compute`` is given;
- a Vega-Lite chart with a bound range slider in the static HTML book: the browser filters the
  precomputed grid, so dragging or pressing the arrow keys changes the curve, the marks and the
  caption with no kernel. The page loads the vendored Vega bundle once (``flowlaws.sphinxext``).

Both views draw the same numbers from the same grid, so they cannot disagree. The book's build
keeps the HTML view (``nb_mime_priority_overrides`` in ``_config.yml``).

Explained in: book/02_percolation/05_dsi.ipynb.
"""

from __future__ import annotations

import html
import io
import json
import textwrap
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from flowlaws.sphinxext import chart_marker


@dataclass
class SliderPoint:
    """What the figure shows at one slider value.

    Attributes:
        x: ``(P,)`` abscissae shared by the curves.
        curves: label → ``(P,)`` ordinates.
        marks: ``(K, 2)`` points ``(x, y)`` to mark (detected peaks, say); may be empty.
        caption: one line printed with the figure (``"λ = 2.1 ± 0.3"``).
    """

    x: np.ndarray
    curves: dict[str, np.ndarray]
    marks: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    caption: str = ""


@dataclass
class SliderGrid:
    """Precomputed :class:`SliderPoint` s over increasing slider ``values``."""

    parameter: str
    values: np.ndarray
    points: list[SliderPoint]
    default: float
    x_label: str = "x"
    y_label: str = "y"
    log_x: bool = False
    log_y: bool = False
    log_slider: bool = False
    title: str = ""

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=float)
        if len(self.values) != len(self.points) or len(self.values) < 2:
            raise ValueError("values and points need the same length, at least 2")
        if np.any(np.diff(self.values) <= 0):
            raise ValueError("slider values must increase")
        if self.log_slider and np.any(self.values <= 0):
            raise ValueError("log_slider needs positive slider values")
        self.default_index = self.index_of(self.default)

    def index_of(self, value: float) -> int:
        """Index of the grid value nearest to ``value`` (in log space for a log slider)."""
        axis = np.log10(self.values) if self.log_slider else self.values
        target = np.log10(value) if self.log_slider else value
        return int(np.argmin(np.abs(axis - target)))

    def slider_positions(self) -> np.ndarray:
        """``(S,)`` positions of the static slider, equally spaced by :meth:`slider_step`.

        A grid evenly spaced in ``values`` (or in ``log10(values)`` for a log slider) moves
        over those numbers, rounded to 6 significant digits so that the browser's range input
        can land on every one of them; any other grid moves over the grid index ``0 … S−1``.
        """
        axis = np.log10(self.values) if self.log_slider else self.values
        if not self._evenly_spaced(axis):
            return np.arange(len(axis), dtype=float)
        return np.round(axis[0] + self.slider_step() * np.arange(len(axis)), 9)

    def slider_step(self) -> float:
        """The spacing of :meth:`slider_positions`."""
        axis = np.log10(self.values) if self.log_slider else self.values
        if not self._evenly_spaced(axis):
            return 1.0
        return float(f"{np.diff(axis).mean():.6g}")

    def slider_label(self) -> str:
        """What the static slider is labelled with: the parameter, its log, or a grid index."""
        axis = np.log10(self.values) if self.log_slider else self.values
        if not self._evenly_spaced(axis):
            return f"{self.parameter} (grid point) "
        return f"log₁₀ {self.parameter} " if self.log_slider else f"{self.parameter} "

    @staticmethod
    def _evenly_spaced(axis: np.ndarray) -> bool:
        steps = np.diff(axis)
        return bool(np.allclose(steps, steps.mean(), rtol=1e-3, atol=0))


def compute_grid(
    compute: Callable[[float], SliderPoint], values: Sequence[float], *, progress: bool = True,
    **grid_options,
) -> SliderGrid:
    """Evaluate ``compute`` at every slider value (a tqdm bar when ``progress``)."""
    from tqdm.auto import tqdm

    values = [float(v) for v in values]
    points = [compute(v) for v in tqdm(values, desc="slider grid", disable=not progress)]
    grid_options.setdefault("default", values[len(values) // 2])
    return SliderGrid(values=np.asarray(values), points=points, **grid_options)


# ---------------------------------------------------------------- static view (Vega-Lite)


def _rows(grid: SliderGrid) -> tuple[list[dict], list[dict], list[dict]]:
    positions = grid.slider_positions()
    curves, marks, captions = [], [], []
    for s, point in zip(positions, grid.points, strict=True):
        for label, ys in point.curves.items():
            curves += [{"s": s, "series": label, "x": float(x), "y": float(y)}
                       for x, y in zip(point.x, ys, strict=True) if _drawable(x, y, grid)]
        marks += [{"s": s, "x": float(x), "y": float(y)} for x, y in np.asarray(point.marks)]
        captions.append({"s": s, "caption": "\n".join(textwrap.wrap(point.caption, 88))})
    return curves, marks, captions


def _drawable(x: float, y: float, grid: SliderGrid) -> bool:
    """Finite, and positive on a log axis (a log scale cannot place 0)."""
    ok = np.isfinite(x) and np.isfinite(y)
    return bool(ok and (x > 0 or not grid.log_x) and (y > 0 or not grid.log_y))


def vega_spec(grid: SliderGrid) -> dict:
    """The Vega-Lite spec: the grid as inline data, filtered by a slider bound to a parameter."""
    import altair as alt

    positions, step, label = grid.slider_positions(), grid.slider_step(), grid.slider_label()
    slider = alt.param(name="slider", value=float(positions[grid.default_index]),
                       bind=alt.binding_range(min=float(positions[0]), max=float(positions[-1]),
                                              step=step, name=label))
    selected = f"abs(datum.s - slider) < {step / 2}"
    curves, marks, captions = _rows(grid)
    x = alt.X("x:Q", title=grid.x_label, scale=alt.Scale(type="log" if grid.log_x else "linear"))
    y = alt.Y("y:Q", title=grid.y_label, scale=alt.Scale(type="log" if grid.log_y else "linear"))
    lines = alt.Chart(alt.Data(values=curves)).mark_line().encode(
        x, y, color=alt.Color("series:N", title=None)).transform_filter(selected)
    layers = [lines]
    if marks:
        layers.append(alt.Chart(alt.Data(values=marks)).mark_point(
            shape="triangle-down", size=90, filled=True, color="#d1495b").encode(
            x="x:Q", y="y:Q").transform_filter(selected))
    height = 300
    layers.append(alt.Chart(alt.Data(values=captions)).mark_text(
        align="left", baseline="top", fontSize=12, lineBreak="\n").encode(
        x=alt.value(0), y=alt.value(height + 38), text="caption:N").transform_filter(selected))
    chart = alt.layer(*layers).add_params(slider).properties(
        width=560, height=height, title=grid.title).configure_legend(
        orient="top", labelLimit=0, title=None)
    return chart.to_dict()


def static_html(grid: SliderGrid) -> str:
    """A self-contained HTML fragment that draws the chart with the page's vendored Vega."""
    spec = json.dumps(vega_spec(grid)).replace("</", "<\\/")
    chart_id = "flowlaws-chart-" + format(abs(hash(spec)) % 16**10, "010x")
    return (
        f'<div class="flowlaws-chart" id="{chart_id}" {chart_marker("vega")}></div>\n'
        f'<script type="application/json" id="{chart_id}-spec">{spec}</script>\n'
        "<script>(function () {\n"
        f'  var id = "{chart_id}";\n'
        "  function draw() {\n"
        "    if (!window.vegaEmbed) { return setTimeout(draw, 30); }\n"
        '    var spec = JSON.parse(document.getElementById(id + "-spec").textContent);\n'
        '    vegaEmbed("#" + id, spec, {renderer: "svg", actions: false}).then(function (r) {\n'
        "      (window.flowlawsCharts = window.flowlawsCharts || {})[id] = r.view;\n"
        "    });\n"
        "  }\n"
        "  draw();\n"
        "})();</script>"
    )


# ---------------------------------------------------------------- live view (ipywidgets)


def render_png(grid: SliderGrid, point: SliderPoint, value: float) -> bytes:
    """The matplotlib drawing of one point, as PNG bytes (the live view's figure)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for label, ys in point.curves.items():
        ax.plot(point.x, ys, label=label, lw=1.6)
    if len(point.marks):
        ax.plot(*np.asarray(point.marks).T, "v", color="#d1495b", ms=8, label="marked")
    ax.set(xlabel=grid.x_label, ylabel=grid.y_label,
           title=f"{grid.title}  ({grid.parameter} = {value:.4g})")
    ax.set_xscale("log" if grid.log_x else "linear")
    ax.set_yscale("log" if grid.log_y else "linear")
    ax.legend(fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


class LiveFigure:
    """The widget view. Moving the slider draws from the grid or computes the new point.

    Computation runs in one background thread; while it runs, further slider moves only
    remember the latest value, which is computed next, so rapid moves never queue stale runs.
    """

    def __init__(self, grid: SliderGrid, compute: Callable[[float], SliderPoint] | None = None):
        import ipywidgets as widgets

        self.grid, self.compute = grid, compute
        self.known = {float(v): p for v, p in zip(grid.values, grid.points, strict=True)}
        self._lock, self._pending, self._busy = threading.Lock(), None, False
        self.slider = self._make_slider(widgets)
        self.status = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.caption = widgets.HTML()
        self.widget = widgets.VBox([self.slider, self.status, self.image, self.caption])
        self.slider.observe(lambda change: self.request(change["new"]), names="value")
        start = float(grid.values[grid.default_index])
        self.show(start, self.known[start])

    def _make_slider(self, widgets):
        values, default = self.grid.values, float(self.grid.values[self.grid.default_index])
        if self.compute is None:
            options = [(f"{v:.4g}", float(v)) for v in values]
            return widgets.SelectionSlider(options=options, value=default,
                                           description=self.grid.parameter, continuous_update=False)
        if self.grid.log_slider:
            lo, hi = np.log10(values[0]), np.log10(values[-1])
            return widgets.FloatLogSlider(value=default, base=10, min=lo, max=hi,
                                          step=(hi - lo) / (4 * (len(values) - 1)),
                                          description=self.grid.parameter, continuous_update=False)
        return widgets.FloatSlider(value=default, min=values[0], max=values[-1],
                                   step=(values[-1] - values[0]) / (4 * (len(values) - 1)),
                                   description=self.grid.parameter, continuous_update=False)

    def show(self, value: float, point: SliderPoint) -> None:
        self.image.value = render_png(self.grid, point, value)
        self.caption.value = f"<code>{html.escape(point.caption)}</code>"
        self.status.value = f"{self.grid.parameter} = {value:.4g}"

    def request(self, value: float) -> None:
        """Show ``value``: at once when known, otherwise compute it (latest request wins)."""
        value = float(value)
        if value in self.known:
            self.show(value, self.known[value])
            return
        with self._lock:
            self._pending = value
            if self._busy:
                return
            self._busy = True
        threading.Thread(target=self._work, daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                value, self._pending = self._pending, None
                if value is None:
                    self._busy = False
                    return
            self.status.value = f"computing {self.grid.parameter} = {value:.4g} …"
            self.known[value] = self.compute(value)
            with self._lock:
                stale = self._pending is not None
            if not stale:
                self.show(value, self.known[value])

    def wait(self, timeout: float = 60.0) -> None:
        """Block until no computation is running (for tests and scripts)."""
        import time

        deadline = time.monotonic() + timeout
        while self._busy and time.monotonic() < deadline:
            time.sleep(0.02)


class InteractiveFigure:
    """Displays as the live widget where a front end can show one, else as the static chart."""

    def __init__(self, grid: SliderGrid, compute: Callable[[float], SliderPoint] | None = None):
        self.grid = grid
        self.html = static_html(grid)
        self.live = LiveFigure(grid, compute) if _in_kernel() else None

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = {"text/html": self.html, "text/plain": f"<interactive figure: {self.grid.title}>"}
        if self.live is not None:
            view = "application/vnd.jupyter.widget-view+json"
            bundle[view] = self.live.widget._repr_mimebundle_()[view]
        return bundle


def interactive_figure(
    grid: SliderGrid, compute: Callable[[float], SliderPoint] | None = None
) -> InteractiveFigure:
    """The chapter's one-line figure: live in a kernel, a static chart in the HTML book."""
    return InteractiveFigure(grid, compute)


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
