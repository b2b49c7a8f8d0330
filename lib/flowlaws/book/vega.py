"""Slider figures, part 2: the static view, a Vega-Lite chart with one range slider per knob.

The browser filters the precomputed :class:`~flowlaws.book.sliders.SliderGrid`, so dragging a
slider or pressing the arrow keys on it changes the curves, the marks and the caption with no
kernel. The page loads the vendored Vega bundle once, however many charts it has
(:mod:`flowlaws.book.sphinxext`). :func:`render_png` draws one point with matplotlib.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import io
import json
import textwrap

import numpy as np

from flowlaws.book.sliders import Key, SliderGrid, SliderPoint
from flowlaws.book.sphinxext import chart_marker

__all__ = [
    "vega_spec",
    "static_html",
    "render_png",
]


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
