"""Slider figures, part 3: the live view, one ipywidgets slider per knob in a kernel.

Each slider is a ``SelectionSlider`` over the knob's grid values, exactly: dragging it or
pressing an arrow key steps from grid value to grid value, and each shows its precomputed
point at once. When ``compute`` is given, a menu beside the slider offers a few values between
grid values (:meth:`~flowlaws.book.sliders.Knob.live_values`); choosing one computes that point
in a background thread (chapters cache their runs on disk), once: a computed point is known
from then on, and moving the slider again returns to the grid. Rapid moves never queue stale
runs: while one point is computed only the latest request is remembered. A progress bar is fed
by the library's own loops (:mod:`flowlaws.book.progress`).

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable

import numpy as np

from flowlaws.book.progress import report_to
from flowlaws.book.sliders import Key, Knob, SliderGrid, SliderPoint, round_key
from flowlaws.book.vega import render_png

__all__ = [
    "LiveFigure",
]


def _live_slider(widgets, knob: Knob):
    """One knob's slider over its grid values.

    The readout is the value as the text writes it (0.04); the front end moves over the
    options' index, so an arrow key steps to the next grid value, never between two.
    """
    options = list(zip(knob.labels(knob.values), map(float, knob.values), strict=True))
    return widgets.SelectionSlider(options=options, value=knob.default, description=knob.label,
                                   continuous_update=False,
                                   style={"description_width": "initial"})


def _between_menu(widgets, knob: Knob):
    """The values between grid values that ``compute`` can draw, as a menu (``None``: on the
    grid, where the slider is); ``None`` when nothing lies between (whole numbers 1, 2)."""
    grid = set(map(float, knob.values))
    values = [float(v) for v in knob.live_values() if float(v) not in grid]
    if not values:
        return None
    options = [("on the grid", None), *zip(knob.labels(values), values, strict=True)]
    return widgets.Dropdown(options=options, value=None, description="or compute",
                            layout={"width": "max-content"},
                            style={"description_width": "initial"})


class LiveFigure:
    """The widget view: one slider per knob; moving one draws from the grid or computes.

    Computation runs in one background thread; while it runs, further slider moves only
    remember the latest position, which is computed next, so rapid moves never queue stale
    runs. The library's loops report their progress to the bar (:mod:`flowlaws.book.progress`);
    an error in ``compute`` is shown in the status line and leaves the figure usable.
    """

    def __init__(self, grid: SliderGrid, compute: Callable[..., SliderPoint] | None = None):
        import ipywidgets as widgets

        self.grid, self.compute = grid, compute
        self.known: dict[Key, SliderPoint] = dict(grid.points)  # keys as round_key gives them
        self._lock, self._busy = threading.Lock(), False
        self._pending: Key | None = None  # to compute next
        self._running: Key | None = None  # being computed
        self._wanted: Key | None = None  # where the sliders are: the one point to show
        self.sliders = [_live_slider(widgets, k) for k in grid.knobs]
        self.menus = [_between_menu(widgets, k) if compute is not None else None
                      for k in grid.knobs]
        self._values = [float(k.default) for k in grid.knobs]  # where each knob is
        self.bar = widgets.FloatProgress(min=0.0, max=1.0, layout={"visibility": "hidden"})
        self.status = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.caption = widgets.HTML()
        rows = [widgets.HBox([s, m]) if m is not None else s
                for s, m in zip(self.sliders, self.menus, strict=True)]
        self.widget = widgets.VBox([*rows, widgets.HBox([self.bar, self.status]),
                                    self.image, self.caption])
        for i, (slider, menu) in enumerate(zip(self.sliders, self.menus, strict=True)):
            slider.observe(lambda change, i=i: self._moved(i, change["new"], True), names="value")
            if menu is not None:
                menu.observe(lambda change, i=i: self._moved(i, change["new"], False),
                             names="value")
        self.show(grid.default_key, self.known[grid.default_key])

    @property
    def slider(self):
        """The first knob's slider (the only one of a one-knob figure)."""
        return self.sliders[0]

    def _moved(self, i: int, value: float | None, on_grid: bool) -> None:
        """Knob ``i`` moved: by its slider (``on_grid``) or in its menu (``None``: back to
        the slider's grid value)."""
        menu = self.menus[i]
        if on_grid:
            self._values[i] = float(value)
            if menu is not None and menu.value is not None:
                menu.value = None  # its observer requests the position
                return
        else:
            self._values[i] = float(self.sliders[i].value if value is None else value)
        self.request(self.position())

    def position(self) -> Key:
        """The knobs' values now (a slider's, or a value chosen in its menu), as a key."""
        return tuple(float(k.cast(v)) for k, v in zip(self.grid.knobs, self._values,
                                                        strict=True))

    def show(self, key: Key, point: SliderPoint) -> None:
        self.image.value = render_png(self.grid, point, key)
        self.caption.value = f"<code>{html.escape(point.caption)}</code>"
        self.status.value = html.escape(self.grid.describe(key))

    def request(self, key: Key | float) -> None:
        """Show ``key``: at once when known, otherwise compute it (the latest request wins).

        Keys are compared after :func:`~flowlaws.book.sliders.round_key`, so a grid value
        never computes; a point being computed or computed before is not computed again.
        """
        key = round_key((key,) if np.isscalar(key) else key)
        with self._lock:
            self._wanted = key
            point = self.known.get(key)
            if point is not None or self.compute is None or key == self._running:
                self._pending = None  # a stale request is dropped, never computed
                start = False
            else:
                self._pending, start, self._busy = key, not self._busy, True
        if point is not None:
            self.show(key, point)
        if start:
            threading.Thread(target=self._work, daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                key, self._pending = self._pending, None
                self._running = key
                if key is None:
                    self._busy = False
                    return
            try:
                point = self._computed(key)
            except Exception as error:  # shown to the reader, who can move on
                what = html.escape(f"{self.grid.describe(key)} failed: {error!r}")
                self.status.value = f'<span style="color:#b00">{what}</span>'
                continue
            finally:
                self.bar.layout.visibility = "hidden"
            with self._lock:
                self.known[key] = point
                current = self._wanted == key
            if current:
                self.show(key, point)

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
