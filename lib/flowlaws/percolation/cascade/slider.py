"""A cascade verdict drawn on the book's sliders: the point of a slider figure (``R(p)``, the
cascade's levels, the other local maxima, the fitted ``p_c``) and its caption badge. The levels
are marked as "peaks of the cascade" only when the verdict is "cascade" (issue 24: a red peak
mark beside "no cascade" read as a cascade).

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import numpy as np

from flowlaws.book.sliders import SliderPoint
from flowlaws.percolation.cascade.judge import CascadeVerdict
from flowlaws.percolation.cascade.variance import find_variance_peaks

__all__ = ["badge", "unselected_maxima", "cascade_point"]


def badge(v: CascadeVerdict) -> str:
    """The slider's caption: verdict, λ ± error, p-value and power."""
    return (f"{v.verdict}: {v.lam_text()} (mean field 2), p = {v.p_value:.3f}, "
            f"{v.power_text()}")


def unselected_maxima(x: np.ndarray, R: np.ndarray, peaks: np.ndarray) -> np.ndarray:
    """``(J, 2)`` the local maxima ``(p, R)`` of ``R`` over ``x`` that the raw detector sees
    (:func:`~flowlaws.percolation.cascade.variance.find_variance_peaks`, its defaults) and that
    are not among ``peaks`` (more than 2 grid steps from every one)."""
    x, R = np.asarray(x, dtype=float), np.asarray(R, dtype=float)
    if len(x) < 3 or not np.isfinite(R).all():
        return np.zeros((0, 2))
    found = find_variance_peaks(R, x)
    peaks = np.asarray(peaks, dtype=float)
    step = float(np.median(np.abs(np.diff(x))))
    far = [not len(peaks) or np.abs(peaks - q).min() > 2 * step for q in found.p]
    return np.c_[found.p[far], R[found.index[far]]] if any(far) else np.zeros((0, 2))


def cascade_point(v: CascadeVerdict, *, prefix: str = "", label: str = "R") -> SliderPoint:
    """The slider figure's point for a verdict: the curve ``R`` over ``x``; the levels as
    "peaks of the cascade" when the verdict is "cascade" (else they join the other local
    maxima); the fitted ``p_c`` as a vertical line (a second curve through two points at
    ``x = p_c``) for a cascade; :func:`badge` as caption."""
    x, R = np.asarray(v.x, dtype=float), np.asarray(v.R, dtype=float)
    cascade = v.verdict == "cascade"
    peaks = np.asarray(v.peaks, dtype=float) if cascade else np.zeros(0)
    marks = np.c_[peaks, np.interp(peaks, x, R)] if len(peaks) else np.zeros((0, 2))
    others = unselected_maxima(x, R, peaks)
    curves = {label: R}
    if cascade and np.isfinite(v.p_c):
        at = int(np.searchsorted(x, v.p_c))
        inside = np.interp(v.p_c, x, R, left=np.nan, right=np.nan)
        x = np.insert(x, at, [v.p_c, v.p_c])
        curves = {label: np.insert(R, at, [inside, inside]),
                  "fitted p_c": np.insert(np.full(len(R), np.nan), at, [0.0, float(R.max())])}
    return SliderPoint(x=x, curves=curves, marks=marks, caption=prefix + badge(v),
                       others=others, mark_labels=("peaks of the cascade",
                                                   "other local maxima"))
