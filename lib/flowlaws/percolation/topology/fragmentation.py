"""Reactive fragmentation: merged neurons that split again after a task switch, and how often.

:func:`task_switch` trains, switches task and counts the splits in each run's Reeb graph;
:func:`split_fraction` and :func:`split_difference` give the fraction of runs that split and a
difference of two such fractions with score intervals over the runs, and
:func:`fragmentation_verdict` the three-way verdict of a switch against a control, and
:func:`cause_verdict` the verdict on what makes runs split (more curvature, less noise);
:func:`first_split_times` and :func:`median_shift` compare *when* runs split, which still moves
when every run splits.

Explained in: book/02_percolation/09_fragmentation.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import binomtest, bootstrap

from flowlaws.book.cache import stored_type
from flowlaws.book.ledger import verdict_of_all
from flowlaws.percolation.dynamics.ensemble import TwoLayerShape, split_params
from flowlaws.percolation.dynamics.sgd import sgd_discrete
from flowlaws.percolation.topology.clusters import DEFAULT_TOL
from flowlaws.percolation.topology.reeb import reeb_events, reeb_from_checkpoints

__all__ = [
    "SwitchResult",
    "task_switch",
    "split_fraction",
    "split_difference",
    "fragmentation_verdict",
    "difference_text",
    "cause_verdict",
    "first_split_times",
    "median_shift",
]


@stored_type
@dataclass
class SwitchResult:
    """What :func:`task_switch` recorded: ``times`` ``(T,)``, ``states`` ``(T, R, dim)``,
    ``switch_time``, one Reeb graph per run (``reeb``), and per run the splits and merges
    after the switch (``splits``, ``merges``: lists of
    :class:`flowlaws.percolation.topology.reeb.ReebEvent`)."""

    times: np.ndarray
    states: torch.Tensor
    switch_time: float
    reeb: list
    splits: list
    merges: list

    @property
    def n_splits(self) -> np.ndarray:
        """``(R,)`` number of split events after the switch, per run."""
        return np.array([len(s) for s in self.splits])


def task_switch(theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor,
                Y_before: torch.Tensor, Y_after: torch.Tensor, *, lr: tuple[float, float],
                batch_size: tuple[int, int], n_steps: tuple[int, int], record_every: int = 10,
                seed: int = 0, tol: float = DEFAULT_TOL) -> SwitchResult:
    """SGD on task A (targets ``Y_before``), then on task B (``Y_after``), with a Reeb graph.

    ``lr``, ``batch_size`` and ``n_steps`` are ``(before, after)`` pairs; a larger batch or
    a smaller ``lr`` after the switch means less noise, a teacher with stronger, more
    distinct neurons means more curvature. Merged neurons that split again after the switch
    are the Reeb graph's split events with a time after the switch (reactive fragmentation).
    Shapes: ``theta0`` ``(R, dim)``, ``X`` ``(N, n_in)``, ``Y_*`` ``(N, n_out)``.
    """
    a = sgd_discrete(theta0, shape, X, Y_before, lr=lr[0], batch_size=batch_size[0],
                     n_steps=n_steps[0], seed=seed, record_every=record_every)
    b = sgd_discrete(a.final, shape, X, Y_after, lr=lr[1], batch_size=batch_size[1],
                     n_steps=n_steps[1], seed=seed + 1, record_every=record_every)
    # the Reeb graph's time is SGD's time lr · step, which the two phases count at their own lr
    times_a, times_b = lr[0] * a.steps.astype(float), lr[1] * b.steps.astype(float)
    t_switch = float(times_a[-1])
    times = np.concatenate([times_a, t_switch + times_b[1:]])
    states = torch.cat([a.states, b.states[1:]])
    graphs, splits, merges = [], [], []
    for r in range(states.shape[1]):
        V, U = split_params(states[:, r], shape)
        G = reeb_from_checkpoints(V, U, times, tol)
        events = [e for e in reeb_events(G) if e.time > t_switch]
        graphs.append(G)
        splits.append([e for e in events if e.kind == "split"])
        merges.append([e for e in events if e.kind == "merge"])
    return SwitchResult(times, states, t_switch, graphs, splits, merges)


def split_fraction(n_splits: np.ndarray | list[int], level: float = 0.95
                   ) -> tuple[float, float, float]:
    """``(f, lo, hi)``: the fraction ``f`` of runs with at least one split (``n_splits`` ``(R,)``
    splits per run) and its Wilson score interval at ``level`` over the runs
    (``scipy.stats.binomtest``)."""
    split = np.asarray(n_splits) > 0
    if split.size == 0:
        raise ValueError("n_splits is empty: no run to count")
    ci = binomtest(int(split.sum()), int(split.size)).proportion_ci(level, method="wilson")
    return float(split.mean()), float(ci.low), float(ci.high)


def split_difference(first: np.ndarray | list[int], second: np.ndarray | list[int],
                     level: float = 0.95) -> tuple[float, float, float]:
    """``(d, lo, hi)``: ``d`` = split fraction of ``second`` minus that of ``first`` (two
    independent groups of runs, splits per run) with Newcombe's hybrid score interval at
    ``level``, built from the two Wilson intervals (Newcombe 1998, method 10; scipy has no
    interval for a difference of two proportions)."""
    p1, l1, u1 = split_fraction(second, level)
    p2, l2, u2 = split_fraction(first, level)
    d = p1 - p2
    return (d, d - float(np.hypot(p1 - l1, u2 - p2)), d + float(np.hypot(u1 - p1, p2 - l2)))


def fragmentation_verdict(switch: np.ndarray | list[int], control: np.ndarray | list[int], *,
                          level: float = 0.95, smallest: float = 0.2) -> str:
    """Does a task switch split merged pairs (splits per run after the switch) more often than a
    switch to the same task (``control``)? ``"holds"`` when the interval of the difference
    (:func:`split_difference`) lies above 0, ``"fails"`` when it lies below ``smallest`` (the
    switch splits at most that many more runs: no effect worth the name), else
    ``"inconclusive at this size"``."""
    _, lo, hi = split_difference(control, switch, level)
    return "holds" if lo > 0 else "fails" if hi < smallest else "inconclusive at this size"


def difference_text(first: np.ndarray | list[int], second: np.ndarray | list[int],
                    level: float = 0.95) -> str:
    """:func:`split_difference` as ``"+0.97 [+0.80, +0.99]"``."""
    d, lo, hi = split_difference(first, second, level)
    return f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def cause_verdict(splits: dict[tuple[float, int], np.ndarray], *, batch_after: int,
                  level: float = 0.95, smallest: float = 0.2, room: bool = True
                  ) -> tuple[str, str]:
    """``(verdict, number)`` on "less noise and more curvature split the runs", from
    ``splits[(scale, batch)]`` ``(R,)`` (splits per run after a switch to a teacher of that scale
    trained at that batch size).

    Curvature: the largest scale against the smallest at ``batch_after``
    (:func:`fragmentation_verdict`). Less noise: the largest batch against the smallest, judged
    only at scales where under ``1 − smallest`` of the noisier runs split (elsewhere there is no
    room for an effect of ``smallest``). Both must hold (``flowlaws.book.ledger.verdict_of_all``).

    ``room=False``: the first rule of the claim (``flowlaws.book.rules``, written before the
    room rule, which came after the noise contrast had been seen at every scale): less noise is
    judged at every scale.
    """
    scales = sorted({s for s, _ in splits})
    b_lo, b_hi = min(b for _, b in splits), max(b for _, b in splits)
    lo_s, hi_s = scales[0], scales[-1]
    low, high = splits[lo_s, batch_after], splits[hi_s, batch_after]
    curvature = fragmentation_verdict(high, low, level=level, smallest=smallest)
    roomy = [s for s in scales
             if not room or split_fraction(splits[s, b_lo], level)[0] <= 1 - smallest]
    noise = {s: fragmentation_verdict(splits[s, b_hi], splits[s, b_lo], level=level,
                                      smallest=smallest) for s in roomy}
    number = (f"curvature x{hi_s:g} - x{lo_s:g}: {difference_text(low, high, level)} "
              f"({curvature}); less noise, batch {b_hi} - {b_lo}: "
              + (", ".join(f"x{s:g} {v}" for s, v in noise.items()) or "no scale with room")
              + (f" (scales where under {1 - smallest:.0%} of the noisier runs split)" if room
                 else " (every scale)"))
    return verdict_of_all([curvature, *noise.values()]), number


def first_split_times(result: SwitchResult) -> np.ndarray:
    """``(R,)`` time (``lr × step`` units) from the switch to each run's first split; NaN for a
    run that never splits."""
    return np.array([min(e.time for e in s) - result.switch_time if s else np.nan
                     for s in result.splits])


def median_shift(first: np.ndarray | list[float], second: np.ndarray | list[float], *,
                 level: float = 0.95, n_resamples: int = 2000, seed: int = 0
                 ) -> tuple[float, float, float]:
    """``(d, lo, hi)``: median of ``second`` minus median of ``first`` (NaN entries, runs that
    never split, left out) with a percentile bootstrap interval at ``level``, runs resampled
    within each group (``scipy.stats.bootstrap``). NaN everywhere when either group has fewer
    than 2 finite entries."""
    a, b = (np.asarray(x, dtype=float) for x in (first, second))
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < 2 or len(b) < 2:
        return float("nan"), float("nan"), float("nan")
    d = float(np.median(b) - np.median(a))
    if np.ptp(a) == 0 and np.ptp(b) == 0:  # every resample gives d: the interval is the point
        return d, d, d

    def shift(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.median(y, axis=axis) - np.median(x, axis=axis)

    res = bootstrap((a, b), shift, n_resamples=n_resamples, confidence_level=level,
                    method="percentile", random_state=np.random.default_rng(seed))
    return d, float(res.confidence_interval.low), float(res.confidence_interval.high)
