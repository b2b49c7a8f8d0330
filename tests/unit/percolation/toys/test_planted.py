"""Tests of flowlaws.percolation.toys.planted, against answers known in advance."""

from __future__ import annotations

import numpy as np
import torch

from flowlaws.percolation.dynamics import ensemble, sde
from flowlaws.percolation.topology import clusters
from flowlaws.percolation.toys import planted

SHAPE = ensemble.TwoLayerShape(3, 6, 1, "tanh")


def test_teacher_data_shapes_and_noise():
    X, Y = planted.teacher_data(50, 3, 2, label_noise=0.0, seed=1)
    _, Yn = planted.teacher_data(50, 3, 2, label_noise=0.5, seed=1)
    assert X.shape == (50, 3) and Y.shape == (50, 1)
    assert 0.3 < (Yn - Y).std() < 0.7


def test_planted_pairs_start_near_the_permutation_set():
    theta = planted.planted_pairs(SHAPE, 4, rel_noise=0.0, seed=0)
    merged, dead = clusters.collapse_fractions(theta[None], SHAPE)
    assert np.all(merged == 1.0) and np.all(dead == 0.0)
    noisy = planted.planted_pairs(SHAPE, 4, rel_noise=0.5, seed=0)
    assert clusters.collapse_fractions(noisy[None], SHAPE)[0].max() < 1.0


def test_cyclic_orbit_stays_circulant_under_gradient_descent():
    shape, X, Y, theta0 = planted.cyclic_problem(5, 8, seed=1)
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
