"""Slider figures, part 2: the static view, a Vega-Lite chart with one range slider per knob.

The browser filters the precomputed :class:`~flowlaws.book.sliders.SliderGrid`, so dragging a
slider or pressing the arrow keys on it changes the curves, the marks and the caption with no
kernel. A point's two mark sets (its marks and its others, ``SliderPoint.mark_sets``) are
drawn with two symbols and colours (:data:`MARK_STYLES`) and named in a legend, here and in
:func:`render_png`, the live view's picture. The page loads the vendored Vega bundle once,
however many charts it has (:mod:`flowlaws.book.sphinxext`). :func:`render_png` draws one
point with matplotlib.

Both axes are fixed over the whole grid (:func:`axis_domains`), so moving a slider moves the
curves, never the axes; their tick labels use one number format each (:func:`tick_format`).
Beside each slider the page prints the knob's value and the grid's ends
(:func:`slider_readouts`, kept in the spec's ``usermeta``); the range input's own readout,
a ``log10`` or a grid index, is hidden.

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
    "axis_domains",
    "tick_format",
    "slider_readouts",
    "vega_spec",
    "static_html",
    "render_png",
    "MARK_STYLES",
]


def _short(value: float) -> float:
    return float(f"{value:.6g}")


def _rows(grid: SliderGrid) -> tuple[list[dict], list[dict], list[dict]]:
    """One row per (grid point, curve) holding the curve as arrays; the chart flattens them."""
    positions = [dict(zip(k.values, k.positions(), strict=True)) for k in grid.knobs]
    curves, marks, captions = [], [], []
    for key, point in grid.points.items():
        at = {k.name: float(pos[v]) for k, pos, v in zip(grid.knobs, positions, key, strict=True)}
        pairs = _drawn_pairs(grid, point)
        on_curves, on_marks = pairs[:len(point.curves)], pairs[len(point.curves):]
        for label, keep in zip(point.curves, on_curves, strict=True):
            curves.append(at | {"series": label, "x": [_short(x) for x, _ in keep],
                                "y": [_short(y) for _, y in keep]})
        for kind, keep in zip(point.mark_sets(), on_marks, strict=True):
            if keep:
                marks.append(at | {"kind": kind, "x": [_short(x) for x, _ in keep],
                                   "y": [_short(y) for _, y in keep]})
        captions.append(at | {"setting": grid.describe(key),
                              "caption": "\n".join(textwrap.wrap(point.caption, 88))})
    return curves, marks, captions


# (Vega shape, colour, matplotlib marker) of a point's marks and of its others
MARK_STYLES = (("triangle-down", "#d1495b", "v"), ("circle", "#6c757d", "o"))


def _kind_index(grid: SliderGrid, kind: str) -> int:
    """0 when ``kind`` names the marks of some point of ``grid``, 1 when it names others."""
    return 0 if any(p.mark_labels[0] == kind for p in grid.points.values()) else 1


def _drawn_pairs(grid: SliderGrid, point: SliderPoint) -> list[list[tuple[float, float]]]:
    """The point's drawable ``(x, y)`` pairs: one list per curve, then one per mark set
    (:meth:`~flowlaws.book.sliders.SliderPoint.mark_sets`: its marks, then its others)."""
    pairs = [list(zip(point.x, ys, strict=True)) for ys in point.curves.values()]
    pairs += [[tuple(m) for m in marks] for marks in point.mark_sets().values()]
    return [[(float(x), float(y)) for x, y in xy if _drawable(x, y, grid)] for xy in pairs]


def _drawable(x: float, y: float, grid: SliderGrid) -> bool:
    """Finite, positive on a log axis (a log scale cannot place 0) and inside the grid's
    ``x_domain`` when it has one."""
    ok = np.isfinite(x) and np.isfinite(y)
    inside = grid.x_domain is None or grid.x_domain[0] <= x <= grid.x_domain[1]
    return bool(ok and inside and (x > 0 or not grid.log_x) and (y > 0 or not grid.log_y))


def _extent(values: list[float], log: bool) -> list[float] | None:
    """``[lo, hi]`` of the drawn values; widened when they are all equal (a scale needs a span)."""
    if not values:
        return None
    lo, hi = min(values), max(values)
    if lo == hi:
        lo, hi = (lo / 2, hi * 2) if log else (lo - (abs(lo) or 1) / 2, hi + (abs(hi) or 1) / 2)
    return [lo, hi]


def axis_domains(grid: SliderGrid) -> dict[str, list[float] | None]:
    """``{"x": [lo, hi], "y": [lo, hi]}``: the extent of every drawable curve point and mark
    over the whole grid (positive on a log axis), or ``None`` for an axis with nothing drawn.

    The chart fixes its scales to these, so the axes stay put while the sliders move.
    """
    curves, marks, _ = _rows(grid)
    return _domains(grid, curves + marks)


def _domains(grid: SliderGrid, rows: list[dict]) -> dict[str, list[float] | None]:
    found = {axis: _extent([v for r in rows for v in r[axis]], log)
             for axis, log in (("x", grid.log_x), ("y", grid.log_y))}
    if grid.x_domain is not None:
        found["x"] = list(grid.x_domain)
    return found


def tick_format(domain: list[float] | None, log: bool) -> str | None:
    """One d3 number format for every tick label of an axis over ``domain``.

    A log axis whose ticks all read as plain decimals (within ``[0.001, 10000)``) gets ``"~g"``;
    one reaching further gets ``"~e"`` everywhere (``1e-7`` and ``1e-6``, never ``1e-7`` beside
    ``0.000001``). A linear axis keeps Vega's format, one precision for all its ticks, unless its
    numbers are that small or that large, where it gets ``"~e"`` too. ``None``: Vega's default.
    """
    if domain is None:
        return None
    big = max(abs(domain[0]), abs(domain[1]))
    if log:
        return "~g" if domain[0] >= 1e-3 and domain[1] < 1e4 else "~e"
    return "~e" if big >= 1e5 or 0 < big < 1e-3 else None


def _value_text(value: float) -> str:
    return f"{value:.4g}"  # as SliderGrid.describe prints a knob's value


def slider_readouts(grid: SliderGrid) -> dict[str, dict]:
    """What the page prints beside each slider, by the slider's name (``slider_<knob>``).

    ``positions`` are the slider's positions, ``values`` the knob's value printed at each
    (as the chart's printed-values line prints it), ``ends`` the grid's first and last values.
    """
    return {f"slider_{k.name}": {"label": k.label,
                                 "positions": [float(p) for p in k.positions()],
                                 "values": [_value_text(v) for v in k.values],
                                 "ends": [_value_text(k.values[0]), _value_text(k.values[-1])]}
            for k in grid.knobs}


def _axis(field: str, title: str, domain: list[float] | None, log: bool):
    import altair as alt

    scale = alt.Scale(type="log" if log else "linear", domain=domain or alt.Undefined)
    fmt = tick_format(domain, log)
    axis = alt.Axis(format=fmt) if fmt else alt.Undefined
    channel = alt.X if field == "x" else alt.Y
    return channel(f"{field}:Q", title=title, scale=scale, axis=axis)


def vega_spec(grid: SliderGrid) -> dict:
    """The Vega-Lite spec: the grid as inline data, filtered by one bound slider per knob.

    Slider ``slider_<name>`` moves over :meth:`Knob.positions`; a row belongs to the drawn
    point when every knob's field is within half a step of its slider. The rows live once in
    the spec's ``datasets`` (``curves``, ``marks``, ``captions``), which the layers name. Both
    scales are fixed to :func:`axis_domains`; ``usermeta["flowlaws"]["sliders"]`` holds
    :func:`slider_readouts`, which :func:`static_html` prints beside the sliders.
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
    domains = _domains(grid, curves + marks)
    x = _axis("x", grid.x_label, domains["x"], grid.log_x)
    y = _axis("y", grid.y_label, domains["y"], grid.log_y)
    lines = alt.Chart(alt.Data(name="curves")).mark_line().encode(
        x, y, color=alt.Color("series:N", title=None)).transform_filter(
        selected).transform_flatten(["x", "y"])
    layers = [lines]
    if marks:
        kinds = list(dict.fromkeys(r["kind"] for r in marks))
        style = [MARK_STYLES[_kind_index(grid, k)] for k in kinds]
        layers.append(alt.Chart(alt.Data(name="marks")).mark_point(size=90, filled=True).encode(
            x, y,
            shape=alt.Shape("kind:N", title=None,
                            scale=alt.Scale(domain=kinds, range=[s[0] for s in style])),
            color=alt.Color("kind:N", title=None,
                            scale=alt.Scale(domain=kinds, range=[s[1] for s in style])),
        ).transform_filter(selected).transform_flatten(["x", "y"]))
    height = 300
    for name, offset, weight in (("setting", 38, "bold"), ("caption", 56, "normal")):
        layers.append(alt.Chart(alt.Data(name="captions"), name=name).mark_text(
            align="left", baseline="top", fontSize=12, fontWeight=weight, lineBreak="\n").encode(
            x=alt.value(0), y=alt.value(height + offset), text=f"{name}:N").transform_filter(
            selected))
    chart = alt.layer(*layers).add_params(*sliders).resolve_scale(
        color="independent", shape="independent").properties(
        width=560, height=height, title=grid.title).configure_legend(
        orient="top", labelLimit=0, title=None)
    spec = chart.to_dict()
    spec["datasets"] = {"curves": curves, "marks": marks, "captions": captions}  # each stored once
    spec["usermeta"] = {"flowlaws": {"sliders": slider_readouts(grid)}}
    return spec


# The range input's own readout shows log10 values or grid indices: hidden, and the knob's value
# and the grid's ends are printed after it instead (_READOUT_JS).
_SLIDER_CSS = (".flowlaws-chart .vega-bind input[type=range] + span {display: none}"
               " .flowlaws-chart .vega-bind {font-size: 0.85rem}"
               " .flowlaws-chart .vega-bind-name {display: inline-block; min-width: 9em}"
               " .flowlaws-chart .flowlaws-slider-value {margin-left: 0.5em; font-weight: bold;"
               " font-variant-numeric: tabular-nums}"
               " .flowlaws-chart .flowlaws-slider-ends {margin-left: 0.5em; opacity: 0.75}")


# After each slider: <span class="flowlaws-slider-value">0.02</span> (the grid value nearest the
# slider, updated as it moves) and <span class="flowlaws-slider-ends">(0.01 … 0.04)</span>.
_READOUT_JS = """\
      var sliders = ((spec.usermeta || {}).flowlaws || {}).sliders || {};
      Object.keys(sliders).forEach(function (name) {
        var s = sliders[name];
        var input = document.querySelector("#" + id + " input[name='" + name + "']");
        if (!input) { return; }
        var value = document.createElement("span"), ends = document.createElement("span");
        value.className = "flowlaws-slider-value";
        ends.className = "flowlaws-slider-ends";
        ends.textContent = "(" + s.ends[0] + " \u2026 " + s.ends[1] + ")";
        input.parentNode.appendChild(value);
        input.parentNode.appendChild(ends);
        function show(v) {
          var best = 0;
          s.positions.forEach(function (p, i) {
            if (Math.abs(p - v) < Math.abs(s.positions[best] - v)) { best = i; }
          });
          value.textContent = s.values[best];
        }
        show(view.signal(name));
        view.addSignalListener(name, function (_, v) { show(v); });
      });
"""


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
        "      var view = r.view;\n"
        f"{_READOUT_JS}"
        "      (window.flowlawsCharts = window.flowlawsCharts || {})[id] = view;\n"
        "    });\n"
        "  }\n"
        "  draw();\n"
        "})();</script>"
    )


def _limits(domain: list[float], log: bool, pad: float = 0.03) -> tuple[float, float]:
    """``domain`` widened by ``pad`` of its span (of its ``log10`` span on a log axis)."""
    lo, hi = np.log10(domain) if log else domain
    lo, hi = lo - pad * (hi - lo), hi + pad * (hi - lo)
    return (10**lo, 10**hi) if log else (lo, hi)


def render_png(grid: SliderGrid, point: SliderPoint, key: Key) -> bytes:
    """The matplotlib drawing of one point, as PNG bytes (the live view's figure).

    Its axes span the whole grid, as the static chart's do, widened to hold a point computed
    off the grid.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for label, ys in point.curves.items():
        ax.plot(point.x, ys, label=label, lw=1.6)
    for (label, points), (_, colour, marker) in zip(point.mark_sets().items(), MARK_STYLES,
                                                    strict=True):
        if len(points):
            ax.plot(*points.T, marker, color=colour, ms=8 if marker == "v" else 6, ls="none",
                    label=label, fillstyle="full" if marker == "v" else "none")
    ax.set(xlabel=grid.x_label, ylabel=grid.y_label, title=f"{grid.title}\n{grid.describe(key)}")
    ax.title.set_fontsize(10)
    ax.set_xscale("log" if grid.log_x else "linear")
    ax.set_yscale("log" if grid.log_y else "linear")
    grid_domains = axis_domains(grid)
    here = _domains(grid, [{"x": [x for x, _ in xy], "y": [y for _, y in xy]}
                           for xy in _drawn_pairs(grid, point)])
    for axis, log, set_limits in (("x", grid.log_x, ax.set_xlim), ("y", grid.log_y, ax.set_ylim)):
        spans = [d for d in (grid_domains[axis], here[axis]) if d is not None]
        if spans:
            set_limits(*_limits([min(d[0] for d in spans), max(d[1] for d in spans)], log))
    ax.legend(fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()
