"""Slider figures, part 3: the live view, one ipywidgets slider per knob in a kernel.

Moving a slider redraws from the grid or, when ``compute`` is given, computes the new point in
a background thread (chapters cache their runs on disk). Rapid moves never queue stale runs:
while one point is computed only the latest request is remembered. A progress bar is fed by the
library's own loops (:mod:`flowlaws.book.progress`).

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable

import numpy as np

from flowlaws.book.progress import report_to
from flowlaws.book.sliders import Key, Knob, SliderGrid, SliderPoint
from flowlaws.book.vega import render_png

__all__ = [
    "LiveFigure",
]


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
    runs. The library's loops report their progress to the bar (:mod:`flowlaws.book.progress`);
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
