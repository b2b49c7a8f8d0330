"""Tests of flowlaws.percolation.dynamics.sgd, against answers known in advance."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from flowlaws.percolation.cascade import variance
from flowlaws.percolation.dynamics import ensemble, sde, sgd
from flowlaws.percolation.topology import clusters
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


def test_merge_fraction_sweep_is_collapse_fractions_along_the_lr_sweep():
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = torch.cat([ensemble.ensemble_init(SHAPE, 3, seed=1, dtype=torch.float32),
                        planted.planted_pairs(SHAPE, 3, rel_noise=0.0, seed=2)])
    kw = {"batch_size": 2, "n_steps": 20, "record_every": 10, "seed": 5}
    out = sgd.merge_fraction_sweep(theta0, SHAPE, X, Y, [0.05, 0.1], **kw)
    path = sgd.sgd_lr_sweep(theta0, SHAPE, X, Y, [0.05, 0.1], **kw)
    merged, dead = clusters.collapse_fractions(path.states, SHAPE)
    assert out["steps"].tolist() == [0, 10, 20]
    np.testing.assert_array_equal(out["merged"].numpy(), merged)
    np.testing.assert_array_equal(out["dead"].numpy(), dead)
    assert np.all(out["merged"].numpy()[0, 3:6] == 1.0)  # exact copies start fully merged


def test_start_curves_average_the_right_columns_and_count_diverged_runs():
    T = 2  # 2 learning rates x 2 starts x 3 runs: column (2k + s) * 3 + r
    merged = torch.arange(12, dtype=torch.float64).repeat(T, 1) / 100
    merged[:, 9] = float("nan")  # lr 1, start "b", its first run diverged
    sweep = {"merged": merged, "dead": merged / 2}
    c = sgd.start_curves(sweep, 1, ["a", "b"], 3)
    np.testing.assert_allclose(c["a"][0], [0.07, 0.07])  # columns 6, 7, 8
    np.testing.assert_allclose(c["b"][0], [0.105, 0.105])  # columns 10, 11 (9 is NaN)
    assert c["a"][2] == 0 and c["b"][2] == 1
    np.testing.assert_allclose(sgd.start_curves(sweep, 0, ["a", "b"], 3, 2)["b"][1], [0.0175] * 2)
    with pytest.raises(ValueError, match="nets"):
        sgd.start_curves(sweep, 0, ["a", "b"], 3, 4)


def test_sgd_phases_continue_where_the_last_phase_stopped():
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 3, seed=1, dtype=torch.float32)
    phases = [sgd.SGDPhase(0.2, 1, 20), sgd.SGDPhase(0.05, 8, 10)]
    path = sgd.sgd_phases(theta0, SHAPE, X, Y, phases, record_every=10, seed=4)
    hot = sgd.sgd_discrete(theta0, SHAPE, X, Y, lr=0.2, batch_size=1, n_steps=20,
                           record_every=10, seed=4)
    cool = sgd.sgd_discrete(hot.final, SHAPE, X, Y, lr=0.05, batch_size=8, n_steps=10,
                            record_every=10, seed=5)
    assert path.steps.tolist() == [0, 10, 20, 30]
    assert torch.equal(path.states, torch.cat([hot.states, cool.states[1:]]))
    assert path.diverged_at.tolist() == [-1, -1, -1]
    with pytest.raises(ValueError, match="labels"):
        sgd.sgd_phases(theta0, SHAPE, X, Y, phases, labels=["one"])


def test_sgd_against_sde_runs_the_three_paths_to_the_same_time():
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 4, seed=4, dtype=torch.float32)
    out = sgd.sgd_against_sde(theta0, SHAPE, X, Y, lr=0.1, batch_size=2, t_max=2.0, substeps=3,
                              seed=1, n_records=4)
    assert list(out["losses"]) == ["SGD", "SDE, dt = lr", "SDE, dt = lr/3"]
    np.testing.assert_allclose(out["times"].numpy(), [0.0, 0.5, 1.0, 1.5, 2.0])
    sgd_run = sgd.sgd_discrete(theta0, SHAPE, X, Y, lr=0.1, batch_size=2, n_steps=20,
                               record_every=5, seed=1)
    torch.testing.assert_close(out["losses"]["SGD"][-1],
                               ensemble.ensemble_loss(sgd_run.final, SHAPE, X, Y))
    assert all(L.shape == (5, 4) for L in out["losses"].values())


def test_an_sgd_path_is_cached_and_read_back(tmp_path, monkeypatch):
    from flowlaws.book.cache import cached_call

    monkeypatch.setenv("FLOWLAWS_CACHE", str(tmp_path))
    X, Y = planted.teacher_data(16, 3, 1, label_noise=0.3, seed=0)
    theta0 = ensemble.ensemble_init(SHAPE, 2, seed=1, dtype=torch.float32)
    phases = [sgd.SGDPhase(0.1, 2, 4), sgd.SGDPhase(0.05, 4, 4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a result that cannot be stored warns
        first = cached_call(sgd.sgd_phases, theta0, SHAPE, X, Y, phases, record_every=2)
        again = cached_call(sgd.sgd_phases, theta0, SHAPE, X, Y, phases, record_every=2)
    assert isinstance(again, sgd.SGDPath) and torch.equal(first.states, again.states)
    assert again.steps.tolist() == [0, 2, 4, 6, 8] and list(tmp_path.iterdir())
