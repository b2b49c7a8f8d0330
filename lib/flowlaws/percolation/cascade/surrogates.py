"""The null model of the DSI chapter: phase-randomized surrogates and the surrogate test.

A surrogate keeps the amplitude spectrum of ``R(p)`` and draws its phases at random; the test
runs the cascade detector of :mod:`flowlaws.percolation.cascade.variance` on the observed signal
and on
``n_surrogates`` surrogates and reports the fraction of surrogates that score at least as high.

This is the seed's method, kept for comparison. ``R`` is non-negative, non-stationary and, for
an integer order parameter, a staircase, so its Gaussian surrogates are not exchangeable with it
and the p-values are not uniform (issue 12); the test that chapters call is
:func:`flowlaws.percolation.cascade.judge.judge_cascade`, whose null is built from the runs.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowlaws.percolation.cascade.variance import (
    DEFAULT_MIN_WIDTH,
    DEFAULT_PROMINENCE_FACTOR,
    Cascade,
    detect_cascade,
    noise_scale,
)

__all__ = [
    "cascade_caption",
    "phase_randomized_surrogates",
    "NullTest",
    "surrogate_test",
]


def cascade_caption(null) -> str:
    """One line for a :class:`NullTest`: λ and ``p_c`` with errors, or why none.

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    c = null.cascade
    if not c.found:
        return c.reason
    e = c.estimate
    verdict = "significant" if null.significant else "not significant"
    return (f"{c.reason}: λ = {e.lam:.2f} ± {e.lam_err:.2f}, p_c = {e.p_c:.4g} ± {e.p_c_err:.2g}; "
            f"surrogate p = {null.p_value:.3f} ({verdict})")


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
