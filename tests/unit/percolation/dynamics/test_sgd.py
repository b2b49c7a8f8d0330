"""Tests of flowlaws.percolation.dynamics.sgd, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.percolation.cascade import variance
from flowlaws.percolation.dynamics import ensemble, sde, sgd
from flowlaws.percolation.topology import clusters

SHAPE = ensemble.TwoLayerShape(3, 6, 1, "tanh")


def test_teacher_data_shapes_and_noise():
    X, Y = sgd.teacher_data(50, 3, 2, label_noise=0.0, seed=1)
    _, Yn = sgd.teacher_data(50, 3, 2, label_noise=0.5, seed=1)
    assert X.shape == (50, 3) and Y.shape == (50, 1)
    assert 0.3 < (Yn - Y).std() < 0.7


def test_planted_pairs_start_near_the_permutation_set():
    theta = sgd.planted_pairs(SHAPE, 4, rel_noise=0.0, seed=0)
    merged, dead = clusters.collapse_fractions(theta[None], SHAPE)
    assert np.all(merged == 1.0) and np.all(dead == 0.0)
    noisy = sgd.planted_pairs(SHAPE, 4, rel_noise=0.5, seed=0)
    assert clusters.collapse_fractions(noisy[None], SHAPE)[0].max() < 1.0


def test_lr_sweep_matches_separate_runs_in_distribution_and_layout():
    X, Y = sgd.teacher_data(32, 3, 1, label_noise=0.1, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 200, seed=3, dtype=torch.float32)
    path = sgd.sgd_lr_sweep(theta0, SHAPE, X, Y, [1e-7, 0.2], batch_size=4, n_steps=100,
                           record_every=50)
    assert path.states.shape == (3, 400, SHAPE.dim)
    loss = ensemble.ensemble_loss(path.final, SHAPE, X, Y)
    ref = sde.sgd_discrete(theta0, SHAPE, X, Y, lr=0.2, batch_size=4, n_steps=100, seed=9)
    ref_loss = ensemble.ensemble_loss(ref.final, SHAPE, X, Y).mean()
    l0 = ensemble.ensemble_loss(theta0, SHAPE, X, Y).mean()
    assert abs(loss[:200].mean() - l0) < 0.01 * l0  # tiny lr: hardly moved
    assert abs(loss[200:].mean() - ref_loss) < 0.1 * ref_loss  # same law as sgd_discrete


def test_one_step_moments_agree_within_sampling_error():
    X, Y = sgd.teacher_data(16, 3, 1, label_noise=0.3, seed=0, dtype=torch.float64)
    theta = ensemble.ensemble_init(SHAPE, 1, seed=4, dtype=torch.float64)[0]
    m = sgd.one_step_moments(theta, SHAPE, X, Y, lr=0.1, batch_size=2, n_samples=20000)
    assert m["cov_sgd"] < 3 * m["cov_floor"] + 0.02 and m["cov_sde"] < 3 * m["cov_floor"] + 0.02
    assert m["mean_sgd"] < 0.1 and m["mean_sde"] < 0.1


def test_fine_sde_path_reaches_the_same_time():
    X, Y = sgd.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 5, seed=4, dtype=torch.float32)
    path = sgd.sde_path(theta0, SHAPE, X, Y, lr=0.1, batch_size=2, n_steps=20, substeps=4,
                       record_every=10)
    assert path.states.shape[0] == 3 and path.times[-1] == pytest.approx(2.0)


def test_cyclic_orbit_stays_circulant_under_gradient_descent():
    shape, X, Y, theta0 = sgd.cyclic_problem(5, 8, seed=1)
    assert X.shape == (40, 5) and theta0.shape == (1, shape.dim)
    rolled = torch.roll(X, 1, dims=1)  # the data set is closed under the roll
    assert all(torch.isclose(rolled[i], X).all(dim=1).any() for i in range(len(X)))
    path = sde.euler_maruyama(sde.sgd_coefficients(shape, X, Y, 1), theta0, 0.2, 50, eta=0.0,
                              record_every=50)
    d = clusters.relative_distance(*ensemble.split_params(path.final, shape))[0]
    for k in range(5):
        shifted = torch.roll(torch.roll(d, k, 0), k, 1)
        torch.testing.assert_close(shifted, d, atol=1e-6, rtol=1e-5)
    assert len(np.unique(clusters.merge_heights(path.final, shape).round(5))) == 1


def test_sgd_order_parameter_shapes_bounds_and_seed():
    kw = {"width": 4, "n_runs": 6, "n_steps": 40, "record_every": 10, "seed": 1}
    a = sgd.sgd_order_parameter(0.3, **kw)
    assert a["steps"] == [0, 10, 20, 30, 40] and a["C"].shape == (6, 5)
    assert ((a["C"] >= 1) & (a["C"] <= 4)).all()
    torch.testing.assert_close(a["C"], sgd.sgd_order_parameter(0.3, **kw)["C"])
    huge = sgd.sgd_order_parameter(1e4, **kw)["C"]  # diverges: NaN, then dropped
    assert torch.isnan(huge[:, -1]).all() and len(variance.finite_runs(huge)) == 0
