"""The slider figure: grid checks, the static Vega-Lite view and the live widget view."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from flowlaws.interactive import (
    LiveFigure,
    SliderGrid,
    SliderPoint,
    compute_grid,
    static_html,
    vega_spec,
)


def point(lr: float) -> SliderPoint:
    x = np.linspace(0.0, 1.0, 5)
    return SliderPoint(x=x, curves={"error": lr * (1 + x)}, marks=np.array([[0.5, lr]]),
                       caption=f"lr = {lr:g}")


def grid(values=(0.01, 0.02, 0.04)) -> SliderGrid:
    return compute_grid(point, values, parameter="lr", default=0.02, log_slider=True,
                        progress=False)


def test_default_is_the_nearest_grid_value():
    assert grid().default_index == 1
    assert grid().index_of(0.035) == 2


@pytest.mark.parametrize("values", [(0.02, 0.01), (0.01,), (0.0, 0.1)])
def test_bad_grids_are_refused(values):
    with pytest.raises(ValueError):
        SliderGrid("lr", np.array(values), [point(v) for v in values], default=0.01,
                   log_slider=True)


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


def test_vega_spec_binds_a_slider_and_carries_every_grid_point():
    spec = vega_spec(grid())
    (param,) = spec["params"]
    assert param["bind"]["input"] == "range"
    assert param["value"] == pytest.approx(np.log10(0.02), abs=1e-3)
    captions = sorted(r["caption"] for r in _rows(spec, "caption"))
    assert captions == ["lr = 0.01", "lr = 0.02", "lr = 0.04"]
    assert len(_rows(spec, "series")) == 3 * 5


def test_log_axes_drop_points_they_cannot_place():
    g = grid()
    g.points[0].curves["error"][0] = 0.0
    g.log_y = True
    assert len(_rows(vega_spec(g), "series")) == 3 * 5 - 1


def test_static_html_is_marked_for_the_vega_bundle_and_holds_the_spec():
    html = static_html(grid())
    assert 'data-flowlaws-chart="vega"' in html
    spec_text = html.split('type="application/json"', 1)[1].split(">", 1)[1].split("</script>")[0]
    assert json.loads(spec_text)["params"][0]["name"] == "slider"
    assert "cdn" not in html.lower() and "src=" not in html, "the chart must load nothing itself"


def test_live_slider_redraws_from_the_grid():
    live = LiveFigure(grid())
    first = live.image.value
    live.slider.value = 0.04
    assert "lr = 0.04" in live.caption.value and live.image.value != first


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


def test_an_uneven_grid_moves_over_its_index():
    g = compute_grid(point, (0.05, 0.2, 0.5), parameter="lr", default=0.2, progress=False)
    assert list(g.slider_positions()) == [0.0, 1.0, 2.0] and g.slider_step() == 1.0
    assert "grid point" in g.slider_label()


def test_an_even_grid_lands_exactly_on_every_step():
    g = compute_grid(point, (0.05, 0.2, 0.35), parameter="lr", default=0.2, progress=False)
    positions, step = g.slider_positions(), g.slider_step()
    assert step == 0.15 and positions[-1] == 0.35
    param = vega_spec(g)["params"][0]
    assert param["bind"]["min"] + 2 * param["bind"]["step"] == pytest.approx(param["bind"]["max"])
