"""The live sliders of every figure of the book, moved as the front end moves them.

The knobs are read from the chapters themselves: each ``Knob(...)`` call of a notebook is
evaluated with the values of its ``parameters`` cell, at the reader's size and at the smoke size
of ``tests/smoke_params.yaml``. A ``SelectionSlider`` is moved the way JupyterLab moves it, by
setting its ``index`` to each of its own options in turn (an arrow key moves the index by one),
and a value between grid values is chosen in the menu beside it; the points are cheap
stand-ins that record every call of ``compute``.
"""

from __future__ import annotations

import ast
import json
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from flowlaws.book import live as live_module
from flowlaws.book.live import LiveFigure
from flowlaws.book.sliders import Knob, SliderPoint, compute_grid

ROOT = Path(__file__).resolve().parents[3]


def _code(cell: dict) -> str:
    lines = "".join(cell["source"]).splitlines()
    return "\n".join(line[:len(line) - len(line.lstrip())] + "pass"  # a magic or shell line
                     if line.lstrip().startswith(("%", "!")) else line for line in lines)


def _figures() -> list[tuple[str, list, bool]]:
    """``(id, knobs, free)`` for every cell of the book that makes ``Knob`` s, at both sizes."""
    smoke = yaml.safe_load((ROOT / "tests" / "smoke_params.yaml").read_text())
    figures = []
    for path in sorted((ROOT / "book").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        params = next((c for c in cells if "parameters" in c["metadata"].get("tags", [])), None)
        reader = {}
        if params is not None:
            for node in ast.parse(_code(params)).body:
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    reader[node.targets[0].id] = ast.literal_eval(node.value)
        name = str(path.relative_to(ROOT))
        for cell in cells:
            calls = [node for node in ast.walk(ast.parse(_code(cell)))
                     if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Knob"]
            calls.sort(key=lambda node: (node.lineno, node.col_offset))
            free = "compute=" in _code(cell) or "interactive_figure(" not in _code(cell)
            for size, values in (("reader", reader), ("smoke", reader | smoke.get(name, {}))):
                knobs = [eval(compile(ast.Expression(call), name, "eval"),  # noqa: S307
                              {"Knob": Knob, "np": np}, dict(values)) for call in calls]
                if knobs:
                    figures.append((f"{path.stem}-{'-'.join(k.name for k in knobs)}-{size}",
                                    knobs, free))
    return figures


FIGURES = _figures()


def test_the_book_has_live_figures():
    chapters = {figure_id.split("-")[0] for figure_id, _, _ in FIGURES}
    assert {"01_gradient_flow", "05_discrete_steps", "02_trapping", "05_dsi"} <= chapters


class Recorder:
    """A ``compute`` whose points name their arguments; it counts its calls."""

    def __init__(self):
        self.calls: list[dict] = []

    def __call__(self, **kwargs) -> SliderPoint:
        self.calls.append(kwargs)
        x = np.linspace(0.0, 1.0, 3)
        return SliderPoint(x=x, curves={"y": x}, caption=_caption(kwargs))


def _caption(kwargs: dict) -> str:
    return " ".join(f"{name}={value!r}" for name, value in sorted(kwargs.items()))


@pytest.fixture
def no_drawing(monkeypatch):
    """matplotlib is not what is tested here: the image names the point instead."""
    monkeypatch.setattr(live_module, "render_png",
                        lambda grid, point, key: point.caption.encode())


def _figure(knobs: list, free: bool) -> tuple[LiveFigure, Recorder]:
    record = Recorder()
    grid = compute_grid(record, knobs, progress=False)
    figure = LiveFigure(grid, compute=record if free else None)
    record.calls.clear()
    return figure, record


def _move(slider, value: float) -> None:
    """Move as the front end does: to the index of one of the slider's own options."""
    slider.index = [v for _, v in slider.options].index(value)


def _shown(figure: LiveFigure) -> str:
    return bytes(figure.image.value).decode()


def _choose(menu, value: float | None) -> None:
    """Choose ``value`` in a knob's menu of values between grid values, by its index."""
    menu.index = [v for _, v in menu.options].index(value)


@pytest.mark.parametrize(("knobs", "free"), [f[1:] for f in FIGURES], ids=[f[0] for f in FIGURES])
def test_every_grid_position_shows_its_point_without_computing(knobs, free, no_drawing):
    figure, record = _figure(knobs, free)
    for slider, knob in zip(figure.sliders, knobs, strict=True):
        values = [v for _, v in slider.options]
        assert values == list(knob.values), "the slider holds the grid values, exactly, only"
        labels = dict((v, label) for label, v in slider.options)
        assert all(labels[v] == (f"{v:g}" if not knob.integer else str(int(v)))
                   for v in knob.values), "the readout writes a grid value as the text does"
    for key in figure.grid.keys():
        for slider, value in zip(figure.sliders, key, strict=True):
            _move(slider, value)
        expected = figure.grid.points[key].caption
        assert _shown(figure) == expected and expected in figure.caption.value
    assert record.calls == [], "a grid position never computes"


@pytest.mark.parametrize(("knobs", "free"), [f[1:] for f in FIGURES], ids=[f[0] for f in FIGURES])
def test_an_arrow_key_steps_from_grid_value_to_grid_value(knobs, free, no_drawing):
    figure, record = _figure(knobs, free)
    for slider, knob in zip(figure.sliders, knobs, strict=True):
        for index in range(len(knob.values)):
            slider.index = index  # what ArrowRight/ArrowLeft do: the next option
            assert slider.value == knob.values[index]
        _move(slider, knob.default)
    assert record.calls == [], "no arrow key lands off the grid"


@pytest.mark.parametrize(("knobs", "free"), [f[1:] for f in FIGURES if f[2]],
                         ids=[f[0] for f in FIGURES if f[2]])
def test_an_in_between_value_computes_once_even_when_chosen_twice(knobs, free, no_drawing):
    figure, record = _figure(knobs, free)
    for slider, menu, knob in zip(figure.sliders, figure.menus, knobs, strict=True):
        if menu is None:  # whole numbers 1, 2: nothing lies between
            assert knob.integer and np.all(np.diff(knob.values) == 1), knob.name
            continue
        between = [v for _, v in menu.options if v is not None]
        assert between and not set(between) & set(knob.values), "only values between"
        for value in between:
            before = len(record.calls)
            _choose(menu, value)
            figure.wait(10)
            assert len(record.calls) == before + 1, f"{knob.name} = {value} computes once"
            assert record.calls[-1][knob.name] == knob.cast(value)
            assert isinstance(record.calls[-1][knob.name], int if knob.integer else float)
            shown = _shown(figure)
            _choose(menu, None)
            assert len(record.calls) == before + 1, "back on the grid: no run"
            assert _shown(figure) == figure.grid.points[figure.position()].caption
            _choose(menu, value)
            figure.wait(10)
            assert len(record.calls) == before + 1, f"{knob.name} = {value}: known on return"
            assert _shown(figure) == shown
            other = next(v for v in knob.values if v != slider.value)
            _move(slider, other)  # the slider returns the knob to the grid, the menu follows
            assert menu.value is None and len(record.calls) == before + 1
            _move(slider, knob.default)
    assert _shown(figure) == figure.grid.points[figure.grid.default_key].caption


def test_the_issue_grids_step_over_grid_values_and_offer_short_values_between(no_drawing):
    figure, _ = _figure([Knob("lr", [0.01, 0.02, 0.04, 0.1, 0.2, 0.4], default=0.04, log=True)],
                        True)
    assert [label for label, _ in figure.slider.options] == ["0.01", "0.02", "0.04", "0.1",
                                                             "0.2", "0.4"]
    labels = [label for label, _ in figure.menus[0].options]
    assert labels[:7] == ["on the grid", "0.012", "0.014", "0.017", "0.024", "0.028", "0.034"]
    assert len(labels) == 1 + 15
    assert figure.slider.label == "0.04" and figure.slider.value == 0.04


def test_a_float_last_bit_finds_the_grid_point(no_drawing):
    figure, record = _figure([Knob("lr", [1e-3, 3e-3, 1e-2, 5e-2, 0.3], log=True)], True)
    figure.request(0.1 + 0.2)  # 0.30000000000000004
    figure.request(0.3000000000000001)
    figure.wait(10)
    assert record.calls == [] and _shown(figure) == "lr=0.3"
    assert Knob("lr", [0.1, 0.1 + 0.2]).values[-1] == 0.3, "grid values are rounded alike"


def test_a_point_being_computed_is_not_computed_again_and_a_stale_one_never(no_drawing):
    gate, calls = threading.Event(), []

    def slow(lr):
        calls.append(lr)
        gate.wait(5)
        return Recorder()(lr=lr)

    figure, _ = _figure([Knob("lr", [0.01, 0.02, 0.04], log=True)], True)
    figure.compute = slow
    figure.request(0.024)
    for _ in range(500):
        if calls:
            break
        threading.Event().wait(0.01)
    figure.request(0.028)  # waits: stale once the reader goes back
    figure.request(0.024)  # being computed: not queued again
    figure.request(0.01)  # a grid value: shown at once, while 0.024 is computed
    assert "lr=0.01" in figure.caption.value
    figure.request(0.024)
    gate.set()
    figure.wait(10)
    assert calls == [0.024] and "lr=0.024" in figure.caption.value


def test_a_finished_run_does_not_cover_the_grid_point_the_reader_moved_to(no_drawing):
    started, gate = threading.Event(), threading.Event()

    def slow(lr):
        started.set()
        gate.wait(5)
        return Recorder()(lr=lr)

    figure, _ = _figure([Knob("lr", [0.01, 0.02, 0.04], log=True)], True)
    figure.compute = slow
    figure.request(0.024)
    assert started.wait(5)
    figure.request(0.04)
    gate.set()
    figure.wait(10)
    assert "lr=0.04" in figure.caption.value and (0.024,) in figure.known
