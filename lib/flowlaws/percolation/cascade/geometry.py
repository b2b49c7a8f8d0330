"""Is the spacing of the detected levels geometric? The part of the cascade test that makes
"cascade" mean discrete scale invariance (issue 24).

The run-level null of :mod:`flowlaws.percolation.cascade.statistic` is rejected by any shared
level structure: evenly spaced levels, levels at random positions, two shared transitions. A
cascade is more: levels at ``p_n = p_c − s·d·λ^{−n}`` (``s = ±1`` the direction). Given the
persistent peaks' positions ``p_n`` and bootstrap spreads ``σ_n``, :func:`geometry_test` fits
that law by weighted least squares (``p_c``, ``d``, ``λ`` free; with an independently measured
``p_c ± p_c_err`` it enters as one more residual, ``(p_c − p_c_obs)/p_c_err``) and passes the
levels as geometric only when all of these hold (thresholds in
:mod:`flowlaws.percolation.cascade.config`, declared before any run):

1. at least four levels, or three with an independent ``p_c`` (three points fit any geometric
   law exactly when ``p_c`` is free: :data:`THREE_LEVELS` is the verdict's reason then);
2. ``λ̂`` inside :data:`~flowlaws.percolation.cascade.config.LAM_GEOM` and its 95 % interval
   excludes 1 (the spacings shrink, significantly);
3. ``p_c`` beyond the last level, by at most
   :data:`~flowlaws.percolation.cascade.config.PC_REACH` times the levels' span;
4. the χ² of the residuals, ``n − 3`` degrees of freedom (``n − 2`` with ``p_c`` given), has
   p-value ≥ :data:`~flowlaws.percolation.cascade.config.GOF_LEVEL`;
5. no other shared level stands off the fitted ladder anywhere in the window
   (:func:`off_ladder`): every local maximum of ``R`` at least ``Z_PEAK σ_R`` prominent whose
   prominence in ``Var(C)`` (a level's height in ``Var C`` does not fall as ``⟨C⟩`` grows, as in
   ``R``) is at least :data:`~flowlaws.percolation.cascade.config.LEVEL_FRAC` of the weakest
   fitted level's lies within ``±TOOTH_TOL`` of a period of a rung ``p_c − s·d·λ^{−n}``
   (any integer ``n``) in ``ln|p − p_c|``. Without it the comb would pick the most geometric
   four of six random levels.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats
from scipy.signal import find_peaks, peak_prominences

from flowlaws.percolation.cascade.config import GOF_LEVEL, LAM_GEOM, LEVEL_FRAC, PC_REACH

__all__ = ["THREE_LEVELS", "GeometryFit", "fit_geometric", "geometry_test", "off_ladder"]

THREE_LEVELS = "three levels cannot show geometry without an independent p_c"
_Z = 1.959963984540054


@dataclass(frozen=True)
class GeometryFit:
    """The geometric fit of ``n`` levels and its verdict.

    ``geometric``: all four rules of the module docstring hold; ``reason``: the first rule that
    failed (empty when geometric); ``lam``, ``lam_err``, ``p_c``, ``p_c_err``: fit and standard
    errors (NaN without a fit); ``chi2``, ``dof``, ``gof_p``: goodness of fit; ``n_levels``.
    """

    geometric: bool
    reason: str
    lam: float
    lam_err: float
    p_c: float
    p_c_err: float
    chi2: float
    dof: int
    gof_p: float
    n_levels: int
    direction: int = 0


def _model(theta: np.ndarray, k: np.ndarray, s: float) -> np.ndarray:
    p_c, log_d, log_lam = theta
    return p_c - s * np.exp(log_d - k * log_lam)


def fit_geometric(peaks: np.ndarray, sigma: np.ndarray, *, p_c: float | None = None,
                  p_c_err: float | None = None) -> tuple[np.ndarray, np.ndarray, float, float]:
    """``(theta, cov, chi2, direction)``: weighted least squares of ``p_n = p_c − s·e^{a −
    n ln λ}`` on ``peaks`` ``(n,)`` with spreads ``sigma`` ``(n,)`` (same units as ``p``),
    ``theta = (p_c, a, ln λ)``, ``cov`` its Gauss–Newton covariance, ``direction`` ``s``: +1
    when the spacings shrink as ``p`` grows. With ``p_c`` (and ``p_c_err > 0``) given, it enters
    as one more residual."""
    x = np.sort(np.asarray(peaks, dtype=float))
    sig = np.maximum(np.asarray(sigma, dtype=float)[np.argsort(peaks)], 1e-12)
    gaps = np.diff(x)
    s = 1.0 if gaps[-1] < gaps[0] else -1.0
    if s < 0:
        x, sig = x[::-1], sig[::-1]
    k = np.arange(len(x), dtype=float)
    lam0 = max(float(np.exp(np.mean(-np.diff(np.log(np.abs(np.diff(x))))))), 1.05)
    pc0 = x[-1] + s * abs(x[-1] - x[-2]) / (lam0 - 1) if p_c is None else p_c
    d0 = max(abs(pc0 - x[0]), 1e-9)
    prior = p_c is not None

    def resid(theta):
        r = (x - _model(theta, k, s)) / sig
        return np.append(r, (theta[0] - p_c) / p_c_err) if prior else r

    fit = optimize.least_squares(resid, [pc0, np.log(d0), np.log(lam0)], method="lm",
                                 max_nfev=2000)
    J = fit.jac
    try:
        cov = np.linalg.inv(J.T @ J)
    except np.linalg.LinAlgError:
        cov = np.full((3, 3), np.inf)
    return fit.x, cov, float(np.sum(fit.fun ** 2)), s


def geometry_test(peaks: np.ndarray, sigma: np.ndarray, *, p_c: float | None = None,
                  p_c_err: float | None = None) -> GeometryFit:
    """Are ``peaks`` ``(n,)`` (positions in ``p``, bootstrap spreads ``sigma``) geometrically
    spaced? Rules: module docstring. ``p_c ± p_c_err``: an independently measured critical
    point (``p_c_err > 0`` required with it)."""
    peaks = np.asarray(peaks, dtype=float)
    n = len(peaks)
    nan = float("nan")
    need = 3 if p_c is not None else 4
    if p_c is not None and not (p_c_err is not None and np.isfinite(p_c_err) and p_c_err > 0
                                and np.isfinite(p_c)):
        raise ValueError(f"p_c_err must be a finite number > 0 with p_c (got p_c = {p_c!r}, "
                         f"p_c_err = {p_c_err!r})")
    if n < need:
        why = (THREE_LEVELS if n == 3 else f"{n} level(s): at least {need} are needed")
        return GeometryFit(False, why, nan, nan, nan, nan, nan, 0, nan, n)
    theta, cov, chi2, s = fit_geometric(peaks, sigma, p_c=p_c, p_c_err=p_c_err)
    lam = float(np.exp(theta[2]))
    lam_err = float(lam * np.sqrt(max(cov[2, 2], 0.0)))
    pc, pc_err = float(theta[0]), float(np.sqrt(max(cov[0, 0], 0.0)))
    dof = n - 3 + (p_c is not None)
    gof = float(stats.chi2.sf(chi2, dof)) if dof > 0 else nan
    span = float(np.ptp(peaks))
    last = float(peaks.max() if s > 0 else peaks.min())
    beyond = s * (pc - last)
    if not (LAM_GEOM[0] <= lam <= LAM_GEOM[1]) or not np.isfinite(lam_err):
        why = f"λ̂ = {lam:.3g} outside the declared range {LAM_GEOM}"
    elif lam - _Z * lam_err <= 1:
        why = f"λ̂ = {lam:.3g} ± {lam_err:.2g}: its 95 % interval does not exclude 1"
    elif not 0 < beyond <= PC_REACH * span:
        why = (f"p_c = {pc:.4g} is not beyond the last level by at most {PC_REACH:g} × the "
               f"levels' span {span:.3g}")
    elif not gof >= GOF_LEVEL:
        why = (f"spacing not geometric: χ² = {chi2:.3g} on {dof} dof, p = {gof:.3g} < "
               f"{GOF_LEVEL:g}")
    else:
        why = ""
    return GeometryFit(not why, why, lam, lam_err, pc, pc_err, chi2, dof, gof, n, int(s))


def off_ladder(p: np.ndarray, C: np.ndarray, R: np.ndarray, se: np.ndarray, peaks: np.ndarray,
               fit: GeometryFit, *, z_peak: float, tooth_tol: float, min_gap: int
               ) -> np.ndarray:
    """Positions ``(k,)`` of the shared levels of ``C`` ``(n_runs, n_points)`` over ``p``
    (``R`` and its standard error ``se``) that stand off the ladder of ``fit`` (rule 5 of the
    module docstring; levels within ``min_gap`` grid steps of ``p_c`` are not read:
    ``ln|p − p_c|`` diverges there)."""
    idx, props = find_peaks(R, prominence=0.0)
    if len(idx) == 0 or not np.isfinite(fit.lam):
        return np.zeros(0)
    V = np.asarray(C, dtype=float).var(axis=0)
    with warnings.catch_warnings():  # a maximum of R on a flat stretch of Var C: prominence 0
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's PeakPropertyWarning
        v_prom = peak_prominences(V, idx)[0]
    own = [int(np.argmin(np.abs(p[idx] - q))) for q in peaks]
    floor = LEVEL_FRAC * v_prom[own].min()
    strong = (v_prom >= floor) & (props["prominences"] >= z_peak * se[idx])
    strong[own] = False
    dp = float(np.median(np.diff(p)))
    dist = np.abs(p[idx] - fit.p_c)
    far = dist > min_gap * dp
    cand = idx[strong & far]
    if not len(cand):
        return np.zeros(0)
    period = np.log(fit.lam)
    ref = np.log(abs(fit.p_c - peaks[0]))
    phase = (np.log(np.abs(p[cand] - fit.p_c)) - ref) / period
    off = np.abs(phase - np.round(phase)) > tooth_tol
    return p[cand[off]]
