"""flowlaws.sde: Euler–Maruyama ensembles, the quartic well, SGD as an SDE (answers known)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.integrate import quad

from flowlaws import sde
from flowlaws.models import TwoLayer

ZETAS = np.array([1.0, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2.5])


@pytest.fixture(scope="module")
def collapse() -> np.ndarray:
    return sde.quartic_collapse(ZETAS, mu=1.0, n_runs=200, t_final=100.0, dt=0.01, seed=0)


def test_quartic_no_collapse_at_1_and_collapse_at_2_5(collapse):
    assert collapse[0] == 0.0
    assert collapse[-1] >= 0.98


def test_quartic_transition_near_sqrt_2mu(collapse):
    assert np.all(np.diff(collapse) >= -0.05)  # monotone up to sampling noise
    zeta_half = np.interp(0.5, collapse, ZETAS)
    assert abs(zeta_half - math.sqrt(2.0)) < 0.15


def test_stationary_density_normalised_and_mass_at_zero():
    total, _ = quad(lambda t: sde.quartic_stationary_density(t, 1.0, 1.0), 0, np.inf)
    assert total == pytest.approx(1.0, rel=1e-6)
    mass = sde.quartic_stationary_mass_below(1e-6, 1.0, np.array([1.0, 1.4, 1.5, 2.5]))
    assert mass[0] < 1e-5 and mass[2] == 1.0 and mass[3] == 1.0
    with pytest.raises(ValueError, match="not normalisable"):
        sde.quartic_stationary_density(np.array([0.5]), 1.0, 2.0)


def test_zero_is_invariant_under_multiplicative_noise():
    path = sde.euler_maruyama(sde.quartic_coefficients(1.0, 3.0),
                              torch.zeros(5, 1, dtype=torch.float64), 0.01, 100)
    assert torch.all(path.states == 0)


def test_same_seed_same_paths_other_seed_other_paths():
    coef = sde.quartic_coefficients(1.0, 0.5)
    theta0 = torch.ones(4, 1, dtype=torch.float64)
    a, b = (sde.euler_maruyama(coef, theta0, 0.01, 50, seed=3) for _ in range(2))
    c = sde.euler_maruyama(coef, theta0, 0.01, 50, seed=4)
    assert torch.equal(a.states, b.states) and not torch.equal(a.states, c.states)
    assert a.states.shape == (51, 4, 1) and len(a.times) == 51


def test_divergence_reports_runs_and_steps_and_keeps_the_others():
    def blow_up(theta):
        return theta**2, torch.zeros_like(theta)

    theta0 = torch.tensor([[0.1], [5.0], [0.2], [50.0]], dtype=torch.float64)
    path = sde.euler_maruyama(blow_up, theta0, 0.1, 40, max_abs=1e6)
    assert path.diverged.tolist() == [False, True, False, True]
    assert 0 < int(path.diverged_at[3]) < int(path.diverged_at[1])
    assert torch.isfinite(path.final[[0, 2]]).all() and torch.isnan(path.final[[1, 3]]).all()
    assert "run 1 at step" in path.divergence_report()


def test_negative_steps_and_noise_are_refused():
    coef = sde.quartic_coefficients(1.0, 1.0)
    theta0 = torch.ones(2, 1)
    with pytest.raises(ValueError, match="dt must be a positive"):
        sde.euler_maruyama(coef, theta0, -0.1, 10)
    with pytest.raises(ValueError, match="eta must be a non-negative"):
        sde.euler_maruyama(coef, theta0, 0.1, 10, eta=-1.0)
    with pytest.raises(ValueError, match="zeta must be >= 0"):
        sde.quartic_collapse([-1.0])
    shape = sde.TwoLayerShape(2, 3, 1)
    X, Y = torch.randn(8, 2), torch.randn(8, 1)
    with pytest.raises(ValueError, match="lr must be a positive"):
        sde.sgd_discrete(sde.ensemble_init(shape, 2), shape, X, Y, lr=-0.1, batch_size=2,
                         n_steps=3)


@pytest.mark.parametrize("activation", ["tanh", "relu", "linear"])
def test_per_sample_grads_match_autograd_and_two_layer(activation):
    shape = sde.TwoLayerShape(3, 5, 2, activation)
    theta = sde.ensemble_init(shape, 4, seed=1).requires_grad_(True)
    g = torch.Generator().manual_seed(2)
    X = torch.randn(7, 3, generator=g, dtype=torch.float64)
    Y = torch.randn(7, 2, generator=g, dtype=torch.float64)
    (auto,) = torch.autograd.grad(sde.ensemble_loss(theta, shape, X, Y).sum(), theta)
    mine = sde.per_sample_grads(theta.detach(), shape, X, Y).mean(dim=1)
    torch.testing.assert_close(mine, auto)
    model = TwoLayer(3, 5, 2, activation).double()
    V, U = sde.split_params(theta.detach(), shape)
    model.V.weight.data, model.U.weight.data = V[0].clone(), U[0].clone()
    torch.testing.assert_close(sde.ensemble_forward(theta.detach(), shape, X)[0], model(X))


def test_one_sde_step_has_the_moments_of_one_sgd_step():
    shape = sde.TwoLayerShape(2, 3, 1, "tanh")
    g = torch.Generator().manual_seed(0)
    X = torch.randn(16, 2, generator=g, dtype=torch.float64)
    Y = torch.randn(16, 1, generator=g, dtype=torch.float64)
    theta0 = sde.ensemble_init(shape, 1, seed=5).repeat(40_000, 1)
    lr, B = 0.1, 4
    grads = sde.per_sample_grads(theta0[:1], shape, X, Y)[0]
    mean = -lr * grads.mean(0)
    cov = lr**2 * torch.cov(grads.T, correction=0) / B
    for run in (sde.sgd_discrete, sde.sgd_sde):
        path = run(theta0, shape, X, Y, lr=lr, batch_size=B, n_steps=1, seed=1)
        step = path.final - theta0
        assert (step.mean(0) - mean).norm() < 0.05 * mean.norm() + 3 * cov.diag().sum().sqrt() / 200
        assert (torch.cov(step.T) - cov).norm() / cov.norm() < 0.05


def test_sgd_sde_and_sgd_reach_similar_losses():
    shape = sde.TwoLayerShape(2, 4, 1, "tanh")
    g = torch.Generator().manual_seed(0)
    X = torch.randn(32, 2, generator=g)
    Y = torch.sin(X[:, :1])
    theta0 = sde.ensemble_init(shape, 100, seed=2, dtype=torch.float32)
    kw = {"lr": 0.05, "batch_size": 4, "n_steps": 150, "record_every": 150}
    l_sde = sde.ensemble_loss(sde.sgd_sde(theta0, shape, X, Y, **kw).final, shape, X, Y)
    l_sgd = sde.ensemble_loss(sde.sgd_discrete(theta0, shape, X, Y, **kw).final, shape, X, Y)
    l0 = sde.ensemble_loss(theta0, shape, X, Y)
    assert l_sde.mean() < 0.5 * l0.mean() and l_sgd.mean() < 0.5 * l0.mean()
    assert abs(l_sde.mean() - l_sgd.mean()) < 0.15 * l_sgd.mean()


def test_ensemble_from_two_layer_model():
    model = TwoLayer(3, 4, 2, "tanh").double()
    theta, shape = sde.ensemble_from_model(model, 5)
    X = torch.randn(6, 3, dtype=torch.float64)
    out = sde.ensemble_forward(theta, shape, X)
    assert out.shape == (5, 6, 2)
    torch.testing.assert_close(out[3], model(X).detach())
    with pytest.raises(ValueError, match="bias-free"):
        sde.ensemble_from_model(TwoLayer(3, 4, 2, bias=True), 2)


def test_ensemble_loss_averages_over_samples_for_per_run_data():
    shape = sde.TwoLayerShape(2, 3, 1, "linear")
    theta = sde.ensemble_init(shape, 4, seed=0, dtype=torch.float32)
    X, Y = torch.randn(10, 2), torch.randn(10, 1)
    shared = sde.ensemble_loss(theta, shape, X, Y)
    per_run = sde.ensemble_loss(theta, shape, X.expand(4, 10, 2), Y.expand(4, 10, 1))
    assert torch.allclose(shared, per_run)
