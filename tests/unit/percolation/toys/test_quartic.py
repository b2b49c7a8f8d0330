"""Tests of flowlaws.percolation.toys.quartic, against answers known in advance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.integrate import quad

from flowlaws.percolation.dynamics import sde
from flowlaws.percolation.toys import quartic

ZETAS = np.array([1.0, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2.5])


@pytest.fixture(scope="module")
def collapse() -> np.ndarray:
    return quartic.quartic_collapse(ZETAS, mu=1.0, n_runs=200, t_final=100.0, dt=0.01, seed=0)


def test_quartic_no_collapse_at_1_and_collapse_at_2_5(collapse):
    assert collapse[0] == 0.0
    assert collapse[-1] >= 0.98


def test_quartic_transition_near_sqrt_2mu(collapse):
    assert np.all(np.diff(collapse) >= -0.05)  # monotone up to sampling noise
    zeta_half = np.interp(0.5, collapse, ZETAS)
    assert abs(zeta_half - math.sqrt(2.0)) < 0.15


def test_stationary_density_normalised_and_mass_at_zero():
    total, _ = quad(lambda t: quartic.quartic_stationary_density(t, 1.0, 1.0), 0, np.inf)
    assert total == pytest.approx(1.0, rel=1e-6)
    mass = quartic.quartic_stationary_mass_below(1e-6, 1.0, np.array([1.0, 1.4, 1.5, 2.5]))
    assert mass[0] < 1e-5 and mass[2] == 1.0 and mass[3] == 1.0
    with pytest.raises(ValueError, match="not normalisable"):
        quartic.quartic_stationary_density(np.array([0.5]), 1.0, 2.0)


def test_zero_is_invariant_under_multiplicative_noise():
    path = sde.euler_maruyama(quartic.quartic_coefficients(1.0, 3.0),
                              torch.zeros(5, 1, dtype=torch.float64), 0.01, 100)
    assert torch.all(path.states == 0)


def test_lognormal_collapse_is_one_half_where_the_drift_reaches_the_threshold():
    # log θ_T has mean log θ0 + (μ - ζ²/2) T; it equals log ε at ζ² = 2(μ + log(θ0/ε)/T)
    zeta = math.sqrt(2 * (1.0 + math.log(1e6) / 100))
    p = quartic.quartic_lognormal_collapse([zeta, 1.0, 3.0], mu=1.0, theta0=1.0, t_final=100,
                                      threshold=1e-6)
    assert p[0] == pytest.approx(0.5) and p[1] < 1e-6 and p[2] > 0.999


def test_escape_fraction_respects_the_supermartingale_bound():
    zeta, theta0, level = 2.0, 0.1, 1.0
    frac = quartic.quartic_escape_fraction(zeta, mu=1.0, theta0=theta0, level=level, t_final=20,
                                      dt=0.01, n_runs=400)
    bound = (theta0 / level) ** (1 - 2 / zeta**2)
    assert 0 < frac <= bound + 0.05
    assert quartic.quartic_escape_fraction(0.5, mu=1.0, theta0=theta0, level=0.5, t_final=20,
                                      dt=0.01, n_runs=50) == 1.0
