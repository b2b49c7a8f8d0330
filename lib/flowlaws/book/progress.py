"""Progress over the library's long loops: a tqdm bar, or a report to whoever is listening.

Every long loop in ``flowlaws`` iterates through :func:`track`. By default that is a
``tqdm.auto`` bar, shown only when the caller asked for one. Inside ``with report_to(sink):``
every such loop instead calls ``sink(desc, done, total)`` (a few times a second, and once at
the end), whether or not the caller asked for a bar. The live slider figure
(:class:`flowlaws.book.live.LiveFigure`) uses this to drive its own progress bar while it
computes a new point in a background thread, where a tqdm widget would have nowhere to draw.

The sink lives in a :class:`contextvars.ContextVar`, so it belongs to the thread (or task)
that set it and two figures computing at once never see each other's progress.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from tqdm.auto import tqdm

__all__ = [
    "Item",
    "Sink",
    "REPORT_EVERY_S",
    "track",
    "report_to",
]


Item = TypeVar("Item")


Sink = Callable[[str, int, "int | None"], None]


_SINK: ContextVar[Sink | None] = ContextVar("flowlaws_progress_sink", default=None)


REPORT_EVERY_S = 0.1


def track(iterable: Iterable[Item], *, desc: str | None = None, total: int | None = None,
          enabled: bool = True) -> Iterable[Item]:
    """``iterable``, with a tqdm bar when ``enabled`` or with reports to the active sink."""
    sink = _SINK.get()
    if sink is None:
        return tqdm(iterable, desc=desc, total=total, disable=not enabled)
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


@contextmanager
def report_to(sink: Sink) -> Iterator[None]:
    """Within the block, every :func:`track` loop of this thread reports to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)
