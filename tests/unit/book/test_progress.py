"""Tests of flowlaws.book.progress, against answers known in advance."""

from __future__ import annotations

import threading

from flowlaws.book import progress
from flowlaws.book.progress import report_to, track


def test_without_a_sink_track_yields_every_item():
    assert list(track(range(5), desc="x", enabled=False)) == [0, 1, 2, 3, 4]


def test_inside_report_to_the_sink_hears_start_and_end(monkeypatch):
    monkeypatch.setattr(progress, "REPORT_EVERY_S", 0.0)
    heard = []
    with report_to(lambda desc, done, total: heard.append((desc, done, total))):
        assert list(track(range(3), desc="steps", enabled=False)) == [0, 1, 2]
    assert heard[0] == ("steps", 0, 3) and heard[-1] == ("steps", 3, 3)
    assert list(track(range(2), enabled=False)) == [0, 1] and len(heard) == 5, "sink left set"


def test_another_thread_does_not_report_to_this_threads_sink():
    heard = []

    def other():
        list(track(range(3), desc="other", enabled=False))

    with report_to(lambda *a: heard.append(a)):
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
    assert heard == []


def test_a_static_build_draws_no_bar_but_still_yields_and_reports(monkeypatch):
    monkeypatch.setenv(progress.STATIC_BUILD_ENV, "1")
    assert progress.static_build()
    bar = track(range(3), desc="x")
    assert getattr(bar, "disable", False), "a static build must not draw a bar"
    assert list(bar) == [0, 1, 2]
    manual = progress.bar(total=3, desc="x")
    assert manual.disable
    manual.close()
    heard = []
    with report_to(lambda *a: heard.append(a)):
        assert list(track(range(2))) == [0, 1]
    assert heard, "a live figure's sink still hears in a static build"


def test_outside_a_static_build_an_enabled_loop_draws_its_bar(monkeypatch):
    monkeypatch.delenv(progress.STATIC_BUILD_ENV, raising=False)
    assert not progress.static_build()
    monkeypatch.setenv(progress.STATIC_BUILD_ENV, "0")
    assert not progress.static_build()
    bar = track(range(3), desc="x")
    assert not bar.disable and list(bar) == [0, 1, 2]
    assert track(range(3), enabled=False).disable
