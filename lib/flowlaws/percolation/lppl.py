"""A log-periodic power law (LPPL) fitted to a signal near a critical point.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

__all__ = [
    "lppl",
    "LPPLFit",
    "fit_lppl",
]


def lppl(p: np.ndarray, p_c: float, m: float, omega: float, linear: np.ndarray) -> np.ndarray:
    """``A + x^m (B + C₁ cos(ω ln x) + C₂ sin(ω ln x))`` with ``x = p_c − p`` (``p < p_c``)."""
    return _design(np.asarray(p, dtype=float), p_c, m, omega) @ np.asarray(linear)


def _design(p: np.ndarray, p_c: float, m: float, omega: float) -> np.ndarray:
    x = p_c - p
    xm, lx = x**m, np.log(x)
    return np.stack([np.ones_like(x), xm, xm * np.cos(omega * lx), xm * np.sin(omega * lx)], 1)


def _lppl_rss(params: np.ndarray, p: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    p_c, m, omega = params
    if p_c <= p.max():
        return np.inf, np.zeros(4)
    A = _design(p, p_c, m, omega)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    r = A @ coef - y
    return float(r @ r), coef


@dataclass
class LPPLFit:
    """Result of :func:`fit_lppl`: ``lam = exp(2π/ω)``, ``p_c``, exponent ``m``, angular
    log-frequency ``omega``, the four linear amplitudes ``linear`` ``(A, B, C₁, C₂)``, ``rss``
    and ``r2`` (coefficient of determination)."""

    lam: float
    p_c: float
    m: float
    omega: float
    linear: np.ndarray
    rss: float
    r2: float


def fit_lppl(
    p: np.ndarray, y: np.ndarray, *, p_c_range: tuple[float, float] | None = None,
    m_range: tuple[float, float] = (-1.0, 1.0), omega_range: tuple[float, float] = (2.0, 25.0),
    n_grid: int = 12,
) -> LPPLFit:
    """Fit a log-periodic power law to ``y(p)`` for ``p < p_c``.

    The four linear amplitudes are solved exactly (least squares) for every trial of the
    three non-linear parameters ``(p_c, m, ω)``; those are searched on an ``n_grid``-per-axis
    grid (``ω`` on a finer grid, it is the most multimodal) and refined by Nelder–Mead.
    ``p_c_range`` defaults to ``(max p + 1e-3·span, max p + 0.5·span)``.
    """
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    span = np.ptp(p)
    lo, hi = p_c_range or (p.max() + 1e-3 * span, p.max() + 0.5 * span)
    grid = [np.linspace(lo, hi, n_grid), np.linspace(*m_range, n_grid),
            np.linspace(*omega_range, 4 * n_grid)]
    trials = np.array(np.meshgrid(*grid, indexing="ij")).reshape(3, -1).T
    start = trials[np.argmin([_lppl_rss(t, p, y)[0] for t in trials])]
    res = optimize.minimize(lambda q: _lppl_rss(q, p, y)[0], start, method="Nelder-Mead",
                            options={"xatol": 1e-8, "fatol": 1e-14, "maxiter": 4000})
    rss, coef = _lppl_rss(res.x, p, y)
    p_c, m, omega = res.x
    tss = float(((y - y.mean()) ** 2).sum())
    return LPPLFit(float(np.exp(2 * np.pi / abs(omega))), float(p_c), float(m), float(abs(omega)),
                   coef, rss, 1 - rss / tss if tss > 0 else np.nan)
