"""Why the cascade test's power is what it is: one planted cascade, shown step by step.

The cascade test (:func:`flowlaws.percolation.cascade.judge.judge_cascade`) measures its power by
injection: it adds a planted cascade (levels at the claimed λ, each a jump of the runs' own
median size, jittered per run) to the observed runs and asks whether the same test finds it.
:func:`worked_injection` does this once, on an ensemble the reader has, and keeps everything
the test looks at: the runs before and after, ``R`` and its standard error ``σ_R`` before and
after, the rise of ``R`` at each planted level against the ``Z_PEAK σ_R`` that a persistent peak
must clear, the permutation p-value and the persistent peaks. :func:`plot_injection` draws it
and :meth:`InjectionExample.lines` says it in words: a level raises ``R`` only while the runs
straddle it, by about ``jump² × (share of runs past it) × (share not yet) / mean²``; when that
rise is small against ``σ_R`` (many runs, large mean, small jumps), no test can find the
cascade, and the power measured over many injections is low for that reason.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from flowlaws.book.style import COLUMN_INCHES
from flowlaws.percolation.cascade.detect import (
    Z_PEAK,
    inject_cascade,
    persistent_peaks,
    typical_jump,
)
from flowlaws.percolation.cascade.statistic import (
    N_TEETH,
    comb_grid,
    permutation_test,
    relative_variance_se,
)
from flowlaws.percolation.cascade.variance import finite_runs

__all__ = [
    "InjectionExample",
    "plot_injection",
    "worked_injection",
]


@dataclass
class InjectionExample:
    """One planted cascade and what the cascade test saw (shapes: ``n_runs`` runs, ``P`` points,
    ``L`` levels)."""

    p: np.ndarray  # (P,) the control parameter (training step)
    C: np.ndarray  # (n_runs, P) the observed order parameter
    planted: np.ndarray  # (n_runs, P) the same runs with the planted cascade
    levels: np.ndarray  # (L,) planted level positions, far from p_c to near
    p_c: float
    lam: float
    jump: float  # the planted jump (the runs' median jump)
    R: np.ndarray  # (P,) relative variance of C
    se: np.ndarray  # (P,) its standard error σ_R
    R_planted: np.ndarray  # (P,)
    se_planted: np.ndarray  # (P,)
    rise: np.ndarray  # (L,) the largest rise of R at each level, R_planted − R
    ceiling: np.ndarray  # (L,) jump² / (4 m²), m the planted mean there: the most a level adds
    need: np.ndarray  # (L,) Z_PEAK σ_R there: what a persistent peak must clear
    p_value: float
    alpha: float
    peaks: np.ndarray  # positions of the persistent peaks the test found
    found: bool

    def lines(self) -> list[str]:
        """What happened, in four lines, every number from this example."""
        clears = int(np.sum(self.rise > self.need))
        ratios = ", ".join(f"{r / n:.2g}" if n > 0 else "∞" for r, n in zip(
            self.rise, self.need, strict=True))
        verdict = "found" if self.found else "missed"
        return [
            f"planted: {len(self.levels)} levels at λ = {self.lam:g} toward p_c = "
            f"{self.p_c:.4g}, each a jump of {self.jump:.3g} (the runs' median jump) in each of "
            f"{len(self.C)} runs",
            f"a level adds at most jump²/(4m²) to R (half the runs past it, m the mean there): "
            f"{', '.join(f'{c:.2g}' for c in self.ceiling)}; measured change of R: "
            f"{', '.join(f'{r:+.2g}' for r in self.rise)} (the planted jumps also raise m)",
            f"against the bar a persistent peak must clear, {Z_PEAK:g} σ_R (median σ_R "
            f"{np.median(self.se_planted):.2g}): {ratios}; {clears} of {len(self.levels)} levels "
            f"clear it",
            f"the test: p = {self.p_value:.3f} (α = {self.alpha:g}), "
            f"{_peaks(len(self.peaks))} ({N_TEETH} needed): this cascade is {verdict}; the power "
            f"is the share of such injections that are found",
        ]


def _peaks(n: int) -> str:
    return f"{n} persistent peak{'' if n == 1 else 's'}"


def worked_injection(C: np.ndarray, p: np.ndarray, *, lam: float = 2.0, seed: int = 0,
                     alpha: float = 0.05, n_null: int = 99, n_boot: int = 100,
                     jitter: float = 0.1, jump: float | None = None,
                     direction: int | None = None) -> InjectionExample:
    """Plant one cascade in ``C`` ``(n_runs, P)`` over ``p`` ``(P,)`` and run the cascade
    test's two checks on it (the permutation p-value and the persistent peaks), as
    :func:`~flowlaws.percolation.cascade.judge.injection_power` does for each of its
    injections. Diverged (NaN) runs are dropped first. ``jump``: the planted jump (default:
    the runs' median jump); the other arguments are those of the power estimate.
    """
    C, p = finite_runs(np.asarray(C, dtype=float)), np.asarray(p, dtype=float)
    if C.ndim != 2 or C.shape[1] != len(p) or len(C) < 2:
        raise ValueError(f"C must be (n_runs >= 2 finite runs, len(p) = {len(p)}), "
                         f"got {C.shape}")
    rng = np.random.default_rng([seed, 1])
    planted, levels, p_c = inject_cascade(C, p, rng, lam=lam, jitter=jitter, jump=jump,
                                          direction=direction)
    R, se = relative_variance_se(C)
    R_planted, se_planted = relative_variance_se(planted)
    spacing = np.abs(np.diff(np.append(levels, p_c)))
    rise, need, ceiling = (np.zeros(len(levels)) for _ in range(3))
    size = typical_jump(C) if jump is None else float(jump)
    for k, (level, gap) in enumerate(zip(levels, spacing, strict=True)):
        near = np.abs(p - level) <= max(0.5 * gap, float(np.median(np.diff(p))))
        at = np.flatnonzero(near)[np.argmax((R_planted - R)[near])]
        rise[k], need[k] = (R_planted - R)[at], Z_PEAK * se_planted[at]
        mean = float(np.abs(planted[:, at].mean()))
        ceiling[k] = size**2 / (4 * mean**2) if mean > 0 else np.inf
    grid = comb_grid(p)
    p_value, _, _, comb = permutation_test(planted, grid, n_null, rng)
    peaks, _ = persistent_peaks(planted, p, comb, n_boot=n_boot, rng=rng)
    return InjectionExample(
        p=p, C=C, planted=planted, levels=levels, p_c=p_c, lam=lam,
        jump=size, R=R, se=se, R_planted=R_planted, se_planted=se_planted, rise=rise,
        ceiling=ceiling, need=need,
        p_value=p_value, alpha=alpha, peaks=peaks,
        found=bool(p_value <= alpha and len(peaks) >= N_TEETH))


def plot_injection(example: InjectionExample, n_show: int = 6,
                   x_label: str = "SGD step") -> plt.Figure:
    """Top: ``n_show`` runs before (grey) and after the planting (colour), the levels as
    dashed lines. Bottom: ``R`` before and after, the band ``R ± Z_PEAK σ_R`` of the planted
    runs, and the persistent peaks the test found (triangles)."""
    e = example
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(COLUMN_INCHES, 5.4), sharex=True,
                                      layout="constrained")
    for k in range(min(n_show, len(e.C))):
        top.plot(e.p, e.C[k], color="0.7", lw=0.8)
        top.plot(e.p, e.planted[k], lw=1.0, color=f"C{k % 6}")
    for ax in (top, bottom):
        for level in e.levels:
            ax.axvline(level, color="0.3", ls="--", lw=0.8)
        ax.axvline(e.p_c, color="0.3", ls=":", lw=1.0)
    top.set(ylabel="$C_{\\max}$", title=f"{min(n_show, len(e.C))} of {len(e.C)} runs: as "
            f"trained (grey), with a planted λ = {e.lam:g} cascade (colour)")
    bottom.fill_between(e.p, e.R_planted - Z_PEAK * e.se_planted,
                        e.R_planted + Z_PEAK * e.se_planted, color="C1", alpha=0.2, lw=0,
                        label=f"planted R ± {Z_PEAK:g} σ_R")
    bottom.plot(e.p, e.R, color="0.5", lw=1.0, label="R as trained")
    bottom.plot(e.p, e.R_planted, color="C1", lw=1.2, label="R with the planted cascade")
    if len(e.peaks):
        bottom.plot(e.peaks, np.interp(e.peaks, e.p, e.R_planted), "v", color="C3", ms=8,
                    label="persistent peaks found")
    verdict = "found" if e.found else "missed"
    bottom.set(xlabel=x_label, ylabel="$R$",
               title=f"the test: p = {e.p_value:.3f}, {_peaks(len(e.peaks))}: {verdict}")
    bottom.legend(loc="best", fontsize=8)
    return fig
