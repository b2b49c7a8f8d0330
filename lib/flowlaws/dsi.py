"""Discrete scale invariance (DSI): variance cascades, their scaling factor λ, and a null model.

The order parameter ``C_max`` is measured over an ensemble of runs at each value of a control
parameter ``p``; its relative variance ``R(p) = Var(C_max)/⟨C_max⟩²`` peaks at the
micro-transitions. A DSI cascade is a sequence of peaks ``p₁ < p₂ < …`` approaching a
critical point ``p_c`` geometrically: ``p_n − p_c = λ⁻¹ (p_{n−1} − p_c)``.

This module: :func:`relative_variance`; peak detection (:func:`find_variance_peaks`, rule
below); :func:`estimate_lambda` (closed form for three peaks, weighted least squares on
``log|p_n − p_c|`` for more); a log-periodic power-law fit (:func:`fit_lppl`); the null model
of phase-randomized surrogates (:func:`phase_randomized_surrogates`, :func:`surrogate_test`);
the cascade detector (:func:`detect_cascade`); at the end, a kinematic toy model of
coalescing particles (:func:`kinematic_cascade`) and reactive fragmentation after a task
switch (:func:`task_switch`).

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

Explained in: book/02_percolation/05_dsi.ipynb (cascades, null model, toy model) and
book/02_percolation/09_fragmentation.ipynb (:func:`task_switch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
from scipy import optimize, signal

from flowlaws.clusters import DEFAULT_TOL
from flowlaws.reeb import reeb_events, reeb_from_checkpoints
from flowlaws.sde import TwoLayerShape, sgd_discrete, split_params

LAM_RANGE = (1.2, 10.0)
RATIO_TOL = 0.5
DEFAULT_PROMINENCE_FACTOR = 5.0
DEFAULT_MIN_WIDTH = 4.0

__all__ = [
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
    "LPPLFit",
    "fit_lppl",
    "lppl",
    "phase_randomized_surrogates",
    "Cascade",
    "detect_cascade",
    "NullTest",
    "surrogate_test",
    "KinematicModel",
    "kinematic_runs",
    "KinematicResult",
    "kinematic_cascade",
    "SwitchResult",
    "task_switch",
]


class NoCascadeError(ValueError):
    """Raised when fewer than three peaks are given: there is no cascade, hence no λ."""


def relative_variance(C: np.ndarray) -> np.ndarray:
    """``R(p) = Var(C)/⟨C⟩²`` over runs: ``C`` is ``(n_runs, n_p)``, result ``(n_p,)``.

    Population variance (``ddof = 0``); ``R = 0`` where the mean is 0.
    """
    C = np.asarray(C, dtype=float)
    if C.ndim != 2 or C.shape[0] < 2:
        raise ValueError(f"C must be (n_runs >= 2, n_p), got shape {C.shape}")
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


# ----------------------------------------------------------------------------------------
# λ and p_c from peak positions
# ----------------------------------------------------------------------------------------


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
    residuals in units of σ), ``p_c`` found by a bounded 1-D search beyond the last peak
    (the cascade is taken to approach ``p_c`` from below, spacings shrinking);
    errors from the Gauss–Newton covariance (scaled by the residual variance if ``sigma`` is
    None). ``peaks`` is a :class:`Peaks` (its ``sigma`` is used) or an array of positions.

    Raises:
        NoCascadeError: fewer than three peaks, or spacings that are not geometric-like
            (``λ`` not positive).
    """
    if isinstance(peaks, Peaks):
        sigma = peaks.sigma if sigma is None else sigma
        peaks = peaks.p
    p = np.sort(np.asarray(peaks, dtype=float))
    if len(p) < 3:
        raise NoCascadeError(f"no cascade: {len(p)} peak(s) found, at least 3 are needed")
    if np.any(np.diff(p) <= 0):
        raise NoCascadeError("no cascade: two peaks at the same position")
    known = sigma is not None
    sig = np.broadcast_to(np.asarray(sigma if known else 1.0, dtype=float), p.shape).copy()
    sig[sig <= 0] = 1e-12 * np.ptp(p)
    if len(p) == 3:
        lam, p_c = _three_peak(p)
        errs = _propagate(lambda q: _three_peak(q), p, sig) if known else (np.nan, np.nan)
        return LambdaEstimate(lam, p_c, float(errs[0]), float(errs[1]), 3, 0.0)
    lam, p_c, coef = _many_peak(p, sig)
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


# ----------------------------------------------------------------------------------------
# Log-periodic power law
# ----------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------
# Null model and the cascade detector
# ----------------------------------------------------------------------------------------


def phase_randomized_surrogates(x: np.ndarray, n_surrogates: int, *, seed: int = 0) -> np.ndarray:
    """``(n_surrogates, len(x))`` signals with the amplitude spectrum of ``x``, random phases.

    ``rfft`` → multiply every positive frequency by ``e^{iφ}``, ``φ ~ U(0, 2π)`` independent,
    keeping the DC term (and the Nyquist term for even length) real and unchanged → ``irfft``.
    The mean and the power spectrum (hence the autocorrelation) are kept exactly.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or len(x) < 4:
        raise ValueError(f"x must be 1-D with at least 4 points, got shape {x.shape}")
    if n_surrogates < 1:
        raise ValueError(f"n_surrogates must be positive, got {n_surrogates}")
    spectrum = np.fft.rfft(x)
    phases = np.random.default_rng(seed).uniform(0, 2 * np.pi, (n_surrogates, len(spectrum)))
    phases[:, 0] = 0.0
    if len(x) % 2 == 0:
        phases[:, -1] = 0.0
    return np.fft.irfft(spectrum * np.exp(1j * phases), n=len(x), axis=1)


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


@dataclass
class NullTest:
    """Result of :func:`surrogate_test`: the observed ``score``, the surrogates' ``scores``
    ``(n,)``, the rank ``p_value = (1 + #{score_s ≥ score})/(1 + n)``, ``detection_rate`` (the
    fraction of surrogates in which the detector finds a cascade at all: the raw detector's
    false-positive rate) and ``significant = found and p_value ≤ alpha``."""

    score: float
    scores: np.ndarray
    p_value: float
    detection_rate: float
    significant: bool
    cascade: Cascade


def surrogate_test(y: np.ndarray, p: np.ndarray, *, n_surrogates: int = 1000, alpha: float = 0.01,
                   seed: int = 0, prominence_factor: float = DEFAULT_PROMINENCE_FACTOR,
                   min_width: float = DEFAULT_MIN_WIDTH) -> NullTest:
    """Compare the cascade found in ``y`` with those in phase-randomized surrogates of ``y``.

    The noise scale ``σ̂`` is that of ``y`` for every surrogate, so scores are comparable.
    Under the null (``y`` a stationary Gaussian signal), the surrogates are exchangeable with
    ``y`` and the test rejects with probability ``≈ alpha``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    sigma_hat = noise_scale(y)
    kw = {"prominence_factor": prominence_factor, "min_width": min_width, "noise": sigma_hat}
    observed = detect_cascade(y, p, **kw)
    surrogates = phase_randomized_surrogates(y, n_surrogates, seed=seed)
    found, scores = np.zeros(n_surrogates, bool), np.zeros(n_surrogates)
    for k, s in enumerate(surrogates):
        c = detect_cascade(s, p, **kw, estimate=False)
        found[k], scores[k] = c.found, c.score
    p_value = (1 + np.sum(scores >= observed.score)) / (1 + n_surrogates)
    return NullTest(observed.score, scores, float(p_value), float(found.mean()),
                    bool(observed.found and p_value <= alpha), observed)


# ----------------------------------------------------------------------------------------
# A kinematic toy model: coalescing particles on a ring
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KinematicModel:
    """Particles ("neurons") on a ring of circumference ``N`` (mean spacing 1).

    Every particle carries unit noise and attracts each particle of a neighbouring cluster
    with force ``kappa`` once the gap is below the capture radius ``capture``; a cluster of
    ``m`` particles moves as one, with mobility ``1/m``:
    ``dx = kappa (m_right·[g_right < capture] − m_left·[g_left < capture]) dt + √(2D dt/m) dB``.
    Clusters closer than ``merge`` fuse (mass-weighted position). Nothing sets a scale
    factor: which clusters merge, and when, comes out of the dynamics. The time step adapts
    per run, ``dt = min(0.02 g² m_min / D, 0.2 g / (kappa m_max))`` with ``g`` the smallest gap
    (so a step moves nothing by more than ~20% of the closest gap).
    """

    N: int = 64
    kappa: float = 1.0
    D: float = 0.05
    capture: float = 0.5
    merge: float = 0.05


def _sort_ring(x: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.argsort(np.where(m > 0, x, np.inf), axis=1)
    x, m = np.take_along_axis(x, order, 1), np.take_along_axis(m, order, 1)
    return x, m, (m > 0).sum(axis=1)


def _ring_gaps(x: np.ndarray, K: np.ndarray, L: float) -> np.ndarray:
    """``g_j`` from cluster ``j`` to the next (``inf`` on empty slots or ``K = 1``)."""
    j = np.arange(x.shape[1])[None, :]
    nxt = np.where(j + 1 < K[:, None], j + 1, 0)
    g = np.take_along_axis(x, nxt, 1) - x + np.where(j + 1 < K[:, None], 0.0, L)
    return np.where((j < K[:, None]) & (K[:, None] > 1), g, np.inf)


def _velocity(g: np.ndarray, m: np.ndarray, K: np.ndarray, model: KinematicModel) -> np.ndarray:
    j = np.arange(g.shape[1])[None, :]
    nxt = np.where(j + 1 < K[:, None], j + 1, 0)
    prv = np.where(j > 0, j - 1, np.maximum(K[:, None] - 1, 0))
    right = np.take_along_axis(m, nxt, 1) * (g < model.capture)
    left = np.take_along_axis(m, prv, 1) * (np.take_along_axis(g, prv, 1) < model.capture)
    return model.kappa * (right - left)


def _merge_run(x: np.ndarray, m: np.ndarray, close: np.ndarray, L: float) -> tuple:
    """Fuse the clusters of one run across the gaps flagged ``close`` ``(K,)`` (gap ``j`` joins
    cluster ``j`` to ``j+1``; gap ``K−1`` wraps around the ring), chains included."""
    K = len(close)
    labels = np.concatenate([[0], np.cumsum(~close[:-1])])
    if K > 1 and close[-1]:
        labels[labels == labels[-1]] = 0
    xs, ms = x[:K], m[:K]
    new_x, new_m = [], []
    for lab in np.unique(labels):
        sel = labels == lab
        ref = xs[sel][0]
        rel = np.mod(xs[sel] - ref + L / 2, L) - L / 2
        new_m.append(ms[sel].sum())
        new_x.append(np.mod(ref + (rel * ms[sel]).sum() / new_m[-1], L))
    out_x, out_m = np.full_like(x, np.inf), np.zeros_like(m)
    out_x[: len(new_x)], out_m[: len(new_m)] = new_x, new_m
    return out_x, out_m


def _apply_merges(x: np.ndarray, m: np.ndarray, K: np.ndarray, model: KinematicModel,
                  cmax_at_K: np.ndarray, last_K: np.ndarray) -> None:
    """Merge in place every run with a gap below ``model.merge``; record ``C_max`` per ``K``."""
    g = _ring_gaps(x, K, model.N)
    for r in np.nonzero((g < model.merge).any(axis=1))[0]:
        x[r], m[r] = _merge_run(x[r], m[r], g[r, : K[r]] < model.merge, model.N)
        k_new = int((m[r] > 0).sum())
        cmax_at_K[r, k_new - 1 : last_K[r] - 1] = m[r].max()
        last_K[r] = k_new


def kinematic_runs(model: KinematicModel, n_runs: int, *, seed: int = 0, init: str = "poisson",
                   max_steps: int = 200_000) -> np.ndarray:
    """``C_max`` of every run at each number of components: ``(n_runs, N)``, column ``K − 1``.

    Entry ``[r, K−1]`` is the largest cluster's size the first time run ``r`` has at most ``K``
    clusters (several merges in one step fill every ``K`` they skip). Initial positions:
    ``init="poisson"`` uniform on the ring, ``"lattice"`` the symmetric start ``x_i = i``
    (only the noise breaks the symmetry). Runs not finished after ``max_steps`` steps keep
    NaN for the ``K`` they did not reach.
    """
    if init not in ("poisson", "lattice"):
        raise ValueError(f"init must be 'poisson' or 'lattice', got {init!r}")
    rng = np.random.default_rng(seed)
    N = model.N
    lattice = np.tile(np.arange(N, dtype=float), (n_runs, 1))
    x = rng.uniform(0, N, (n_runs, N)) if init == "poisson" else lattice
    m = np.ones((n_runs, N))
    cmax_at_K = np.full((n_runs, N), np.nan)
    cmax_at_K[:, N - 1] = 1.0
    last_K = np.full(n_runs, N)
    for _ in range(max_steps):
        x, m, K = _sort_ring(x, m)
        _apply_merges(x, m, K, model, cmax_at_K, last_K)
        x, m, K = _sort_ring(x, m)
        if np.all(K <= 1):
            break
        _kinematic_step(x, m, K, model, rng)
    return cmax_at_K


def _kinematic_step(x: np.ndarray, m: np.ndarray, K: np.ndarray, model: KinematicModel,
                    rng: np.random.Generator) -> None:
    g = _ring_gaps(x, K, model.N)
    alive = m > 0
    v = _velocity(g, m, K, model)
    gmin = g.min(axis=1, keepdims=True)
    m_min = np.where(alive, m, np.inf).min(axis=1, keepdims=True)
    v_max = np.abs(np.where(alive, v, 0.0)).max(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        dt = np.minimum(0.02 * gmin**2 * m_min / model.D, 0.2 * gmin / v_max)
    dt = np.where(np.isfinite(dt) & (K[:, None] > 1), dt, 0.0)
    noise = np.sqrt(2 * model.D * dt / np.where(alive, m, 1.0)) * rng.standard_normal(x.shape)
    x[:] = np.where(alive, np.mod(np.where(alive, x, 0.0) + v * dt + noise, model.N), np.inf)


@dataclass
class KinematicResult:
    """What :func:`kinematic_cascade` measured.

    ``p`` ``(N,)`` the merge fraction ``(N − K)/(N − 1)``; ``C`` ``(n_runs, N)`` ``C_max/N``
    at those ``p``; ``R`` ``(N,)`` the relative variance; ``cascade`` the detector's result on
    ``R``; ``boot_lams`` the λ of every bootstrap replicate (runs resampled) that held a
    cascade; ``boot_found`` the fraction that did; ``null`` the surrogate test of ``R``.
    ``lam``/``lam_err`` are the median and standard deviation of ``boot_lams`` (NaN if none).
    """

    p: np.ndarray
    C: np.ndarray
    R: np.ndarray
    cascade: Cascade
    boot_lams: np.ndarray
    boot_found: float
    null: NullTest

    @property
    def lam(self) -> float:
        """Bootstrap median of λ (NaN when no replicate held a cascade)."""
        return float(np.median(self.boot_lams)) if len(self.boot_lams) else float("nan")

    @property
    def lam_err(self) -> float:
        """Bootstrap standard deviation of λ."""
        return float(np.std(self.boot_lams, ddof=1)) if len(self.boot_lams) > 1 else float("nan")


def kinematic_cascade(model: KinematicModel, n_runs: int, *, init: str = "poisson",
                      seed: int = 0, n_boot: int = 200, n_surrogates: int = 1000,
                      prominence_factor: float = 3.0, min_width: float = 1.0) -> KinematicResult:
    """Run the toy model, compute ``R(p)`` and look for a DSI cascade in it, with errors.

    The signal has only ``N`` points, so the detector's defaults here are looser
    (``prominence_factor = 3``, ``min_width = 1``); the surrogate test judges the result.
    """
    C = kinematic_runs(model, n_runs, seed=seed, init=init)[:, ::-1] / model.N
    p = (model.N - np.arange(model.N, 0, -1)) / (model.N - 1)
    kw = {"prominence_factor": prominence_factor, "min_width": min_width}
    R = relative_variance(C)
    rng = np.random.default_rng(seed + 1)
    lams = []
    for _ in range(n_boot):
        c = detect_cascade(relative_variance(C[rng.integers(n_runs, size=n_runs)]), p, **kw)
        if c.found:
            lams.append(c.estimate.lam)
    null = surrogate_test(R, p, n_surrogates=n_surrogates, seed=seed, **kw)
    return KinematicResult(p, C, R, detect_cascade(R, p, **kw), np.asarray(lams),
                           len(lams) / n_boot, null)


# ----------------------------------------------------------------------------------------
# Reactive fragmentation after a task switch
# ----------------------------------------------------------------------------------------


@dataclass
class SwitchResult:
    """What :func:`task_switch` recorded: ``times`` ``(T,)``, ``states`` ``(T, R, dim)``,
    ``switch_time``, one Reeb graph per run (``reeb``), and per run the splits and merges
    after the switch (``splits``, ``merges``: lists of :class:`flowlaws.reeb.ReebEvent`)."""

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
    t_switch = float(a.times[-1])
    times = np.concatenate([a.times, t_switch + b.times[1:]])
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
