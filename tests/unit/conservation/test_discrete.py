"""Tests of flowlaws.conservation.discrete, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.common.fits import fit_power_law
from flowlaws.common.models import TwoLayer
from flowlaws.conservation.discrete import (
    discretisation_exponents,
    errors_along_run,
    errors_at_fixed_steps,
    errors_at_fixed_time,
    local_slope,
    one_step_change_quadratic,
    one_step_change_two_layer,
    scan_step_sizes,
)
from flowlaws.conservation.losses import mse_loss, parameters_of
from flowlaws.conservation.training import train

from ..problems import balance, problem


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


def test_local_slope_of_a_power_law_is_its_exponent_everywhere() -> None:
    x = np.array([1.0, 2.0, 3.0, 7.0, 20.0])  # uneven spacing on the log axis too
    np.testing.assert_allclose(local_slope(x, 3.0 * x**1.7), 1.7, atol=1e-12)
    two = np.stack([x**2, x**0.5])
    np.testing.assert_allclose(local_slope(x, two, axis=1), [[2.0] * 5, [0.5] * 5], atol=1e-12)
    assert np.isnan(local_slope(x, np.array([1.0, 0.0, 1.0, 1.0, 1.0]))[1])
    with pytest.raises(ValueError, match="positive"):
        local_slope(np.array([0.0, 1.0]), np.array([1.0, 2.0]))


def test_local_slope_of_a_curved_error_falls_as_it_bends() -> None:
    # y = 1 - exp(-x): slope x e^{-x} / (1 - e^{-x}), 1 at small x, 0 at large x
    x = np.geomspace(1e-3, 20, 400)
    exact = x * np.exp(-x) / (1 - np.exp(-x))
    np.testing.assert_allclose(local_slope(x, 1 - np.exp(-x)), exact, atol=1e-3)


def test_scan_reads_tau2k_early_and_a_flat_error_late(smoke) -> None:
    """Early (t ≪ 1): slope 1 in k, 2 in τ at fixed k, 1 at fixed t; late: 0 in k.

    The slope in τ at fixed k is the slope at fixed t plus the slope in k (chain rule).
    """
    loss, p0 = smoke
    scan = scan_step_sizes(loss, p0, balance, [1e-3, 2e-3, 4e-3], t_max=8.0, n_points=30)
    assert scan.by_k.shape == (3, scan.ks.size) and scan.by_t.shape == (3, 30)
    assert scan.ks[-1] == 2000 and scan.ts[0] == pytest.approx(4e-3)
    early, late = scan.at(0.01), scan.at(8.0)
    np.testing.assert_allclose(early["k slope"], 1.0, atol=0.05)
    np.testing.assert_allclose(early["lr slope at fixed t"], 1.0, atol=0.05)
    np.testing.assert_allclose(early["lr slope at fixed k"], 2.0, atol=0.1)
    np.testing.assert_allclose(
        early["lr slope at fixed k"], early["lr slope at fixed t"] + early["k slope"], atol=0.05
    )
    assert np.all(np.abs(late["k slope"]) < 0.1)
    np.testing.assert_allclose(late["lr slope at fixed t"], 1.0, atol=0.1)
    assert np.isnan(late["lr slope at fixed k"][0])  # 1e-3 · 2000 steps stops short of t = 8
    with pytest.raises(ValueError, match="t_max"):
        scan_step_sizes(loss, p0, balance, [1e-3, 2e-3], t_max=3e-3)


def unit_balance(p: dict[str, torch.Tensor]) -> torch.Tensor:
    """``‖U[:, i]‖² − ‖V[i, :]‖²``, the per-unit laws of the ReLU net (the diagonal)."""
    return p["U.weight"].pow(2).sum(0) - p["V.weight"].pow(2).sum(1)


def test_one_step_identity_of_the_two_layer_net_to_1e12() -> None:
    _, loss, p0 = problem()
    for lr in (1e-3, 0.1, 0.5):
        g = torch.func.grad(loss)(p0)
        p1 = train(loss, p0, "gd", lr, 1, record_params=True).at(-1)
        change = balance(p1) - balance(p0)
        torch.testing.assert_close(change, one_step_change_two_layer(g, lr), rtol=0, atol=1e-12)
        torch.testing.assert_close(
            change, one_step_change_quadratic(balance, g, lr), rtol=0, atol=1e-12
        )


def test_one_step_identity_holds_for_minibatches_relu_units_and_decay() -> None:
    _, loss, p0 = problem("relu")
    index = torch.tensor([1, 4, 7, 9])
    g = torch.func.grad(lambda p: loss(p, index))(p0)
    lr, wd = 0.2, 0.3
    p1 = {k: p0[k] - lr * (g[k] + wd * p0[k]) for k in p0}
    expected = one_step_change_quadratic(unit_balance, g, lr, params=p0, weight_decay=wd)
    torch.testing.assert_close(unit_balance(p1) - unit_balance(p0), expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="params"):
        one_step_change_quadratic(unit_balance, g, lr, weight_decay=wd)
