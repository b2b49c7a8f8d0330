"""Discrete scale invariance (DSI): variance cascades, their peaks and their scaling factor λ.

The order parameter ``C_max`` is measured over an ensemble of runs at each value of a control
parameter ``p``; its relative variance ``R(p) = Var(C_max)/⟨C_max⟩²`` peaks at the
micro-transitions. A DSI cascade is a sequence of peaks ``p₁ < p₂ < …`` approaching a
critical point ``p_c`` geometrically: ``p_n − p_c = λ⁻¹ (p_{n−1} − p_c)``.

This module: :func:`relative_variance`; peak detection (:func:`find_variance_peaks`, rule
below); :func:`estimate_lambda` (closed form for three peaks, weighted least squares on
``log|p_n − p_c|`` for more); the cascade detector (:func:`detect_cascade`). The seed's null
model is in :mod:`flowlaws.percolation.cascade.surrogates`; the test that chapters call, with a
run-level null, power and a three-way verdict, is
:func:`flowlaws.percolation.cascade.judge.judge_cascade`. The log-periodic fit is in
:mod:`flowlaws.percolation.lppl`, the toy models in :mod:`flowlaws.percolation.toys.cascades`.

**Prominence rule.** A local maximum of ``R`` counts as a peak when its prominence
(:func:`scipy.signal.find_peaks`) is at least ``prominence_factor × σ̂``, with ``σ̂`` a robust
noise scale: ``1.4826 · MAD(ΔR) / √2`` (the median absolute deviation of the first
differences; for white noise of standard deviation σ it estimates σ, and it ignores smooth
structure and a few large peaks), *and* its width at half prominence is at least
``min_width`` samples. Defaults ``prominence_factor = 5``, ``min_width = 4``: on white noise
of 1,024 points these leave about one spurious peak per signal (5σ and 4σ-and-4-samples
leave 1.1 and 4.5), so most noise signals do not even hold three peaks.

**Geometric cascade (detector).** Among the peaks in increasing ``p``, each consecutive triple
gives ``λ_j = (p_{j+1} − p_j)/(p_{j+2} − p_{j+1})``. A triple is geometric when
``LAM_RANGE[0] < λ_j < LAM_RANGE[1]`` (``1.2`` to ``10``: spacings shrink toward ``p_c``);
adjacent triples chain into one cascade when their ratios agree within a factor
``1 + RATIO_TOL`` (``RATIO_TOL = 0.5``). The cascade reported is the chain with the largest
smallest prominence (ties: the longer); its *score* is that prominence in units of ``σ̂``, and 0
when there is no cascade. Three peaks are the minimum: fewer give "no cascade", never a λ.

**Position uncertainties.** By default each peak's position has uncertainty equal to its half
width at half prominence (:func:`scipy.signal.peak_widths`), a conservative choice; for
ensemble data :func:`bootstrap_peak_sigma` resamples the runs instead.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
from scipy import optimize, signal

__all__ = [
    "finite_runs",
    "LAM_RANGE",
    "RATIO_TOL",
    "DEFAULT_PROMINENCE_FACTOR",
    "DEFAULT_MIN_WIDTH",
    "NoCascadeError",
    "relative_variance",
    "noise_scale",
    "Peaks",
    "find_variance_peaks",
    "LambdaEstimate",
    "estimate_lambda",
    "predict_p_c",
    "bootstrap_peak_sigma",
    "Cascade",
    "detect_cascade",
]


def finite_runs(C: torch.Tensor | np.ndarray) -> np.ndarray:
    """The rows of ``C`` ``(n_runs, T)`` whose run never diverged (no NaN or inf anywhere).

    The order parameter of a diverged run is NaN
    (:func:`flowlaws.percolation.topology.clusters.cmax`);
    a chapter drops those runs here and says how many it dropped.
    """
    C = np.asarray(C, dtype=float)
    return C[np.isfinite(C).all(axis=1)]


LAM_RANGE = (1.2, 10.0)


RATIO_TOL = 0.5


DEFAULT_PROMINENCE_FACTOR = 5.0


DEFAULT_MIN_WIDTH = 4.0


class NoCascadeError(ValueError):
    """Raised when fewer than three peaks are given: there is no cascade, hence no λ."""


def relative_variance(C: np.ndarray) -> np.ndarray:
    """``R(p) = Var(C)/⟨C⟩²`` over runs: ``C`` is ``(n_runs, n_p)``, result ``(n_p,)``.

    Population variance (``ddof = 0``); ``R = 0`` where the mean is 0.
    """
    C = np.asarray(C, dtype=float)
    if C.ndim != 2 or C.shape[0] < 2:
        raise ValueError(f"C must be (n_runs >= 2, n_p), got shape {C.shape}")
    diverged = int((~np.isfinite(C)).any(axis=1).sum())
    if diverged:
        raise ValueError(f"C holds NaN or inf for {diverged} of {C.shape[0]} runs (diverged "
                         "runs): drop them with finite_runs(C) and report how many")
    mean = C.mean(axis=0)
    var = C.var(axis=0)
    return np.divide(var, mean**2, out=np.zeros_like(mean), where=mean != 0)


def noise_scale(x: np.ndarray) -> float:
    """Robust white-noise scale ``1.4826 · MAD(Δx) / √2`` of a 1-D signal.

    A piecewise-constant signal (an integer order parameter over a modest ensemble) has
    ``MAD(Δx) = 0``; the scale then falls back to the Gaussian-consistent mean absolute
    deviation ``1.2533 · mean|Δx − median Δx| / √2``, which is zero only for a constant signal
    (otherwise every local maximum would pass a prominence threshold of ``k · 0``).
    """
    d = np.diff(np.asarray(x, dtype=float))
    spread = np.abs(d - np.median(d))
    mad = 1.4826 * np.median(spread)
    return float((mad if mad > 0 else 1.2533 * spread.mean()) / np.sqrt(2.0))


@dataclass
class Peaks:
    """Peaks of a signal: ``p`` positions, ``index`` in the signal, ``prominence``, ``sigma``
    (position uncertainty, half width at half prominence in ``p`` units), all ``(n_peaks,)``."""

    p: np.ndarray
    index: np.ndarray
    prominence: np.ndarray
    sigma: np.ndarray
    noise: float

    def __len__(self) -> int:
        return len(self.p)

    def select(self, keep: np.ndarray | slice) -> Peaks:
        """The sub-list ``keep`` (indices, mask or slice)."""
        return Peaks(self.p[keep], self.index[keep], self.prominence[keep], self.sigma[keep],
                     self.noise)


def find_variance_peaks(
    y: np.ndarray, p: np.ndarray, *, prominence_factor: float = DEFAULT_PROMINENCE_FACTOR,
    min_width: float = DEFAULT_MIN_WIDTH, noise: float | None = None,
) -> Peaks:
    """Peaks of ``y(p)`` with prominence ``≥ prominence_factor · σ̂`` (module docstring).

    Args:
        y, p: ``(n,)`` signal and increasing control parameter (uniform spacing not needed
            for detection; widths are converted with the local mean spacing).
        min_width: least width at half prominence, in samples.
        noise: the noise scale σ̂; by default :func:`noise_scale` of ``y``.
    """
    y, p = np.asarray(y, dtype=float), np.asarray(p, dtype=float)
    if y.shape != p.shape or y.ndim != 1:
        raise ValueError(f"y and p must be 1-D of equal length, got {y.shape} and {p.shape}")
    sigma_hat = noise_scale(y) if noise is None else float(noise)
    threshold = max(prominence_factor * sigma_hat, 1e-12 * max(np.ptp(y), 1e-300))
    idx, props = signal.find_peaks(y, prominence=threshold, width=min_width)
    widths = props["widths"]
    dp = np.gradient(p)[idx] if len(idx) else np.zeros(0)
    return Peaks(p[idx], idx, props["prominences"], 0.5 * widths * dp, sigma_hat)


class LambdaEstimate(NamedTuple):
    """``lam, p_c = est[:2]`` or ``est.lam``; uncertainties (1σ) ``lam_err``, ``p_c_err``
    (NaN when no uncertainty is available); ``n_peaks`` used; ``residual`` the rms misfit of
    the positions (0 for three peaks, an exact fit)."""

    lam: float
    p_c: float
    lam_err: float
    p_c_err: float
    n_peaks: int
    residual: float


def _three_peak(p: np.ndarray) -> tuple[float, float]:
    p1, p2, p3 = p
    return (p2 - p1) / (p3 - p2), (p2**2 - p1 * p3) / (2 * p2 - p1 - p3)


def _propagate(fn, p: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Linear error propagation of ``fn(p)`` (a vector) with independent errors ``sigma``."""
    h = 1e-6 * max(np.ptp(p), 1e-12)
    jac = np.stack([(np.asarray(fn(p + h * e)) - np.asarray(fn(p - h * e))) / (2 * h)
                    for e in np.eye(len(p))], axis=1)
    return np.sqrt((jac**2 * sigma**2).sum(axis=1))


def _profile(p_c: float, p: np.ndarray, sigma: np.ndarray) -> tuple[float, np.ndarray]:
    """Weighted LSQ of ``log|p_n − p_c| = a − n log λ``; weights ``|p_n − p_c|/σ_n``."""
    n = np.arange(len(p), dtype=float)
    x = np.abs(p - p_c)
    w = x / sigma
    A = np.stack([np.ones_like(n), -n], axis=1) * w[:, None]
    coef, *_ = np.linalg.lstsq(A, np.log(x) * w, rcond=None)
    resid = A @ coef - np.log(x) * w
    return float(resid @ resid), coef


def _many_peak(p: np.ndarray, sigma: np.ndarray) -> tuple[float, float, np.ndarray]:
    span = p[-1] - p[0]
    lo, hi = p[-1] + 1e-9 * span, p[-1] + 20 * span
    lam3, pc3 = _three_peak(p[-3:])
    grid = np.concatenate([np.geomspace(1e-6, 20, 200) * span + p[-1],
                           [pc3] if np.isfinite(pc3) and lo < pc3 < hi else []])
    start = grid[np.argmin([_profile(g, p, sigma)[0] for g in grid])]
    res = optimize.minimize_scalar(lambda c: _profile(c, p, sigma)[0], method="bounded",
                                   options={"xatol": 1e-13 * span},
                                   bounds=(max(lo, start - 0.5 * (start - p[-1])),
                                           min(hi, start + (start - p[-1]))))
    _, coef = _profile(res.x, p, sigma)
    return float(np.exp(coef[1])), float(res.x), coef


def _many_peak_errors(p: np.ndarray, sigma: np.ndarray, lam: float, p_c: float,
                      coef: np.ndarray, scale_free: bool) -> tuple[float, float, float]:
    """Gauss–Newton covariance of ``p_n = p_c − e^a λ^{−n}`` at the optimum."""
    n = np.arange(len(p), dtype=float)
    amp = np.exp(coef[0]) * lam**-n * np.sign(p[0] - p_c)
    model = p_c + amp
    resid = (p - model) / sigma
    J = np.stack([np.ones_like(n), amp, -n * amp], axis=1) / sigma[:, None]
    cov = np.linalg.pinv(J.T @ J)
    dof = len(p) - 3
    if scale_free:  # unknown σ: rescale by the residual variance
        cov *= (resid @ resid) / dof if dof > 0 else np.nan
    rms = float(np.sqrt(np.mean((p - model) ** 2)))
    return float(np.sqrt(cov[0, 0])), float(lam * np.sqrt(cov[2, 2])), rms


def estimate_lambda(peaks: Peaks | np.ndarray, sigma: np.ndarray | float | None = None
                    ) -> LambdaEstimate:
    """λ and ``p_c`` from the positions of ``≥ 3`` peaks of a cascade.

    Three peaks: ``λ = (p₂−p₁)/(p₃−p₂)``, ``p_c = (p₂² − p₁p₃)/(2p₂ − p₁ − p₃)``, errors by
    linear propagation of ``sigma``. More peaks: weighted least squares on
    ``log|p_n − p_c| = a − n log λ`` (weights ``|p_n − p_c|/σ_n``, so residuals are position
    residuals in units of σ), ``p_c`` found by a bounded 1-D search beyond the last peak;
    errors from the Gauss–Newton covariance (scaled by the residual variance if ``sigma`` is
    None). ``peaks`` is a :class:`Peaks` (its ``sigma`` is used) or an array of positions.

    **Direction.** The cascade may converge upward (spacings shrinking as ``p`` grows, ``p_c``
    above the peaks) or downward (``p`` falling toward ``p_c``, e.g. a learning rate being
    lowered); the sign of the least-squares slope of ``log(spacing)`` against its index says
    which, and a downward cascade is solved as the mirror image ``p → −p``. Either way
    ``λ > 1`` is returned with the right ``p_c``.

    Raises:
        ValueError: a NaN or infinite peak position.
        NoCascadeError: fewer than three peaks, two at one position, or spacings that do not
            shrink toward either end (equal spacings, or a fit that would give ``λ ≤ 1``).
    """
    if isinstance(peaks, Peaks):
        sigma = peaks.sigma if sigma is None else sigma
        peaks = peaks.p
    raw = np.asarray(peaks, dtype=float)
    if not np.all(np.isfinite(raw)):
        raise ValueError(f"peaks holds NaN or inf positions ({raw.tolist()}): a peak that was "
                         "not found has no position; drop it before estimating λ")
    order = np.argsort(raw)
    p = raw[order]
    if len(p) < 3:
        raise NoCascadeError(f"no cascade: {len(p)} peak(s) found, at least 3 are needed")
    if np.any(np.diff(p) <= 0):
        raise NoCascadeError("no cascade: two peaks at the same position")
    known = sigma is not None
    sig = np.broadcast_to(np.asarray(sigma if known else 1.0, dtype=float), raw.shape)[order]
    sig = sig.copy()
    sig[sig <= 0] = 1e-12 * np.ptp(p)
    log_gaps = np.log(np.diff(p))
    slope = np.polyfit(np.arange(len(log_gaps)), log_gaps, 1)[0]
    if abs(slope) <= 1e-9 * max(np.abs(log_gaps).max(), 1.0):
        raise NoCascadeError(f"no cascade: the spacings {np.diff(p).tolist()} do not shrink "
                             "toward either end")
    if slope > 0:  # spacings grow with p: the cascade converges downward; solve its mirror
        est = _estimate_upward(-p[::-1], sig[::-1], known)
        return est._replace(p_c=-est.p_c)
    return _estimate_upward(p, sig, known)


def _estimate_upward(p: np.ndarray, sig: np.ndarray, known: bool) -> LambdaEstimate:
    """:func:`estimate_lambda` for sorted positions whose spacings shrink as ``p`` grows."""
    if len(p) == 3:
        lam, p_c = _three_peak(p)
        if not lam > 1:
            raise NoCascadeError(f"no cascade: the spacings {np.diff(p).tolist()} do not "
                                 f"shrink toward p_c (λ = {lam:.3g} ≤ 1)")
        errs = _propagate(lambda q: _three_peak(q), p, sig) if known else (np.nan, np.nan)
        return LambdaEstimate(lam, p_c, float(errs[0]), float(errs[1]), 3, 0.0)
    lam, p_c, coef = _many_peak(p, sig)
    if not lam > 1:
        raise NoCascadeError(f"no cascade: the spacings {np.diff(p).tolist()} do not shrink "
                             f"geometrically toward p_c (fitted λ = {lam:.3g} ≤ 1)")
    p_c_err, lam_err, rms = _many_peak_errors(p, sig, lam, p_c, coef, scale_free=not known)
    return LambdaEstimate(lam, p_c, lam_err, p_c_err, len(p), rms)



def predict_p_c(peaks: Peaks | np.ndarray, n_early: int = 3,
                sigma: np.ndarray | float | None = None) -> LambdaEstimate:
    """Predict ``p_c`` from the first ``n_early`` peaks only (the early-warning use)."""
    if isinstance(peaks, Peaks):
        return estimate_lambda(peaks.select(slice(0, n_early)), sigma)
    return estimate_lambda(np.sort(np.asarray(peaks, dtype=float))[:n_early], sigma)


def bootstrap_peak_sigma(C: np.ndarray, p: np.ndarray, peaks: Peaks, *, n_boot: int = 200,
                         seed: int = 0, prominence_factor: float = DEFAULT_PROMINENCE_FACTOR,
                         min_width: float = DEFAULT_MIN_WIDTH) -> np.ndarray:
    """``(n_peaks,)`` bootstrap standard deviation of each peak's position.

    Resample the runs (rows of ``C`` ``(n_runs, n_p)``) with replacement, recompute ``R(p)``
    and its peaks, and match each original peak to the nearest new peak within half the
    distance to its neighbours; unmatched replicates are skipped.
    """
    rng = np.random.default_rng(seed)
    gaps = np.diff(np.concatenate([[-np.inf], peaks.p, [np.inf]]))
    reach = 0.5 * np.minimum(gaps[:-1], gaps[1:])
    found: list[list[float]] = [[] for _ in range(len(peaks))]
    for _ in range(n_boot):
        R = relative_variance(C[rng.integers(C.shape[0], size=C.shape[0])])
        new = find_variance_peaks(R, p, prominence_factor=prominence_factor,
                                  min_width=min_width).p
        if not len(new):
            continue
        for k, pk in enumerate(peaks.p):
            nearest = new[np.argmin(np.abs(new - pk))]
            if abs(nearest - pk) < reach[k]:
                found[k].append(nearest)
    return np.array([np.std(f, ddof=1) if len(f) > 1 else np.nan for f in found])


@dataclass
class Cascade:
    """Result of :func:`detect_cascade`.

    ``found``: a geometric cascade of ≥ 3 peaks exists; ``peaks`` its peaks (None if not);
    ``estimate`` its :class:`LambdaEstimate` (None if not found); ``score`` its smallest
    prominence over ``σ̂`` (0 if not found); ``reason`` a sentence; ``all_peaks`` every peak.
    """

    found: bool
    score: float
    reason: str
    peaks: Peaks | None = None
    estimate: LambdaEstimate | None = None
    all_peaks: Peaks | None = field(default=None, repr=False)


def _chains(p: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs ``[i, j)`` of peaks in which every consecutive triple is geometric and
    adjacent triples agree within ``1 + RATIO_TOL``."""
    d = np.diff(p)
    lam = d[:-1] / d[1:]
    ok = (lam > LAM_RANGE[0]) & (lam < LAM_RANGE[1])
    chains, j = [], 0
    while j < len(lam):
        if not ok[j]:
            j += 1
            continue
        k = j
        while k + 1 < len(lam) and ok[k + 1] and abs(np.log(lam[k + 1] / lam[k])) <= np.log1p(
                RATIO_TOL):
            k += 1
        chains.append((j, k + 3))  # triples j..k cover peaks j..k+2
        j = k + 1
    return chains


def detect_cascade(y: np.ndarray, p: np.ndarray, *,
                   prominence_factor: float = DEFAULT_PROMINENCE_FACTOR,
                   min_width: float = DEFAULT_MIN_WIDTH, noise: float | None = None,
                   estimate: bool = True) -> Cascade:
    """Find the best geometric cascade of variance peaks in ``y(p)`` (rules: module docstring).

    ``estimate=False`` skips :func:`estimate_lambda` (the null model needs only the score).
    """
    peaks = find_variance_peaks(y, p, prominence_factor=prominence_factor, min_width=min_width,
                                noise=noise)
    if len(peaks) < 3:
        return Cascade(False, 0.0, f"no cascade: {len(peaks)} significant peak(s), 3 needed",
                       all_peaks=peaks)
    chains = _chains(peaks.p)
    if not chains:
        return Cascade(False, 0.0, f"no cascade: {len(peaks)} peaks but no geometric triple",
                       all_peaks=peaks)
    best = max(chains, key=lambda c: (peaks.prominence[c[0]:c[1]].min(), c[1] - c[0]))
    sub = peaks.select(slice(*best))
    score = float(sub.prominence.min() / max(peaks.noise, 1e-300))
    est = estimate_lambda(sub) if estimate else None
    return Cascade(True, score, f"cascade of {len(sub)} peaks", sub, est, peaks)
