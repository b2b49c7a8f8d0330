"""One figure, two views: live ipywidgets sliders in a kernel, Vega-Lite sliders in the book.

A chapter names its sliders (:class:`Knob`: the learning rate, the batch size, the number of
runs ...), computes a :class:`SliderGrid` over every combination of their grid values (a
:class:`SliderPoint` each: curves, marked points, a caption) and calls
:func:`interactive_figure` once. The result displays as

- a live widget in JupyterLab and Colab: one slider per knob, a progress bar, the figure and
  its caption. Moving a slider redraws from the grid, or, when ``compute`` is given, computes
  the new point in a background thread (chapters cache their runs on disk). Rapid moves never
  queue stale runs: while one point is computed only the latest request is remembered;
- a Vega-Lite chart with one bound range slider per knob in the static HTML book: the browser
  filters the precomputed grid, so dragging a slider or pressing the arrow keys on it changes
  the curves, the marks and the caption with no kernel. The page loads the vendored Vega
  bundle once, however many charts it has (``flowlaws.sphinxext``).

Both views draw the same numbers from the same grid, so they cannot disagree. The book's build
keeps the HTML view (``nb_mime_priority_overrides`` in ``_config.yml``).

Explained in: book/02_percolation/05_dsi.ipynb.
"""

from __future__ import annotations

import html
import io
import itertools
import json
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from flowlaws.progress import report_to, track
from flowlaws.sphinxext import chart_marker

Key = tuple[float, ...]
RESERVED_NAMES = ("x", "y", "series", "setting", "caption")  # the fields of the chart's rows


@dataclass
class SliderPoint:
    """What the figure shows at one position of the sliders.

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
class Knob:
    """One slider: the keyword it passes to the compute function and its grid of values.

    Attributes:
        name: a Python identifier, the keyword argument of ``compute`` (``"lr"``).
        values: ``(S,)`` increasing grid values, at least 2.
        default: the position discussed in the text (snapped to the nearest grid value;
            ``None``: the middle one).
        log: the slider moves evenly in ``log10`` of the value.
        integer: the values are whole numbers (batch size, number of runs); ``compute``
            receives an ``int``.
        label: shown beside the slider (default: ``name``).
    """

    name: str
    values: Sequence[float]
    default: float | None = None
    log: bool = False
    integer: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name in RESERVED_NAMES:
            raise ValueError(f"knob name must be an identifier other than {RESERVED_NAMES}, "
                             f"got {self.name!r}")
        self.values = np.asarray(self.values, dtype=float)
        if self.values.ndim != 1 or len(self.values) < 2:
            raise ValueError(f"knob {self.name!r} needs at least 2 values, got {self.values}")
        if np.any(np.diff(self.values) <= 0):
            raise ValueError(f"the values of knob {self.name!r} must increase: {self.values}")
        if self.log and np.any(self.values <= 0):
            raise ValueError(f"log knob {self.name!r} needs positive values: {self.values}")
        if self.integer and np.any(self.values != np.round(self.values)):
            raise ValueError(f"integer knob {self.name!r} has fractional values: {self.values}")
        self.label = self.label or self.name
        middle = self.values[len(self.values) // 2]
        self.default = float(self.values[self.index_of(middle if self.default is None
                                                       else self.default)])

    def index_of(self, value: float) -> int:
        """Index of the grid value nearest to ``value`` (in log space for a log knob)."""
        return int(np.argmin(np.abs(self._axis() - (np.log10(value) if self.log else value))))

    def cast(self, value: float) -> float | int:
        """``value`` as ``compute`` receives it: an ``int`` for an integer knob."""
        return int(round(value)) if self.integer else float(value)

    def _axis(self) -> np.ndarray:
        return np.log10(self.values) if self.log else self.values

    def _evenly_spaced(self) -> bool:
        steps = np.diff(self._axis())
        return bool(np.allclose(steps, steps.mean(), rtol=1e-3, atol=0))

    def positions(self) -> np.ndarray:
        """``(S,)`` positions of the static slider, equally spaced by :meth:`step`.

        A grid evenly spaced in its values (or in ``log10`` of them for a log knob) moves over
        those numbers, rounded to 6 significant digits so that the browser's range input can
        land on every one of them; any other grid moves over the grid index ``0 … S−1``.
        """
        if not self._evenly_spaced():
            return np.arange(len(self.values), dtype=float)
        return np.round(self._axis()[0] + self.step() * np.arange(len(self.values)), 9)

    def step(self) -> float:
        """The spacing of :meth:`positions`."""
        return float(f"{np.diff(self._axis()).mean():.6g}") if self._evenly_spaced() else 1.0

    def slider_label(self) -> str:
        """The static slider's label. Its own readout (a log or a grid index) is hidden: the
        chart prints the knobs' values above the caption instead."""
        return f"{self.label} "

    def live_values(self) -> np.ndarray:
        """The values an integer knob's live slider offers: the grid and about 3 between."""
        lo, hi, n = self.values[0], self.values[-1], 4 * (len(self.values) - 1) + 1
        between = np.geomspace(lo, hi, n) if self.log else np.linspace(lo, hi, n)
        return np.unique(np.r_[self.values, np.round(between)])


@dataclass
class SliderGrid:
    """Precomputed :class:`SliderPoint` s at every combination of the knobs' grid values.

    ``points`` maps a key, the tuple of the knobs' values in the order of ``knobs``, to its
    point; every combination must be there.
    """

    knobs: list[Knob]
    points: dict[Key, SliderPoint]
    x_label: str = "x"
    y_label: str = "y"
    log_x: bool = False
    log_y: bool = False
    title: str = ""

    def __post_init__(self) -> None:
        self.knobs = _knob_list(self.knobs)
        names = [k.name for k in self.knobs]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"a grid needs one or more knobs with distinct names, got {names}")
        expected = set(self.keys())
        self.points = {tuple(map(float, key)): p for key, p in self.points.items()}
        if set(self.points) != expected:
            missing = sorted(expected - set(self.points))[:3]
            raise ValueError(f"the grid must hold every combination of {names}; missing "
                             f"{missing}, extra {sorted(set(self.points) - expected)[:3]}")

    def keys(self) -> list[Key]:
        """Every combination of the knobs' values, the first knob varying slowest."""
        return _keys(self.knobs)

    @property
    def default_key(self) -> Key:
        return tuple(k.default for k in self.knobs)

    def describe(self, key: Key) -> str:
        """``"lr = 0.1, B = 4"``: the knobs' labels and values."""
        return ", ".join(f"{k.label} = {v:.4g}" for k, v in zip(self.knobs, key, strict=True))

    def arguments(self, key: Key) -> dict[str, float | int]:
        """The keyword arguments ``compute`` receives for ``key``."""
        return _arguments(self.knobs, key)


def _knob_list(knobs: Knob | Sequence[Knob]) -> list[Knob]:
    return [knobs] if isinstance(knobs, Knob) else list(knobs)


def _keys(knobs: Sequence[Knob]) -> list[Key]:
    return [tuple(map(float, key)) for key in itertools.product(*(k.values for k in knobs))]


def _arguments(knobs: Sequence[Knob], key: Key) -> dict[str, float | int]:
    return {k.name: k.cast(v) for k, v in zip(knobs, key, strict=True)}


def compute_grid(
    compute: Callable[..., SliderPoint], knobs: Knob | Sequence[Knob], *, progress: bool = True,
    **grid_options,
) -> SliderGrid:
    """Call ``compute(**{knob.name: value, ...})`` at every combination of the knobs' values.

    The first knob varies slowest, so a ``compute`` that caches one expensive run per value of
    the first knob and slices it for the others (the number of runs, say) does each run once.
    ``grid_options`` go to :class:`SliderGrid`; a tqdm bar counts the points when ``progress``.
    """
    knobs = _knob_list(knobs)
    points = {key: compute(**_arguments(knobs, key))
              for key in track(_keys(knobs), desc="slider grid", enabled=progress)}
    return SliderGrid(knobs=knobs, points=points, **grid_options)


# ---------------------------------------------------------------- static view (Vega-Lite)


def _short(value: float) -> float:
    return float(f"{value:.6g}")


def _rows(grid: SliderGrid) -> tuple[list[dict], list[dict], list[dict]]:
    """One row per (grid point, curve) holding the curve as arrays; the chart flattens them."""
    positions = [dict(zip(k.values, k.positions(), strict=True)) for k in grid.knobs]
    curves, marks, captions = [], [], []
    for key, point in grid.points.items():
        at = {k.name: float(pos[v]) for k, pos, v in zip(grid.knobs, positions, key, strict=True)}
        for label, ys in point.curves.items():
            keep = [(x, y) for x, y in zip(point.x, ys, strict=True) if _drawable(x, y, grid)]
            curves.append(at | {"series": label, "x": [_short(x) for x, _ in keep],
                                "y": [_short(y) for _, y in keep]})
        xy = [(x, y) for x, y in np.asarray(point.marks, dtype=float).reshape(-1, 2)
              if _drawable(x, y, grid)]
        if xy:
            marks.append(at | {"x": [_short(x) for x, _ in xy], "y": [_short(y) for _, y in xy]})
        captions.append(at | {"setting": grid.describe(key),
                              "caption": "\n".join(textwrap.wrap(point.caption, 88))})
    return curves, marks, captions


def _drawable(x: float, y: float, grid: SliderGrid) -> bool:
    """Finite, and positive on a log axis (a log scale cannot place 0)."""
    ok = np.isfinite(x) and np.isfinite(y)
    return bool(ok and (x > 0 or not grid.log_x) and (y > 0 or not grid.log_y))


def vega_spec(grid: SliderGrid) -> dict:
    """The Vega-Lite spec: the grid as inline data, filtered by one bound slider per knob.

    Slider ``slider_<name>`` moves over :meth:`Knob.positions`; a row belongs to the drawn
    point when every knob's field is within half a step of its slider. The rows live once in
    the spec's ``datasets`` (``curves``, ``marks``, ``captions``), which the layers name.
    """
    import altair as alt

    sliders, tests = [], []
    for knob in grid.knobs:
        positions, step = knob.positions(), knob.step()
        sliders.append(alt.param(
            name=f"slider_{knob.name}", value=float(positions[knob.index_of(knob.default)]),
            bind=alt.binding_range(min=float(positions[0]), max=float(positions[-1]),
                                   step=step, name=knob.slider_label())))
        tests.append(f"abs(datum.{knob.name} - slider_{knob.name}) < {step / 2}")
    selected = " && ".join(tests)
    curves, marks, captions = _rows(grid)
    x = alt.X("x:Q", title=grid.x_label, scale=alt.Scale(type="log" if grid.log_x else "linear"))
    y = alt.Y("y:Q", title=grid.y_label, scale=alt.Scale(type="log" if grid.log_y else "linear"))
    lines = alt.Chart(alt.Data(name="curves")).mark_line().encode(
        x, y, color=alt.Color("series:N", title=None)).transform_filter(
        selected).transform_flatten(["x", "y"])
    layers = [lines]
    if marks:
        layers.append(alt.Chart(alt.Data(name="marks")).mark_point(
            shape="triangle-down", size=90, filled=True, color="#d1495b").encode(
            x="x:Q", y="y:Q").transform_filter(selected).transform_flatten(["x", "y"]))
    height = 300
    for name, offset, weight in (("setting", 38, "bold"), ("caption", 56, "normal")):
        layers.append(alt.Chart(alt.Data(name="captions"), name=name).mark_text(
            align="left", baseline="top", fontSize=12, fontWeight=weight, lineBreak="\n").encode(
            x=alt.value(0), y=alt.value(height + offset), text=f"{name}:N").transform_filter(
            selected))
    chart = alt.layer(*layers).add_params(*sliders).properties(
        width=560, height=height, title=grid.title).configure_legend(
        orient="top", labelLimit=0, title=None)
    spec = chart.to_dict()
    spec["datasets"] = {"curves": curves, "marks": marks, "captions": captions}  # each stored once
    return spec


# The range input's own readout shows log10 values or grid indices; the chart prints the values.
_SLIDER_CSS = (".flowlaws-chart .vega-bind input[type=range] + span {display: none}"
               " .flowlaws-chart .vega-bind {font-size: 0.85rem}"
               " .flowlaws-chart .vega-bind-name {display: inline-block; min-width: 9em}")


def static_html(grid: SliderGrid) -> str:
    """A self-contained HTML fragment that draws the chart with the page's vendored Vega."""
    spec = json.dumps(vega_spec(grid)).replace("</", "<\\/")
    chart_id = "flowlaws-chart-" + format(abs(hash(spec)) % 16**10, "010x")
    return (
        f"<style>{_SLIDER_CSS}</style>\n"
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


def render_png(grid: SliderGrid, point: SliderPoint, key: Key) -> bytes:
    """The matplotlib drawing of one point, as PNG bytes (the live view's figure)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for label, ys in point.curves.items():
        ax.plot(point.x, ys, label=label, lw=1.6)
    if len(point.marks):
        ax.plot(*np.asarray(point.marks).T, "v", color="#d1495b", ms=8, label="marked")
    ax.set(xlabel=grid.x_label, ylabel=grid.y_label, title=f"{grid.title}\n{grid.describe(key)}")
    ax.title.set_fontsize(10)
    ax.set_xscale("log" if grid.log_x else "linear")
    ax.set_yscale("log" if grid.log_y else "linear")
    ax.legend(fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _live_slider(widgets, knob: Knob, free: bool):
    """One knob's widget: the grid values only, or (``free``) any value in the grid's range."""
    style = {"description_width": "initial"}
    common = dict(description=knob.label, continuous_update=False, style=style)
    if not free or knob.integer:
        values = knob.live_values() if free else knob.values
        options = [(f"{v:.4g}", float(v)) for v in values]
        return widgets.SelectionSlider(options=options, value=knob.default, **common)
    lo, hi = knob._axis()[0], knob._axis()[-1]
    step = (hi - lo) / (4 * (len(knob.values) - 1))
    if knob.log:
        return widgets.FloatLogSlider(value=knob.default, base=10, min=lo, max=hi, step=step,
                                      **common)
    return widgets.FloatSlider(value=knob.default, min=lo, max=hi, step=step, **common)


class LiveFigure:
    """The widget view: one slider per knob; moving one draws from the grid or computes.

    Computation runs in one background thread; while it runs, further slider moves only
    remember the latest position, which is computed next, so rapid moves never queue stale
    runs. The library's loops report their progress to the bar (:mod:`flowlaws.progress`);
    an error in ``compute`` is shown in the status line and leaves the figure usable.
    """

    def __init__(self, grid: SliderGrid, compute: Callable[..., SliderPoint] | None = None):
        import ipywidgets as widgets

        self.grid, self.compute = grid, compute
        self.known: dict[Key, SliderPoint] = dict(grid.points)
        self._lock, self._pending, self._busy = threading.Lock(), None, False
        self.sliders = [_live_slider(widgets, k, compute is not None) for k in grid.knobs]
        self.bar = widgets.FloatProgress(min=0.0, max=1.0, layout={"visibility": "hidden"})
        self.status = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.caption = widgets.HTML()
        self.widget = widgets.VBox([*self.sliders, widgets.HBox([self.bar, self.status]),
                                    self.image, self.caption])
        for slider in self.sliders:
            slider.observe(lambda change: self.request(self.position()), names="value")
        self.show(grid.default_key, self.known[grid.default_key])

    @property
    def slider(self):
        """The first knob's slider (the only one of a one-knob figure)."""
        return self.sliders[0]

    def position(self) -> Key:
        """The sliders' values now, as a grid key."""
        return tuple(float(k.cast(s.value)) for k, s in zip(self.grid.knobs, self.sliders,
                                                              strict=True))

    def show(self, key: Key, point: SliderPoint) -> None:
        self.image.value = render_png(self.grid, point, key)
        self.caption.value = f"<code>{html.escape(point.caption)}</code>"
        self.status.value = html.escape(self.grid.describe(key))

    def request(self, key: Key | float) -> None:
        """Show ``key``: at once when known, otherwise compute it (the latest request wins)."""
        key = (float(key),) if np.isscalar(key) else tuple(map(float, key))
        if key in self.known:
            self.show(key, self.known[key])
            return
        if self.compute is None:
            return
        with self._lock:
            self._pending = key
            if self._busy:
                return
            self._busy = True
        threading.Thread(target=self._work, daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                key, self._pending = self._pending, None
                if key is None:
                    self._busy = False
                    return
            try:
                self.known[key] = self._computed(key)
            except Exception as error:  # shown to the reader, who can move on
                what = html.escape(f"{self.grid.describe(key)} failed: {error!r}")
                self.status.value = f'<span style="color:#b00">{what}</span>'
                continue
            finally:
                self.bar.layout.visibility = "hidden"
            with self._lock:
                stale = self._pending is not None
            if not stale:
                self.show(key, self.known[key])

    def _computed(self, key: Key) -> SliderPoint:
        start, what = time.monotonic(), html.escape(self.grid.describe(key))

        def report(desc: str, done: int, total: int | None) -> None:
            self.bar.layout.visibility = "visible" if total else "hidden"
            self.bar.value = done / total if total else 0.0
            count = f"{done}/{total}" if total else f"{done}"
            self.status.value = (f"computing {what} … {html.escape(desc)} {count} "
                                 f"({time.monotonic() - start:.0f} s)")

        report("", 0, None)
        with report_to(report):
            return self.compute(**self.grid.arguments(key))

    def wait(self, timeout: float = 60.0) -> None:
        """Block until no computation is running (for tests and scripts)."""
        deadline = time.monotonic() + timeout
        while self._busy and time.monotonic() < deadline:
            time.sleep(0.02)


class InteractiveFigure:
    """Displays as the live widget where a front end can show one, else as the static chart."""

    def __init__(self, grid: SliderGrid, compute: Callable[..., SliderPoint] | None = None):
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
