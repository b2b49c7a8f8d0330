"""Chunks scored on threads: in order, bounded, and the same result for any thread count."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from flowlaws.common import threads
from flowlaws.percolation.cascade import detect, statistic
from flowlaws.percolation.toys.cascades import planted_ensemble, random_staircases


def test_results_come_back_in_order_and_items_are_drawn_in_this_thread(monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, "3")
    drawn_in, used = [], set()

    def items():
        for k in range(10):
            drawn_in.append(threading.get_ident())
            yield k

    def square(k):
        used.add(threading.get_ident())
        return k * k

    assert threads.map_in_threads(square, items(), n_items=10) == [k * k for k in range(10)]
    assert set(drawn_in) == {threading.get_ident()}
    assert threading.get_ident() not in used


def test_the_thread_count_is_capped_by_the_tasks_and_the_environment(monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, "4")
    assert threads.thread_count(2) == 2 and threads.thread_count(9) == 4
    monkeypatch.delenv(threads.THREADS_ENV)
    assert 1 <= threads.thread_count(1000) <= (threads.os.cpu_count() or 1)
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(threads.THREADS_ENV, bad)
        with pytest.raises(ValueError, match=threads.THREADS_ENV):
            threads.thread_count(4)


@pytest.mark.parametrize("kind", ["staircases", "planted"])
def test_the_permutation_test_and_its_bootstrap_do_not_depend_on_the_threads(monkeypatch, kind):
    p = np.linspace(0, 1, 512)
    if kind == "staircases":
        C = random_staircases(32, 512, np.random.default_rng(3), "uniform")[0]
    else:
        C = planted_ensemble(p, 32, p_c=0.9, lam=2.0, first=0.2, n_levels=4, jitter=0.05,
                             noise=0.0, seed=3)
    grid, results = statistic.comb_grid(p), []
    for n in ("1", "3"):
        monkeypatch.setenv(threads.THREADS_ENV, n)
        rng = np.random.default_rng(9)
        p_value, score, null, comb = statistic.permutation_test(C, grid, 99, rng)
        peaks, spread = detect.persistent_peaks(C, p, comb, n_boot=50, rng=rng)
        results.append((p_value, score, null, peaks, spread, rng.random()))
    one, three = results
    assert one[:2] == three[:2] and one[-1] == three[-1]  # the generator ends in one state
    for a, b in zip(one[2:5], three[2:5], strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(one[2]) == 99
