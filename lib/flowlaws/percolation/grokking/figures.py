"""The grokking chapter's figures: an ensemble's accuracy as bands, its relative variance.

:func:`plot_accuracy_bands` draws an ensemble's train and test accuracy as the median over runs
with a band between two quantiles, and a marker at each run's own grokking step: 32 overlaid
noisy curves hide the delay that the median and the markers show. :func:`plot_variance_panels`
draws the relative variance ``R`` of each order parameter against the training step and against
the steps after each run's grokking; a value at the first record far above the rest (every run
starts alike, so ``R`` there is the noise of a small mean) is left off the scale and written
beside the axis instead of squashing the curve.

Explained in: book/02_percolation/07_grokking.ipynb
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from flowlaws.book.style import COLUMN_INCHES
from flowlaws.percolation.cascade.variance import relative_variance

__all__ = [
    "plot_accuracy_bands",
    "plot_variance_panels",
    "variance_top",
]


def plot_accuracy_bands(
    steps: np.ndarray, train_acc: np.ndarray, test_acc: np.ndarray, grokked: np.ndarray, *,
    chance: float, band: tuple[float, float] = (0.1, 0.9), title: str | None = None,
) -> plt.Figure:
    """Median train and test accuracy over runs, a band between the ``band`` quantiles, and a
    marker at each run's grokking step.

    Args:
        steps: ``(T,)`` recorded training steps.
        train_acc, test_acc: ``(T, n_runs)`` accuracies in [0, 1].
        grokked: ``(n_runs,)`` each run's grokking step, NaN for a run that did not grok.
        chance: the accuracy of a guess, ``1/p`` (a dotted line).
        band: the lower and upper quantile of the band (0.1, 0.9: the middle 80 % of runs).
        title: the axes' title (default: the number of runs and the band).
    """
    steps = np.asarray(steps, dtype=float)
    train_acc, test_acc = np.asarray(train_acc, float), np.asarray(test_acc, float)
    grokked = np.asarray(grokked, dtype=float).reshape(-1)
    if train_acc.shape != test_acc.shape or train_acc.ndim != 2 or len(steps) != len(train_acc):
        raise ValueError(f"train_acc and test_acc must both be (T, n_runs) with T = len(steps) "
                         f"= {len(steps)}, got {train_acc.shape} and {test_acc.shape}")
    if len(grokked) != train_acc.shape[1]:
        raise ValueError(f"grokked must hold one step per run ({train_acc.shape[1]}), "
                         f"got {len(grokked)}")
    lo, hi = band
    if not 0.0 <= lo < 0.5 < hi <= 1.0:
        raise ValueError(f"band must be two quantiles lo < 0.5 < hi in [0, 1], got {band}")
    fig, ax = plt.subplots(figsize=(COLUMN_INCHES, 3.4), layout="constrained")
    for acc, name, colour, style in ((test_acc, "test", "C0", "-"),
                                     (train_acc, "train", "C1", "--")):
        q = np.nanquantile(acc, [lo, 0.5, hi], axis=1)
        ax.fill_between(steps, q[0], q[2], color=colour, alpha=0.2, lw=0)
        ax.plot(steps, q[1], style, color=colour, lw=1.6, label=f"{name} (median)")
    done = grokked[np.isfinite(grokked)]
    ax.plot(done, np.full(len(done), 1.04), "|", color="C2", ms=9, mew=1.2, clip_on=False,
            label=f"a run's grokking step ({len(done)} of {len(grokked)})")
    ax.axhline(chance, color="grey", lw=0.8, ls=":", label="chance")
    band_text = f"{100 * lo:.0f}–{100 * hi:.0f} % of runs shaded"
    ax.set(xlabel="training step", ylabel="accuracy", ylim=(-0.02, 1.08),
           title=title or f"{train_acc.shape[1]} runs: median, {band_text}")
    fig.legend(loc="outside lower center", ncol=4, fontsize=8)
    return fig


def variance_top(curves: Sequence[np.ndarray], *, head: int | None = None, margin: float = 1.15,
                 factor: float = 2.0) -> tuple[float | None, list[float]]:
    """The top of a y axis that shows every curve but a spike in its first ``head`` points.

    ``head`` defaults to the first 2 % of the longest curve's points (at least one): the early
    transient in which a few runs' order parameter leaves 1 while the mean is still near 1, so
    ``R`` spikes (3.1 at step 20 in II.7's reader preset). Returns ``(top, clipped)``: ``top`` is
    ``margin`` times the largest finite value after the first ``head`` points, and ``None`` (no
    clipping) unless some curve's first points exceed ``factor`` times that; ``clipped`` lists
    those first values, to be written beside the axis.
    """
    curves = [np.asarray(c, dtype=float) for c in curves]
    if head is None:
        head = max(1, int(0.02 * max((len(c) for c in curves), default=0)))
    rest = [c[head:][np.isfinite(c[head:])] for c in curves]
    body = max((r.max() for r in rest if r.size), default=np.nan)
    if not np.isfinite(body) or body <= 0:
        return None, []
    heads = [v for c in curves for v in c[:head] if np.isfinite(v) and v > factor * body]
    return (margin * body, heads) if heads else (None, [])


def plot_variance_panels(
    series: Mapping[str, tuple[np.ndarray, np.ndarray]], names: Sequence[str],
    hows: Sequence[str] = ("raw step", "aligned"),
) -> plt.Figure:
    """``R`` of each order parameter in ``names``, one panel per alignment in ``hows``.

    ``series`` maps ``"<name>, <how>"`` to ``(C, x)``: ``C`` is ``(n_runs, P)``, ``x`` its
    ``(P,)`` steps (or lags). A spike in the first points (:func:`variance_top`) is clipped and
    its value and step written in the panel, so the rest of the curve keeps the height of the axis.
    """
    fig, axes = plt.subplots(1, len(hows), figsize=(COLUMN_INCHES, 3.2), layout="constrained",
                             squeeze=False)
    for ax, how in zip(axes[0], hows, strict=True):
        drawn = []
        for name in names:
            if f"{name}, {how}" not in series:
                continue
            C, x = series[f"{name}, {how}"]
            R = relative_variance(C)
            ax.plot(x, R, label=name, lw=1)
            drawn.append((name, x, R))
        if not drawn:
            ax.text(0.5, 0.5, "fewer than two runs grokked:\nnothing to align", ha="center",
                    va="center", transform=ax.transAxes, color="0.4")
        top, _ = variance_top([R for _, _, R in drawn])
        if top is not None:
            lowest = min(float(np.nanmin(R)) for _, _, R in drawn)
            ax.set_ylim(bottom=min(0.0, lowest) - 0.02 * top, top=top)
            highest = [(n, x[int(np.nanargmax(R))], np.nanmax(R)) for n, x, R in drawn]
            where = ", ".join(f"{n} {r:.2g} at {at:g}" for n, at, r in highest if r > top)
            ax.annotate(f"↑ off scale: R = {where}",
                        xy=(0.02, 0.97), xycoords="axes fraction", va="top", fontsize=8)
        xlabel = "training step" if how == "raw step" else "steps after the run's grokking"
        ax.set(xlabel=xlabel, ylabel="$R$", title=how)
    axes[0][0].legend(loc="best")
    return fig
