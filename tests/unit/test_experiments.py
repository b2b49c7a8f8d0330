"""flowlaws.experiments: the Part II experiment helpers against answers known in advance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flowlaws import experiments as ex
from flowlaws import reeb, sde

SHAPE = sde.TwoLayerShape(3, 6, 1, "tanh")


def test_teacher_data_shapes_and_noise():
    X, Y = ex.teacher_data(50, 3, 2, label_noise=0.0, seed=1)
    _, Yn = ex.teacher_data(50, 3, 2, label_noise=0.5, seed=1)
    assert X.shape == (50, 3) and Y.shape == (50, 1)
    assert 0.3 < (Yn - Y).std() < 0.7


def test_planted_pairs_start_near_the_permutation_set():
    theta = ex.planted_pairs(SHAPE, 4, rel_noise=0.0, seed=0)
    merged, dead = ex.collapse_fractions(theta[None], SHAPE)
    assert np.all(merged == 1.0) and np.all(dead == 0.0)
    noisy = ex.planted_pairs(SHAPE, 4, rel_noise=0.5, seed=0)
    assert ex.collapse_fractions(noisy[None], SHAPE)[0].max() < 1.0


def test_collapse_fractions_count_planted_dead_and_merged_neurons_and_nan_runs():
    theta = sde.ensemble_init(SHAPE, 3, seed=2, dtype=torch.float64)
    V, U = sde.split_params(theta, SHAPE)  # views: edit in place
    V[0, 1], U[0, :, 1] = V[0, 0], U[0, :, 0]  # run 0: neurons 0 and 1 identical
    V[1, 2], U[1, :, 2] = 0.0, 0.0  # run 1: neuron 2 dead
    theta[2, 0] = float("nan")  # run 2: diverged
    merged, dead = ex.collapse_fractions(theta[None], SHAPE)
    assert merged[0, 0] == pytest.approx(2 / 6) and dead[0, 0] == 0
    assert dead[0, 1] == pytest.approx(1 / 6) and merged[0, 1] == 0
    assert np.isnan(merged[0, 2]) and np.isnan(dead[0, 2])


def test_lr_sweep_matches_separate_runs_in_distribution_and_layout():
    X, Y = ex.teacher_data(32, 3, 1, label_noise=0.1, seed=0)
    theta0 = sde.ensemble_init(SHAPE, 200, seed=3, dtype=torch.float32)
    path = ex.sgd_lr_sweep(theta0, SHAPE, X, Y, [1e-7, 0.2], batch_size=4, n_steps=100,
                           record_every=50)
    assert path.states.shape == (3, 400, SHAPE.dim)
    loss = sde.ensemble_loss(path.final, SHAPE, X, Y)
    ref = sde.sgd_discrete(theta0, SHAPE, X, Y, lr=0.2, batch_size=4, n_steps=100, seed=9)
    ref_loss = sde.ensemble_loss(ref.final, SHAPE, X, Y).mean()
    l0 = sde.ensemble_loss(theta0, SHAPE, X, Y).mean()
    assert abs(loss[:200].mean() - l0) < 0.01 * l0  # tiny lr: hardly moved
    assert abs(loss[200:].mean() - ref_loss) < 0.1 * ref_loss  # same law as sgd_discrete


def test_one_step_moments_agree_within_sampling_error():
    X, Y = ex.teacher_data(16, 3, 1, label_noise=0.3, seed=0, dtype=torch.float64)
    theta = sde.ensemble_init(SHAPE, 1, seed=4, dtype=torch.float64)[0]
    m = ex.one_step_moments(theta, SHAPE, X, Y, lr=0.1, batch_size=2, n_samples=20000)
    assert m["cov_sgd"] < 3 * m["cov_floor"] + 0.02 and m["cov_sde"] < 3 * m["cov_floor"] + 0.02
    assert m["mean_sgd"] < 0.1 and m["mean_sde"] < 0.1


def test_fine_sde_path_reaches_the_same_time():
    X, Y = ex.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = sde.ensemble_init(SHAPE, 5, seed=4, dtype=torch.float32)
    path = ex.sde_path(theta0, SHAPE, X, Y, lr=0.1, batch_size=2, n_steps=20, substeps=4,
                       record_every=10)
    assert path.states.shape[0] == 3 and path.times[-1] == pytest.approx(2.0)


def test_lognormal_collapse_is_one_half_where_the_drift_reaches_the_threshold():
    # log θ_T has mean log θ0 + (μ - ζ²/2) T; it equals log ε at ζ² = 2(μ + log(θ0/ε)/T)
    zeta = math.sqrt(2 * (1.0 + math.log(1e6) / 100))
    p = ex.quartic_lognormal_collapse([zeta, 1.0, 3.0], mu=1.0, theta0=1.0, t_final=100,
                                      threshold=1e-6)
    assert p[0] == pytest.approx(0.5) and p[1] < 1e-6 and p[2] > 0.999


def test_escape_fraction_respects_the_supermartingale_bound():
    zeta, theta0, level = 2.0, 0.1, 1.0
    frac = ex.quartic_escape_fraction(zeta, mu=1.0, theta0=theta0, level=level, t_final=20,
                                      dt=0.01, n_runs=400)
    bound = (theta0 / level) ** (1 - 2 / zeta**2)
    assert 0 < frac <= bound + 0.05
    assert ex.quartic_escape_fraction(0.5, mu=1.0, theta0=theta0, level=0.5, t_final=20,
                                      dt=0.01, n_runs=50) == 1.0


def test_run_reeb_sees_a_planted_merge():
    theta = sde.ensemble_init(SHAPE, 1, seed=5, dtype=torch.float64)
    later = theta.clone()
    V, U = sde.split_params(later, SHAPE)
    V[0, 1], U[0, :, 1] = V[0, 0], U[0, :, 0]
    G = ex.run_reeb(torch.stack([theta, later]), SHAPE, np.array([0.0, 1.0]), run=0)
    events = [(e.kind, e.block) for e in reeb.reeb_events(G)]
    assert events == [("merge", 2)]


def test_partition_with_dead_joins_the_dead_neurons_into_one_group():
    theta = sde.ensemble_init(SHAPE, 1, seed=6, dtype=torch.float64)
    V, U = sde.split_params(theta, SHAPE)
    for i in (1, 3, 4):
        V[0, i], U[0, :, i] = 0.0, 0.0
    parts = ex.partition_with_dead(V[0], U[0])
    assert parts[0] == frozenset({1, 3, 4}) and len(parts) == 4
    G = ex.run_reeb(torch.stack([sde.ensemble_init(SHAPE, 1, seed=6, dtype=torch.float64), theta]),
                    SHAPE, np.array([0.0, 1.0]), run=0, dead_group=True)
    assert [(e.kind, e.block) for e in reeb.reeb_events(G)] == [("merge", 3)]
