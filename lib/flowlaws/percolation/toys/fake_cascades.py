"""Noise that a raw peak detector takes for a DSI cascade (chapter II.5).

:func:`noise_signal`: white or red (AR(1), coefficient 0.9) Gaussian noise, the null of the raw
peak detector and of the phase-randomised surrogate test. Ensembles with shared levels but no
geometry are :mod:`flowlaws.percolation.toys.level_nulls`.

Explained in: book/02_percolation/05_dsi.ipynb
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

__all__ = ["NOISE_KINDS", "noise_signal"]

NOISE_KINDS = ("white", "AR(1)")
AR_COEFFICIENT = 0.9


def noise_signal(kind: str, n: int, seed: int) -> np.ndarray:
    """``(n,)`` standard Gaussian noise (``kind="white"``) or AR(1) noise
    ``x_t = 0.9 x_{t−1} + ε_t`` (``"AR(1)"``), from ``default_rng(10_000 + seed)``."""
    if kind not in NOISE_KINDS:
        raise ValueError(f"kind must be one of {NOISE_KINDS}, got {kind!r}")
    e = np.random.default_rng(10_000 + seed).standard_normal(n)
    return e if kind == "white" else lfilter([1.0], [1.0, -AR_COEFFICIENT], e)
