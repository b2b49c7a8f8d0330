"""The quartic well of Chen et al. (2023): an invariant set made attractive by noise.

``dθ = −(θ³ − μθ) dt + ζθ dB`` (Itô): the invariant set ``θ = 0`` becomes attractive once
``ζ² ≥ 2μ`` (:func:`quartic_collapse`, next to the stationary-density prediction
:func:`quartic_stationary_mass_below`, a log-normal guide and the escape fraction).

Explained in: book/02_percolation/01_sde.ipynb and 02_trapping.ipynb.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import gammainc
from scipy.stats import norm

from flowlaws.common.checks import as_int, check_finite, check_positive
from flowlaws.percolation.dynamics.sde import Coefficients, euler_maruyama

__all__ = [
    "quartic_lognormal_collapse",
    "quartic_escape_fraction",
    "quartic_coefficients",
    "quartic_stationary_density",
    "quartic_stationary_mass_below",
    "quartic_collapse",
]


def quartic_lognormal_collapse(
    zetas: np.ndarray, *, mu: float, theta0: float, t_final: float, threshold: float
) -> np.ndarray:
    """``(len(zetas),)`` P(θ_T < threshold) if ``log θ`` were Brownian with drift ``μ − ζ²/2``.

    Near ``θ = 0`` Itô's formula gives ``d log θ = (μ − ζ²/2 − θ²) dt + ζ dB``; dropping ``θ²``
    leaves ``log θ_T ~ N(log θ0 + (μ − ζ²/2) T, ζ² T)``. The approximation ignores the wall
    ``−θ³`` that stops excursions upward, so it is only a guide, best where ``ζ² > 2μ``.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    zetas = np.asarray(zetas, dtype=float)
    mean = math.log(theta0) + (mu - zetas**2 / 2) * t_final
    return norm.cdf((math.log(threshold) - mean) / (zetas * math.sqrt(t_final)))


def quartic_escape_fraction(
    zeta: float, *, mu: float, theta0: float, level: float, t_final: float, dt: float,
    n_runs: int, seed: int = 0,
) -> float:
    """Fraction of quartic-well runs from ``theta0`` that reach ``θ ≥ level`` before ``t_final``.

    Checked at every Euler–Maruyama step (all runs at once, float64). Compare with the
    supermartingale bound ``(theta0 / level)^p``, ``p = 1 − 2μ/ζ²`` (when ``ζ² > 2μ``).

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    coefficients = quartic_coefficients(mu, zeta)
    theta = torch.full((n_runs, 1), float(theta0), dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    reached = torch.zeros(n_runs, dtype=torch.bool)
    for _ in range(int(round(t_final / dt))):
        drift, factor = coefficients(theta)
        xi = torch.randn(theta.shape, generator=g, dtype=theta.dtype)
        theta = theta + drift * dt + math.sqrt(dt) * factor * xi
        reached |= theta[:, 0] >= level
    return float(reached.double().mean())


def quartic_coefficients(mu: float, zeta: torch.Tensor | float) -> Coefficients:
    """Drift ``μθ − θ³`` and diagonal noise ``ζθ`` (``zeta`` scalar or ``(R, 1)`` per run).

    The noise vanishes at ``θ = 0``, so the Euler–Maruyama map
    ``θ ← θ (1 + (μ − θ²) dt + ζ √dt ξ)`` keeps ``θ = 0`` exactly invariant.
    """

    def coefficients(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return mu * theta - theta**3, zeta * theta

    return coefficients


def quartic_stationary_density(theta: np.ndarray, mu: float, zeta: float) -> np.ndarray:
    """The normalised stationary density on ``θ > 0``, ``p(θ) ∝ θ^a e^{−θ²/ζ²}``.

    Derivation (Itô, zero-flux Fokker–Planck): with drift ``b = μθ − θ³`` and
    ``D = ζ²θ²``, ``p ∝ D⁻¹ exp(∫ 2b/D) = θ^{2μ/ζ² − 2} e^{−θ²/ζ²}``. With
    ``a = 2μ/ζ² − 2`` the normaliser ``∫₀^∞ θ^a e^{−θ²/ζ²} dθ = ½ ζ^{a+1} Γ((a+1)/2)`` is
    finite only for ``a > −1``, i.e. ``ζ² < 2μ``; for ``ζ² ≥ 2μ`` all the mass sits at 0
    and this function raises ``ValueError``.
    """
    check_positive(mu=mu, zeta=zeta)
    a = 2 * mu / zeta**2 - 2
    if a <= -1:
        raise ValueError(f"zeta^2 = {zeta**2:g} >= 2 mu = {2 * mu:g}: the density is not "
                         "normalisable; the stationary law is the point mass at 0")
    theta = np.asarray(theta, dtype=float)
    log_norm = math.log(0.5) + (a + 1) * math.log(zeta) + math.lgamma((a + 1) / 2)
    return np.exp(a * np.log(theta) - theta**2 / zeta**2 - log_norm)


def quartic_stationary_mass_below(eps: float, mu: float, zeta: float | np.ndarray) -> np.ndarray:
    """Stationary probability that ``|θ| < eps``: the prediction for the collapse fraction.

    Equals the regularised incomplete gamma ``P((a+1)/2, eps²/ζ²)`` with ``a = 2μ/ζ² − 2``
    while ``ζ² < 2μ`` (tiny for small ``eps``), and 1 for ``ζ² ≥ 2μ``, where the stationary
    law is the point mass at the invariant set ``θ = 0``.
    """
    zeta = np.asarray(zeta, dtype=float)
    shape = mu / zeta**2  # (a + 1) / 2
    with np.errstate(invalid="ignore"):
        mass = gammainc(np.where(shape > 0.5, shape - 0.5, 1.0), eps**2 / zeta**2)
    return np.where(zeta**2 >= 2 * mu, 1.0, mass)


def quartic_collapse(
    zetas: np.ndarray | list[float],
    *,
    mu: float = 1.0,
    theta0: float = 1.0,
    t_final: float = 100.0,
    dt: float = 0.01,
    n_runs: int = 500,
    threshold: float = 1e-6,
    seed: int = 0,
) -> np.ndarray:
    """Fraction of runs with ``|θ(t_final)| < threshold`` ("collapsed"), one per ``ζ``.

    All ``len(zetas) × n_runs`` trajectories run in one ensemble (``ζ`` is a per-run
    column). Collapse is operational: below ``threshold`` at the final time. Returns
    ``(len(zetas),)``. Compare with :func:`quartic_stationary_mass_below` (the ``t → ∞``
    prediction; the step to 1 at ``ζ = √(2μ)`` is rounded at finite ``t_final`` because
    ``log θ`` drifts at speed ``μ − ζ²/2`` only, which vanishes at the threshold).
    """
    check_positive(mu=mu, t_final=t_final, dt=dt, threshold=threshold)
    check_finite(theta0=theta0)
    n_runs, seed = as_int("n_runs", n_runs, minimum=1), as_int("seed", seed)
    if not 1 <= t_final / dt <= 1e9:
        raise ValueError(f"t_final={t_final:g} / dt={dt:g} must be between 1 and 1e9 steps")
    zetas = np.asarray(zetas, dtype=float)
    if zetas.ndim != 1 or zetas.size == 0 or not np.all(np.isfinite(zetas)):
        raise ValueError(f"zetas must be a non-empty list of finite noise levels, got {zetas}")
    if np.any(zetas < 0):
        raise ValueError(f"noise levels zeta must be >= 0, got {zetas.tolist()}")
    zeta_col = torch.tensor(np.repeat(zetas, n_runs), dtype=torch.float64)[:, None]
    theta0_t = torch.full((len(zeta_col), 1), float(theta0), dtype=torch.float64)
    n_steps = int(round(t_final / dt))
    path = euler_maruyama(quartic_coefficients(mu, zeta_col), theta0_t, dt, n_steps,
                          seed=seed, record_every=n_steps, absorb_below=1e-200)
    collapsed = (path.final.abs() < threshold).reshape(len(zetas), n_runs)
    return collapsed.double().mean(dim=1).numpy()
