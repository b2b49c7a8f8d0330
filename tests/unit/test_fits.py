"""Tests of flowlaws.fits: power-law fits, and the exponents of the conservation error of GD."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.fits import (
    discretisation_exponents,
    errors_along_run,
    errors_at_fixed_steps,
    errors_at_fixed_time,
    fit_power_law,
)
from flowlaws.flow import mse_loss, parameters_of
from flowlaws.models import TwoLayer


def balance(p: dict[str, torch.Tensor]) -> torch.Tensor:
    return p["U.weight"].T @ p["U.weight"] - p["V.weight"] @ p["V.weight"].T


@pytest.fixture(scope="module")
def smoke():
    """The natural smoke problem: a linear 4-3-2 net, 20 random inputs, a linear teacher.

    Its loss falls by a factor ~4 by t = 0.5 and by ~10⁴ by t = 5 (t = τk).
    """
    torch.manual_seed(0)
    model = TwoLayer(4, 3, 2, "linear").double()
    X = torch.randn(20, 4, dtype=torch.float64)
    Y = X @ torch.randn(4, 2, dtype=torch.float64)
    return mse_loss(model, X, Y), parameters_of(model)


def test_fit_recovers_a_known_exponent_from_noisy_data() -> None:
    rng = np.random.default_rng(0)
    x = np.geomspace(1e-3, 1e1, 40)
    y = 3.0 * x**1.7 * np.exp(0.05 * rng.standard_normal(x.size))
    fit = fit_power_law(x, y)
    assert abs(fit.exponent - 1.7) < 3 * fit.stderr and fit.stderr < 0.01
    assert abs(np.log(fit.prefactor / 3.0)) < 3 * fit.intercept_stderr
    low, high = fit.interval(0.99)
    assert low < 1.7 < high and fit.r2 > 0.99 and fit.n == 40
    np.testing.assert_allclose(fit.predict(x), fit.prefactor * x**fit.exponent)
    assert "±" in str(fit)


def test_fit_is_exact_on_exact_data() -> None:
    x = np.array([1.0, 2.0, 4.0, 8.0])
    fit = fit_power_law(x, 0.5 * x**-2)
    assert fit.exponent == pytest.approx(-2.0, abs=1e-12) and fit.stderr < 1e-12
    assert fit.prefactor == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("x", "y"),
    [([1, 2, 3], [1, 0, 2]), ([1, -2, 3], [1, 2, 3]), ([1, 2, 3], [1, np.nan, 2]),
     ([1, 2], [1, 2]), ([1, 2, 3], [1, 2])],
)
def test_fit_refuses_what_has_no_logarithm(x, y) -> None:
    with pytest.raises(ValueError):
        fit_power_law(np.array(x, dtype=float), np.array(y, dtype=float))


# The exponents of the seed's O(τ²k). They hold in early training, τk ≤ 0.05 here, well
# below the time (~0.5) the loss takes to fall appreciably; see test_k_exponent_saturates...


def test_gd_error_exponent_in_lr_at_fixed_k_is_2(smoke) -> None:
    loss, p0 = smoke
    lrs = np.geomspace(1e-4, 3e-3, 5)
    fit = fit_power_law(lrs, errors_at_fixed_steps(loss, p0, balance, lrs, n_steps=10))
    assert abs(fit.exponent - 2) < 0.15, fit


def test_gd_error_exponent_in_k_at_fixed_lr_is_1(smoke) -> None:
    loss, p0 = smoke
    ks, errors = errors_along_run(loss, p0, balance, lr=1e-3, n_steps=50)
    fit = fit_power_law(ks, errors)
    assert ks[0] == 1 and ks[-1] == 50
    assert abs(fit.exponent - 1) < 0.15, fit


def test_gd_error_exponent_in_lr_at_fixed_time_is_1(smoke) -> None:
    loss, p0 = smoke
    lrs, errors = errors_at_fixed_time(loss, p0, balance, np.geomspace(2e-3, 2e-2, 4), t=0.2)
    np.testing.assert_allclose(lrs * np.round(0.2 / lrs), 0.2)
    fit = fit_power_law(lrs, errors)
    assert abs(fit.exponent - 1) < 0.15, fit


def test_k_exponent_saturates_once_the_run_converges(smoke) -> None:
    """Past the convergence time the increments τ²h(g_k) vanish: O(τ²k) is only a bound."""
    loss, p0 = smoke
    ks, errors = errors_along_run(loss, p0, balance, lr=0.05, n_steps=300)
    assert fit_power_law(ks, errors).exponent < 0.5
    assert errors[-1] == pytest.approx(errors[-2], rel=1e-3)


def test_minibatch_sgd_has_the_same_exponent_in_lr(smoke) -> None:
    loss, p0 = smoke
    lrs = np.geomspace(1e-4, 3e-3, 4)
    errors = errors_at_fixed_steps(
        loss, p0, balance, lrs, n_steps=10, optimizer="sgd", batch_size=5, seed=3
    )
    assert abs(fit_power_law(lrs, errors).exponent - 2) < 0.15


def test_discretisation_exponents_bundles_the_three_sweeps(smoke) -> None:
    loss, p0 = smoke
    sweeps = discretisation_exponents(
        loss, p0, balance, lrs=np.geomspace(1e-3, 1e-2, 3), n_steps=3, lr=1e-3, k_max=8, t=0.03
    )
    assert set(sweeps) == {"lr at fixed k", "k at fixed lr", "lr at fixed t"}
    for sweep in sweeps.values():
        assert abs(sweep.fit.exponent - sweep.reference) < 0.15
        assert sweep.x.shape == sweep.errors.shape
