"""Tests of flowlaws.percolation.dynamics.sde, against answers known in advance."""

from __future__ import annotations

import pytest
import torch

from flowlaws.percolation.dynamics import ensemble, sde, sgd
from flowlaws.percolation.toys import quartic


def test_same_seed_same_paths_other_seed_other_paths():
    coef = quartic.quartic_coefficients(1.0, 0.5)
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
    coef = quartic.quartic_coefficients(1.0, 1.0)
    theta0 = torch.ones(2, 1)
    with pytest.raises(ValueError, match="dt must be a positive"):
        sde.euler_maruyama(coef, theta0, -0.1, 10)
    with pytest.raises(ValueError, match="eta must be a non-negative"):
        sde.euler_maruyama(coef, theta0, 0.1, 10, eta=-1.0)
    with pytest.raises(ValueError, match="zeta must be >= 0"):
        quartic.quartic_collapse([-1.0])
    shape = ensemble.TwoLayerShape(2, 3, 1)
    X, Y = torch.randn(8, 2), torch.randn(8, 1)
    with pytest.raises(ValueError, match="lr must be a positive"):
        sgd.sgd_discrete(ensemble.ensemble_init(shape, 2), shape, X, Y, lr=-0.1, batch_size=2,
                         n_steps=3)


def test_one_sde_step_has_the_moments_of_one_sgd_step():
    shape = ensemble.TwoLayerShape(2, 3, 1, "tanh")
    g = torch.Generator().manual_seed(0)
    X = torch.randn(16, 2, generator=g, dtype=torch.float64)
    Y = torch.randn(16, 1, generator=g, dtype=torch.float64)
    theta0 = ensemble.ensemble_init(shape, 1, seed=5).repeat(40_000, 1)
    lr, B = 0.1, 4
    grads = ensemble.per_sample_grads(theta0[:1], shape, X, Y)[0]
    mean = -lr * grads.mean(0)
    cov = lr**2 * torch.cov(grads.T, correction=0) / B
    for run in (sgd.sgd_discrete, sde.sgd_sde):
        path = run(theta0, shape, X, Y, lr=lr, batch_size=B, n_steps=1, seed=1)
        step = path.final - theta0
        assert (step.mean(0) - mean).norm() < 0.05 * mean.norm() + 3 * cov.diag().sum().sqrt() / 200
        assert (torch.cov(step.T) - cov).norm() / cov.norm() < 0.05


def test_sgd_sde_and_sgd_reach_similar_losses():
    shape = ensemble.TwoLayerShape(2, 4, 1, "tanh")
    g = torch.Generator().manual_seed(0)
    X = torch.randn(32, 2, generator=g)
    Y = torch.sin(X[:, :1])
    theta0 = ensemble.ensemble_init(shape, 100, seed=2, dtype=torch.float32)
    kw = {"lr": 0.05, "batch_size": 4, "n_steps": 150, "record_every": 150}
    l_sde = ensemble.ensemble_loss(sde.sgd_sde(theta0, shape, X, Y, **kw).final, shape, X, Y)
    l_sgd = ensemble.ensemble_loss(sgd.sgd_discrete(theta0, shape, X, Y, **kw).final, shape, X, Y)
    l0 = ensemble.ensemble_loss(theta0, shape, X, Y)
    assert l_sde.mean() < 0.5 * l0.mean() and l_sgd.mean() < 0.5 * l0.mean()
    assert abs(l_sde.mean() - l_sgd.mean()) < 0.15 * l_sgd.mean()
