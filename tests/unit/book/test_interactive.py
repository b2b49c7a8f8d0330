"""Tests of flowlaws.book.interactive, against answers known in advance."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from flowlaws.book.interactive import Knob, SliderGrid, SliderPoint, compute_grid
from flowlaws.book.live import LiveFigure
from flowlaws.book.progress import track
from flowlaws.book.sliders import GridPointError
from flowlaws.book.vega import (
    axis_domains,
    render_png,
    slider_readouts,
    static_html,
    tick_format,
    vega_spec,
)


def point(lr: float, runs: int = 1) -> SliderPoint:
    x = np.linspace(0.0, 1.0, 5)
    return SliderPoint(x=x, curves={"error": lr * runs * (1 + x)}, marks=np.array([[0.5, lr]]),
                       caption=f"lr = {lr:g}, runs = {runs}")


LR = dict(name="lr", values=(0.01, 0.02, 0.04), default=0.02, log=True)


RUNS = dict(name="runs", values=(4, 8), default=8, integer=True)


def grid(*knobs: dict) -> SliderGrid:
    return compute_grid(point, [Knob(**k) for k in knobs or (LR,)], progress=False)


def _rows(spec, key):
    found = []

    def walk(node):
        if isinstance(node, dict):
            if key in node:
                found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return found


def test_default_is_the_nearest_grid_value():
    lr = Knob("lr", (0.01, 0.02, 0.04), default=0.025, log=True)  # nearest in log
    assert lr.default == 0.02 and lr.index_of(0.035) == 2
    assert Knob("lr", (0.01, 0.02, 0.04)).default == 0.02, "no default: the middle value"


@pytest.mark.parametrize("kwargs", [
    dict(values=(0.02, 0.01)), dict(values=(0.01,)), dict(values=(0.0, 0.1), log=True),
    dict(values=(1, 2.5), integer=True), dict(name="x"), dict(name="setting"),
    dict(name="batch size"),
])
def test_bad_knobs_are_refused(kwargs):
    with pytest.raises(ValueError):
        Knob(**({"name": "lr", "values": (0.01, 0.02)} | kwargs))


def test_a_grid_missing_a_combination_is_refused():
    full = grid(LR, RUNS)
    points = dict(full.points)
    points.pop((0.04, 8.0))
    with pytest.raises(ValueError, match="every combination"):
        SliderGrid(full.knobs, points)


def test_compute_grid_calls_every_combination_with_keywords_first_knob_slowest():
    calls = []

    def record(lr, runs):
        calls.append((lr, runs))
        return point(lr, runs)

    compute_grid(record, [Knob(**LR), Knob(**RUNS)], progress=False)
    assert calls == [(0.01, 4), (0.01, 8), (0.02, 4), (0.02, 8), (0.04, 4), (0.04, 8)]
    assert all(isinstance(runs, int) for _, runs in calls), "integer knobs pass ints"


def test_a_failing_point_is_named_and_the_finished_points_are_kept():
    # issue 16: one failing point threw the finished ones away, without naming it
    calls = []

    def fragile(lr, runs):
        calls.append((lr, runs))
        if (lr, runs) == (0.02, 8) and len(calls) < 7:
            raise FloatingPointError("diverged")
        return point(lr, runs)

    knobs = [Knob(**LR), Knob(**RUNS)]
    with pytest.raises(GridPointError, match=r"1 of 6 slider points failed: lr=0\.02, runs=8 "
                       r"\(FloatingPointError: diverged\)") as info:
        compute_grid(fragile, knobs, progress=False)
    assert len(calls) == 6 and len(info.value.points) == 5  # the others computed and kept
    assert isinstance(info.value.__cause__, FloatingPointError)
    done = compute_grid(fragile, knobs, progress=False, done=info.value.points)
    assert calls[6:] == [(0.02, 8)]  # only the failed point again
    assert set(done.points) == set(done.keys())


def test_vega_spec_binds_one_slider_per_knob_and_carries_every_grid_point():
    spec = vega_spec(grid(LR, RUNS))
    lr, runs = spec["params"]
    assert lr["name"] == "slider_lr" and runs["name"] == "slider_runs"
    assert lr["bind"]["input"] == runs["bind"]["input"] == "range"
    assert lr["value"] == pytest.approx(np.log10(0.02), abs=1e-3) and runs["value"] == 8
    captions = sorted(r["caption"] for r in _rows(spec, "caption"))
    assert len(captions) == 6 and "lr = 0.04, runs = 4" in captions
    curves = _rows(spec, "series")
    assert len(curves) == 6 and all(len(r["x"]) == len(r["y"]) == 5 for r in curves)
    assert "lr = 0.04, runs = 4" in [r["setting"] for r in _rows(spec, "caption")]
    text = json.dumps(spec)
    assert "slider_lr" in text and "datum.runs - slider_runs" in text and '"flatten"' in text


def test_log_axes_drop_points_they_cannot_place():
    g = grid()
    g.points[(0.01,)].curves["error"][0] = 0.0
    g.log_y = True
    assert sum(len(r["x"]) for r in _rows(vega_spec(g), "series")) == 3 * 5 - 1


def test_static_html_is_marked_for_the_vega_bundle_and_holds_the_spec():
    html = static_html(grid())
    assert 'data-flowlaws-chart="vega"' in html
    spec_text = html.split('type="application/json"', 1)[1].split(">", 1)[1].split("</script>")[0]
    assert json.loads(spec_text)["params"][0]["name"] == "slider_lr"
    assert "cdn" not in html.lower() and "src=" not in html, "the chart must load nothing itself"


def test_live_slider_redraws_from_the_grid():
    live = LiveFigure(grid())
    first = live.image.value
    live.slider.value = 0.04
    assert "lr = 0.04" in live.caption.value and live.image.value != first


def test_every_live_slider_redraws_from_the_grid():
    live = LiveFigure(grid(LR, RUNS))
    assert len(live.sliders) == 2 and "runs = 8" in live.caption.value
    live.sliders[1].value = 4.0
    assert "lr = 0.02, runs = 4" in live.caption.value
    live.sliders[0].value = 0.04
    assert "lr = 0.04, runs = 4" in live.caption.value


def test_live_slider_computes_new_points_and_skips_stale_requests():
    gate, calls = threading.Event(), []

    def slow(lr):
        calls.append(lr)
        gate.wait(5)
        return point(lr)

    live = LiveFigure(grid(), compute=slow)
    for value in (0.011, 0.013, 0.015, 0.017):
        live.request(value)
    gate.set()
    live.wait(10)
    assert calls == [0.011, 0.017], "only the first and the latest request are computed"
    assert "lr = 0.017" in live.caption.value


def test_an_integer_knob_computes_off_grid_values_as_ints():
    seen = []

    def compute(lr, runs):
        seen.append(runs)
        return point(lr, runs)

    live = LiveFigure(grid(LR, RUNS), compute=compute)
    assert [v for _, v in live.sliders[1].options] == [4.0, 8.0]
    options = [v for _, v in live.menus[1].options if v is not None]
    assert options and not {4.0, 8.0} & set(options)
    live.menus[1].value = options[0]
    live.wait(10)
    assert len(seen) == 1 and isinstance(seen[0], int) and f"runs = {seen[0]}" in live.caption.value


def test_the_live_bar_shows_the_library_loops_progress():
    seen_status = []

    def compute(lr):
        for _ in track(range(3), desc="steps", enabled=False):
            seen_status.append(live.status.value)
        return point(lr)

    live = LiveFigure(grid(), compute=compute)
    live.request(0.03)
    live.wait(10)
    assert any("steps 0/3" in s for s in seen_status), seen_status
    assert live.bar.layout.visibility == "hidden" and "lr = 0.03" in live.caption.value


def test_a_failing_compute_is_reported_and_the_figure_stays_usable():
    def broken(lr):
        raise RuntimeError("diverged")

    live = LiveFigure(grid(), compute=broken)
    live.request(0.03)
    live.wait(10)
    assert "failed" in live.status.value and "diverged" in live.status.value
    live.request(0.04)
    assert "lr = 0.04" in live.caption.value, "grid points still draw after an error"


def test_an_uneven_grid_moves_over_its_index():
    knob = Knob("lr", (0.05, 0.2, 0.5), default=0.2)
    assert list(knob.positions()) == [0.0, 1.0, 2.0] and knob.step() == 1.0
    assert knob.slider_label() == "lr ", "the readout is hidden; the label is the knob's"


def test_an_even_grid_lands_exactly_on_every_step():
    g = grid(dict(name="lr", values=(0.05, 0.2, 0.35), default=0.2))
    positions, step = g.knobs[0].positions(), g.knobs[0].step()
    assert step == 0.15 and positions[-1] == 0.35
    param = vega_spec(g)["params"][0]
    assert param["bind"]["min"] + 2 * param["bind"]["step"] == pytest.approx(param["bind"]["max"])


def _encodings(spec, channel):
    return [layer["encoding"][channel] for layer in spec["layer"]
            if channel in layer.get("encoding", {}) and layer["encoding"][channel].get("field")]


def test_both_axes_are_fixed_to_the_extent_of_the_whole_grid():
    g = grid(LR, RUNS)
    spec = vega_spec(g)
    ys = [v for p in g.points.values() for v in [*p.curves["error"], *p.marks[:, 1]]]
    xs = [v for p in g.points.values() for v in [*p.x, *p.marks[:, 0]]]
    assert min(ys) == pytest.approx(0.01) and max(ys) == pytest.approx(0.04 * 8 * 2)
    for channel, values in (("x", xs), ("y", ys)):
        encodings = _encodings(spec, channel)
        assert len(encodings) == 2, "the curves and the marks share one scale"
        for enc in encodings:
            assert enc["scale"]["domain"] == pytest.approx([min(values), max(values)])
    default = [r for r in _rows(spec, "series") if r["lr"] == spec["params"][0]["value"]
               and r["runs"] == spec["params"][1]["value"]]
    assert max(max(r["y"]) for r in default) < max(ys), "the default point does not fill the axis"


def test_a_log_axis_gets_a_positive_domain_and_one_tick_format():
    g = grid(dict(name="lr", values=(1e-7, 1e-6, 1e-5), log=True))
    g.points[(1e-7,)].curves["error"][0] = 0.0  # a log scale cannot place it
    g.points[(1e-7,)].marks[0, 1] = -1.0  # nor this
    g.log_y = True
    (enc, _) = _encodings(vega_spec(g), "y")
    assert enc["scale"]["type"] == "log"
    assert enc["scale"]["domain"] == pytest.approx([1e-7 * 1.25, 1e-5 * 2], rel=1e-6)
    assert enc["axis"]["format"] == "~e", "1e-7 and 1e-6, never 1e-7 beside 0.000001"
    (x_enc, _) = _encodings(vega_spec(g), "x")
    assert x_enc["scale"]["domain"] == [0.0, 1.0] and "axis" not in x_enc


@pytest.mark.parametrize(("domain", "log", "expected"), [
    ([1.0, 1000.0], True, "~g"), ([1e-3, 0.5], True, "~g"), ([1e-7, 1e-2], True, "~e"),
    ([1.0, 1e5], True, "~e"), ([0.0, 1.0], False, None), ([0.0, 2e-6], False, "~e"),
    ([0.0, 3e6], False, "~e"), (None, True, None),
])
def test_tick_format_is_one_format_per_axis(domain, log, expected):
    assert tick_format(domain, log) == expected


def test_a_flat_curve_still_gets_an_axis_with_a_span():
    g = compute_grid(lambda lr: SliderPoint(x=np.array([1.0, 2.0]), curves={"c": np.ones(2)}),
                     Knob(**LR), progress=False, log_y=True)
    lo, hi = axis_domains(g)["y"]
    assert 0 < lo < 1 < hi


def test_each_slider_reads_out_its_value_and_the_grids_ends():
    g = grid(LR, dict(name="runs", values=(1, 3, 10), default=3, integer=True, label="networks"))
    spec = vega_spec(g)
    readouts = spec["usermeta"]["flowlaws"]["sliders"]
    assert readouts == slider_readouts(g)
    assert list(readouts) == [p["name"] for p in spec["params"]]
    lr, batch = readouts["slider_lr"], readouts["slider_runs"]
    assert lr["values"] == ["0.01", "0.02", "0.04"] and lr["ends"] == ["0.01", "0.04"]
    assert batch["values"] == ["1", "3", "10"] and batch["ends"] == ["1", "10"]
    assert batch["positions"] == [0.0, 1.0, 2.0], "an uneven grid moves over its index"
    for param in spec["params"]:
        readout = readouts[param["name"]]
        assert readout["positions"][0] == param["bind"]["min"]
        assert readout["positions"][-1] == pytest.approx(param["bind"]["max"])
    # What the page prints beside the sliders is what the chart's printed-values line says.
    for row in _rows(spec, "setting"):
        at = [readouts[f"slider_{k}"]["values"][
            int(np.argmin(np.abs(np.array(readouts[f"slider_{k}"]["positions"]) - row[k])))]
            for k in ("lr", "runs")]
        assert row["setting"] == f"lr = {at[0]}, networks = {at[1]}"
    html = static_html(g)
    assert "flowlaws-slider-value" in html and "addSignalListener" in html and "usermeta" in html


def test_the_live_figure_keeps_the_grids_axes_and_widens_them_off_the_grid(monkeypatch):
    import matplotlib.pyplot as plt

    g, limits, close = grid(), [], plt.close

    def record_then_close(fig):
        limits.append((fig.axes[0].get_xlim(), fig.axes[0].get_ylim()))
        close(fig)

    monkeypatch.setattr(plt, "close", record_then_close)
    for key in g.keys():
        render_png(g, g.points[key], key)
    render_png(g, point(0.08), (0.08,))  # computed off the grid, above it
    assert limits[0] == limits[1] == limits[2], "the axes must not move on the grid"
    assert limits[2][1][1] >= 0.04 * 2 and limits[3][1][1] >= 0.08 * 2 > limits[2][1][1]


def test_a_static_build_makes_no_live_widget(monkeypatch):
    from flowlaws.book import interactive, progress

    monkeypatch.setattr(interactive, "_in_kernel", lambda: True)
    monkeypatch.setenv(progress.STATIC_BUILD_ENV, "1")
    grid = compute_grid(lambda lr: SliderPoint(x=[0, 1], curves={"y": [lr, lr]}, caption=f"{lr}"),
                        [Knob("lr", [0.1, 0.2], default=0.1)], progress=False)
    figure = interactive.interactive_figure(grid)
    assert figure.live is None
    assert "application/vnd.jupyter.widget-view+json" not in figure._repr_mimebundle_()


def test_a_second_mark_set_is_drawn_apart_with_its_own_symbol_colour_and_legend():
    def two_sets(lr: float) -> SliderPoint:
        x = np.linspace(0.0, 1.0, 5)
        others = np.array([[0.25, lr], [0.75, 2 * lr]]) if lr > 0.015 else np.zeros((0, 2))
        return SliderPoint(x=x, curves={"R": lr * (1 + x)}, marks=np.array([[0.5, lr]]),
                           others=others, mark_labels=("cascade", "other maxima"))

    g = compute_grid(two_sets, Knob(**LR), progress=False)
    spec = vega_spec(g)
    rows = spec["datasets"]["marks"]
    by_kind = {k: sum(len(r["x"]) for r in rows if r["kind"] == k) for k in ("cascade",
                                                                              "other maxima")}
    assert by_kind == {"cascade": 3, "other maxima": 4}  # one per point; two at two points
    assert not any("series" in r for r in rows)  # never read as a curve
    (layer,) = [la for la in spec["layer"] if "shape" in la.get("encoding", {})]
    shape, colour = layer["encoding"]["shape"], layer["encoding"]["color"]
    assert shape["field"] == colour["field"] == "kind"
    assert shape["scale"]["domain"] == colour["scale"]["domain"] == ["cascade", "other maxima"]
    assert len(set(shape["scale"]["range"])) == len(set(colour["scale"]["range"])) == 2
    assert spec["resolve"]["scale"]["color"] == "independent"  # not the curves' colours
    assert render_png(g, g.points[(0.04,)], (0.04,))[:4] == b"\x89PNG"
    assert set(two_sets(0.04).mark_sets()) == {"cascade", "other maxima"}


def test_an_x_domain_fixes_the_axis_and_leaves_out_what_lies_beyond():
    from flowlaws.book.vega import axis_domains

    def beyond(lr):
        x = np.array([0.2, 0.6, 1.0, 1.85, 1.85])  # a fitted p_c line past the data
        return SliderPoint(x=x, curves={"R": np.array([1.0, 2.0, 1.5, 0.0, 3.0])},
                           marks=np.array([[0.6, 2.0], [1.85, 3.0]]))

    knobs = [Knob("lr", [0.1, 0.2])]
    free = compute_grid(beyond, knobs, progress=False)
    assert axis_domains(free)["x"] == [0.2, 1.85]
    fixed = compute_grid(beyond, knobs, progress=False, x_domain=(0.0, 1.0))
    assert axis_domains(fixed)["x"] == [0.0, 1.0]
    spec = json.dumps(vega_spec(fixed))
    assert "1.85" not in spec, "nothing beyond the domain is drawn"
    assert render_png(fixed, fixed.points[(0.1,)], (0.1,))[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="x_domain"):
        compute_grid(beyond, knobs, progress=False, x_domain=(1.0, 0.0))
