"""Tests of flowlaws.percolation.dynamics.sgd, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.percolation.cascade import variance
from flowlaws.percolation.dynamics import ensemble, sde, sgd
from flowlaws.percolation.toys import planted

SHAPE = ensemble.TwoLayerShape(3, 6, 1, "tanh")


def test_lr_sweep_matches_separate_runs_in_distribution_and_layout():
    X, Y = planted.teacher_data(32, 3, 1, label_noise=0.1, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 200, seed=3, dtype=torch.float32)
    path = sgd.sgd_lr_sweep(theta0, SHAPE, X, Y, [1e-7, 0.2], batch_size=4, n_steps=100,
                           record_every=50)
    assert path.states.shape == (3, 400, SHAPE.dim)
    loss = ensemble.ensemble_loss(path.final, SHAPE, X, Y)
    ref = sgd.sgd_discrete(theta0, SHAPE, X, Y, lr=0.2, batch_size=4, n_steps=100, seed=9)
    ref_loss = ensemble.ensemble_loss(ref.final, SHAPE, X, Y).mean()
    l0 = ensemble.ensemble_loss(theta0, SHAPE, X, Y).mean()
    assert abs(loss[:200].mean() - l0) < 0.01 * l0  # tiny lr: hardly moved
    assert abs(loss[200:].mean() - ref_loss) < 0.1 * ref_loss  # same law as sgd_discrete


def test_one_step_moments_agree_within_sampling_error():
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0, dtype=torch.float64)
    theta = ensemble.ensemble_init(SHAPE, 1, seed=4, dtype=torch.float64)[0]
    m = sgd.one_step_moments(theta, SHAPE, X, Y, lr=0.1, batch_size=2, n_samples=20000)
    assert m["cov_sgd"] < 3 * m["cov_floor"] + 0.02 and m["cov_sde"] < 3 * m["cov_floor"] + 0.02
    assert m["mean_sgd"] < 0.1 and m["mean_sde"] < 0.1


def test_fine_sde_path_reaches_the_same_time():
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 5, seed=4, dtype=torch.float32)
    path = sgd.sde_path(theta0, SHAPE, X, Y, lr=0.1, batch_size=2, n_steps=20, substeps=4,
                       record_every=10)
    assert path.states.shape[0] == 3 and path.times[-1] == pytest.approx(2.0)


def test_sgd_order_parameter_shapes_bounds_and_seed():
    kw = {"width": 4, "n_runs": 6, "n_steps": 40, "record_every": 10, "seed": 1}
    a = sgd.sgd_order_parameter(0.3, **kw)
    assert a["steps"] == [0, 10, 20, 30, 40] and a["C"].shape == (6, 5)
    assert ((a["C"] >= 1) & (a["C"] <= 4)).all()
    torch.testing.assert_close(a["C"], sgd.sgd_order_parameter(0.3, **kw)["C"])
    huge = sgd.sgd_order_parameter(1e4, **kw)["C"]  # diverges: NaN, then dropped
    assert torch.isnan(huge[:, -1]).all() and len(variance.finite_runs(huge)) == 0


def test_sgd_discrete_is_the_old_noise_free_euler_maruyama_to_the_bit():
    """The plain loop computes what Euler–Maruyama with eta = 0, dt = lr and a zero noise
    tensor computed before (the chapters' numbers do not move), and counts steps."""
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 5, seed=4, dtype=torch.float32)
    lr, B = 0.3, 2
    g = torch.Generator().manual_seed(7)

    def coefficients(theta):
        idx = torch.randint(X.shape[0], (theta.shape[0], B), generator=g)
        Xb = X[idx]
        w = torch.full(idx.shape, 1.0 / B, dtype=theta.dtype)
        grad = ensemble.weighted_grad(w, ensemble.forward_cache(theta, SHAPE, Xb, Y[idx]), Xb)
        return -1.0 * grad, torch.zeros_like(theta)

    old = sde.euler_maruyama(coefficients, theta0, lr, 30, eta=0.0, seed=7, record_every=10)
    new = sgd.sgd_discrete(theta0, SHAPE, X, Y, lr=lr, batch_size=B, n_steps=30, seed=7,
                           record_every=10)
    assert torch.equal(new.states, old.states)
    assert new.steps.tolist() == [0, 10, 20, 30]
    np.testing.assert_allclose(old.times, lr * new.steps)
