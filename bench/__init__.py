"""Benchmarks: ratios measured side by side in one run (absolute times mean little here).

Each ``bench/bench_*.py`` module defines ``main() -> None`` that prints its own lines through
:func:`report`; ``python -m bench`` (``make bench``) runs them all.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def best_time(fn: Callable[[], object], repeat: int = 3) -> float:
    """The best of ``repeat`` wall-clock timings of ``fn()``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def report(name: str, fast_s: float, reference_s: float, target: str = "") -> None:
    """Print one benchmark line: both timings and their ratio, with the target if any."""
    ratio = reference_s / fast_s if fast_s > 0 else float("inf")
    print(f"{name:<58} {fast_s:9.4f} s  vs {reference_s:9.4f} s  ratio {ratio:8.1f}x  {target}")
