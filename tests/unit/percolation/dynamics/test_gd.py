"""Tests of flowlaws.percolation.dynamics.gd, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.percolation.dynamics import ensemble, gd, sde
from flowlaws.percolation.toys import planted

SHAPE = ensemble.TwoLayerShape(3, 6, 1, "tanh")


def test_gd_discrete_is_the_old_noise_free_euler_maruyama_to_the_bit():
    """The plain loop computes what Euler–Maruyama with eta = 0 and dt = lr on SGD's drift
    computed before (II.4's numbers do not move), and counts steps, not times."""
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 5, seed=4, dtype=torch.float32)
    lr = 0.2
    old = sde.euler_maruyama(sde.sgd_coefficients(SHAPE, X, Y, 1), theta0, lr, 30, eta=0.0,
                             record_every=10)
    new = gd.gd_discrete(theta0, SHAPE, X, Y, lr=lr, n_steps=30, record_every=10)
    assert torch.equal(new.states, old.states)
    assert new.steps.tolist() == [0, 10, 20, 30]
    np.testing.assert_allclose(old.times, lr * new.steps)


def test_one_step_is_the_full_batch_gradient_of_the_ensemble_loss():
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0, dtype=torch.float64)
    theta0 = ensemble.ensemble_init(SHAPE, 3, seed=2, dtype=torch.float64).requires_grad_(True)
    grad, = torch.autograd.grad(ensemble.ensemble_loss(theta0, SHAPE, X, Y).sum(), theta0)
    step = gd.gd_discrete(theta0.detach(), SHAPE, X, Y, lr=0.1, n_steps=1)
    torch.testing.assert_close(step.final, theta0.detach() - 0.1 * grad)


def test_runs_are_deterministic_descend_and_a_diverged_run_is_reported():
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 4, seed=4, dtype=torch.float32)
    a = gd.gd_discrete(theta0, SHAPE, X, Y, lr=0.05, n_steps=50, record_every=25)
    b = gd.gd_discrete(theta0, SHAPE, X, Y, lr=0.05, n_steps=50, record_every=25)
    assert torch.equal(a.states, b.states)
    losses = [ensemble.ensemble_loss(s, SHAPE, X, Y) for s in a.states]
    assert bool((losses[-1] < losses[0]).all())
    huge = gd.gd_discrete(theta0, SHAPE, X, Y, lr=1e6, n_steps=5)
    assert bool(huge.diverged.all()) and torch.isnan(huge.final).all()
    assert "4 of 4 runs diverged" in huge.divergence_report()


@pytest.mark.parametrize("lr", [0.0, -0.1, float("nan")])
def test_a_step_size_that_is_not_positive_is_refused_by_name(lr):
    X, Y = planted.teacher_data(8, 3, 1, label_noise=0.3, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 2, seed=4, dtype=torch.float32)
    with pytest.raises(ValueError, match="lr"):
        gd.gd_discrete(theta0, SHAPE, X, Y, lr=lr, n_steps=1)
