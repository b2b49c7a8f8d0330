"""Signals without a DSI cascade that a careless test mistakes for one (chapter II.5).

- :func:`noise_signal`: white or red (AR(1), coefficient 0.9) Gaussian noise, the null of the
  raw peak detector and of the phase-randomised surrogate test;
- :func:`even_levels`: an ensemble with shared levels at *evenly spaced* positions (λ = 1, no
  accumulation point), each run doubling its order parameter at every level: level structure
  without geometry, the trap of issue 24 (Huang et al. 2000 and Zhou & Sornette 2002 met the same
  trap in log-periodic fits).

Explained in: book/02_percolation/05_dsi.ipynb
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

__all__ = ["NOISE_KINDS", "even_levels", "noise_signal"]

NOISE_KINDS = ("white", "AR(1)")
AR_COEFFICIENT = 0.9


def noise_signal(kind: str, n: int, seed: int) -> np.ndarray:
    """``(n,)`` standard Gaussian noise (``kind="white"``) or AR(1) noise
    ``x_t = 0.9 x_{t−1} + ε_t`` (``"AR(1)"``), from ``default_rng(10_000 + seed)``."""
    if kind not in NOISE_KINDS:
        raise ValueError(f"kind must be one of {NOISE_KINDS}, got {kind!r}")
    e = np.random.default_rng(10_000 + seed).standard_normal(n)
    return e if kind == "white" else lfilter([1.0], [1.0, -AR_COEFFICIENT], e)


def even_levels(p: np.ndarray, n_runs: int, *, levels: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8),
                jitter: float = 0.02, seed: int = 0) -> np.ndarray:
    """``(n_runs, len(p))`` order parameter ``C = 2^k``, ``k`` the number of levels a run has
    passed at ``p``; run ``r`` passes level ``j`` at ``levels[j] + jitter · N(0, 1)``. Evenly
    spaced levels have no geometric ratio and no accumulation point: no DSI cascade."""
    if n_runs < 2 or jitter < 0:
        raise ValueError(f"need n_runs >= 2 and jitter >= 0, got {n_runs} and {jitter}")
    at = np.asarray(levels, float) + jitter * np.random.default_rng(seed).standard_normal(
        (n_runs, len(levels)))
    return 2.0 ** (np.asarray(p, float)[None, :, None] >= at[:, None, :]).sum(-1)
