"""Power-law fits with uncertainty: ``y ≈ a x^b`` by least squares on log-log axes.

Used by both parts: the discrete-step exponents (Part I) and the jump scaling of percolation
(Part II).

Explained in: book/01_conservation/05_discrete_steps.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from flowlaws.book.cache import stored_type

__all__ = [
    "PowerLawFit",
    "fit_power_law",
]


@stored_type
@dataclass(frozen=True)
class PowerLawFit:
    """``y ≈ prefactor · x^exponent``, fitted by least squares on ``log y`` against ``log x``.

    Attributes:
        exponent, stderr: the slope on log-log axes and its standard error.
        prefactor: ``exp(intercept)``; ``intercept_stderr`` is the error of the intercept.
        r2: the coefficient of determination on log-log axes.
        n: the number of points.
    """

    exponent: float
    stderr: float
    prefactor: float
    intercept_stderr: float
    r2: float
    n: int

    def predict(self, x: np.ndarray | float) -> np.ndarray:
        """``prefactor · x^exponent``, for drawing the fitted line."""
        return self.prefactor * np.asarray(x, dtype=float) ** self.exponent

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """A Student-t confidence interval for the exponent (``n − 2`` degrees of freedom)."""
        half = stats.t.ppf(0.5 + level / 2, self.n - 2) * self.stderr
        return self.exponent - half, self.exponent + half

    def __str__(self) -> str:
        return f"{self.exponent:.3f} ± {self.stderr:.3f} (R² = {self.r2:.4f}, n = {self.n})"


def fit_power_law(x: np.ndarray, y: np.ndarray) -> PowerLawFit:
    """Fit ``y = c x^p`` by :func:`scipy.stats.linregress` on ``(log x, log y)``.

    Shapes: ``x`` and ``y`` are ``(n,)`` with ``n ≥ 3`` (two points leave no error estimate).

    Raises:
        ValueError: when a value is zero, negative or not finite (no logarithm), or the
            shapes disagree.
    """
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape or x.size < 3:
        raise ValueError(f"need x and y of the same length ≥ 3, got {x.size} and {y.size}")
    for name, v in (("x", x), ("y", y)):
        if not np.all(np.isfinite(v) & (v > 0)):
            raise ValueError(f"a power-law fit needs positive finite {name}, got {v[~(v > 0)]}")
    r = stats.linregress(np.log(x), np.log(y))
    return PowerLawFit(
        float(r.slope), float(r.stderr), float(np.exp(r.intercept)),
        float(r.intercept_stderr), float(r.rvalue**2), int(x.size),
    )
