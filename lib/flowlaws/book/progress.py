"""Progress over the library's long loops: a tqdm bar, or a report to whoever is listening.

Every long loop in ``flowlaws`` iterates through :func:`track`. By default that is a
``tqdm.auto`` bar, shown only when the caller asked for one. Inside ``with report_to(sink):``
every such loop instead calls ``sink(desc, done, total)`` (a few times a second, and once at
the end), whether or not the caller asked for a bar. The live slider figure
(:class:`flowlaws.book.live.LiveFigure`) uses this to drive its own progress bar while it
computes a new point in a background thread, where a tqdm widget would have nowhere to draw.

The sink lives in a :class:`contextvars.ContextVar`, so it belongs to the thread (or task)
that set it and two figures computing at once never see each other's progress.

Bars are for a reader watching a kernel. When a notebook is executed for the static HTML book
(:func:`static_build`: the environment variable ``FLOWLAWS_STATIC_BUILD=1``, set by the book's
Sphinx extension and by the test build), no bar is drawn: a page would show a ``tqdm.auto``
widget's text frozen at 0 %. Chapters use :func:`track` (and :func:`bar` where a loop updates
a bar by hand), never ``tqdm`` directly, so this one switch covers every bar of the book.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from os import environ
from typing import TypeVar

from tqdm.auto import tqdm

__all__ = [
    "Item",
    "Sink",
    "REPORT_EVERY_S",
    "STATIC_BUILD_ENV",
    "static_build",
    "track",
    "bar",
    "report_to",
]


Item = TypeVar("Item")


Sink = Callable[[str, int, "int | None"], None]


_SINK: ContextVar[Sink | None] = ContextVar("flowlaws_progress_sink", default=None)


REPORT_EVERY_S = 0.1


STATIC_BUILD_ENV = "FLOWLAWS_STATIC_BUILD"


def static_build() -> bool:
    """True while a notebook is executed for the static HTML book (``FLOWLAWS_STATIC_BUILD=1``).

    Nobody watches such a run and its page cannot draw a widget: no progress bar, no live view.
    """
    return environ.get(STATIC_BUILD_ENV, "") not in ("", "0")


def track(iterable: Iterable[Item], *, desc: str | None = None, total: int | None = None,
          enabled: bool = True) -> Iterable[Item]:
    """``iterable``, with a tqdm bar when ``enabled`` or with reports to the active sink.

    No bar in a static build (:func:`static_build`); the sink, when set, always hears.
    """
    sink = _SINK.get()
    if sink is None:
        return tqdm(iterable, desc=desc, total=total, disable=not enabled or static_build())
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    return _reporting(iterable, sink, desc or "", total)


def _reporting(iterable: Iterable[Item], sink: Sink, desc: str,
               total: int | None) -> Iterator[Item]:
    last, done = time.monotonic(), 0
    sink(desc, 0, total)
    for done, item in enumerate(iterable, start=1):
        yield item
        now = time.monotonic()
        if now - last >= REPORT_EVERY_S:
            sink(desc, done, total)
            last = now
    sink(desc, done, total)


def bar(*, total: int, desc: str | None = None, initial: int = 0, enabled: bool = True) -> tqdm:
    """A ``tqdm.auto`` bar updated by hand (``.update(n)``, ``.set_postfix``, ``.close()``).

    For a loop that :func:`track` cannot wrap; like it, no bar in a static build.
    """
    return tqdm(total=total, initial=initial, desc=desc, disable=not enabled or static_build())


@contextmanager
def report_to(sink: Sink) -> Iterator[None]:
    """Within the block, every :func:`track` loop of this thread reports to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)
