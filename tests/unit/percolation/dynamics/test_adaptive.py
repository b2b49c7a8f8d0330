"""Tests of flowlaws.percolation.dynamics.adaptive, against answers known in advance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flowlaws.percolation.dynamics import adaptive, ensemble
from flowlaws.percolation.topology import clusters
from flowlaws.percolation.toys import planted

SHAPE = ensemble.TwoLayerShape(3, 4, 2, "tanh")


def _data(n: int = 16, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(n, SHAPE.n_in, generator=g, dtype=dtype),
            torch.randn(n, SHAPE.n_out, generator=g, dtype=dtype))


@pytest.mark.parametrize("name,cls,wd", [("adam", torch.optim.Adam, 0.0),
                                         ("adam", torch.optim.Adam, 0.1),
                                         ("adamw", torch.optim.AdamW, 0.1),
                                         ("sgd", torch.optim.SGD, 0.0)])
def test_full_batch_steps_match_torch_optim(name, cls, wd):
    X, Y = _data()
    theta0 = ensemble.ensemble_init(SHAPE, 2, seed=3)
    path = adaptive.train_ensemble(theta0, SHAPE, X, Y, optimizer=name, lr=0.01, n_steps=25,
                                   batch_size=None, weight_decay=wd)
    for r in range(2):
        p = theta0[r].clone().requires_grad_(True)
        opt = cls([p], lr=0.01, weight_decay=wd)
        for _ in range(25):
            opt.zero_grad()
            ensemble.ensemble_loss(p[None], SHAPE, X, Y).sum().backward()
            opt.step()
        torch.testing.assert_close(path.final[r], p.detach(), rtol=1e-9, atol=1e-11)


def test_stable_noise_gaussian_and_cauchy_limits():
    g = torch.Generator().manual_seed(0)
    x2 = adaptive.stable_noise((200_000,), 2.0, g, dtype=torch.float64)
    assert x2.var().item() == pytest.approx(1.0, rel=0.02)
    x1 = adaptive.stable_noise((200_000,), 1.0, g, dtype=torch.float64)
    # Cauchy of scale 1/sqrt(2): the median of |X| is the scale.
    assert x1.abs().median().item() == pytest.approx(1 / math.sqrt(2), rel=0.02)
    x15 = adaptive.stable_noise((200_000,), 1.5, g, dtype=torch.float64)
    assert (x15.abs() > 20).float().mean() > 10 * (x2.abs() > 20).float().mean()
    assert adaptive.truncate(x15, 3.0).abs().max().item() == 3.0
    with pytest.raises(ValueError):
        adaptive.stable_noise((3,), 2.5, g)


def test_noise_has_the_minibatch_mean():
    X, Y = _data()
    theta = ensemble.ensemble_init(SHAPE, 1, seed=1).expand(4000, -1).clone()
    g = torch.Generator().manual_seed(1)
    noisy = adaptive.noisy_gradient(theta, SHAPE, X, Y, batch_size=2, alpha=1.5, truncation=5.0,
                                    generator=g)
    exact = adaptive.noisy_gradient(theta[:1], SHAPE, X, Y, batch_size=None, alpha=2.0,
                                    truncation=math.inf, generator=g)
    err = (noisy.mean(0) - exact[0]).abs().max() / (noisy.std(0).max() / math.sqrt(4000))
    assert err < 5 and noisy.std(0).max() > 0.01


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
def test_identical_neurons_stay_identical_in_the_joint_state(name):
    X, Y = _data()
    half = ensemble.TwoLayerShape(3, 2, 2, "tanh")
    V, U = ensemble.split_params(ensemble.ensemble_init(half, 3, seed=2), half)
    theta0 = torch.cat([V.repeat_interleave(2, 1).flatten(1),
                        (U.repeat_interleave(2, 2) / 2).flatten(1)], 1)
    path = adaptive.train_ensemble(theta0, SHAPE, X, Y, optimizer=name, lr=0.05, n_steps=100,
                                   batch_size=2, alpha=1.2, truncation=20.0, weight_decay=0.01)
    w = adaptive.joint_neuron_vectors(path.theta[-1], path.m[-1], path.v[-1], SHAPE)
    # equal up to round-off: the batched einsum may sum in a different order per row
    assert (w[:, 0] - w[:, 1]).abs().max() < 1e-13 and (w[:, 2] - w[:, 3]).abs().max() < 1e-13
    assert not torch.equal(path.theta[-1], theta0)
    d = clusters.pair_distances(path.theta, SHAPE, [(0, 1), (0, 2)])
    assert d.shape == (path.theta.shape[0], 3, 2)
    assert torch.all(d[..., 0] < 1e-13) and torch.all(d[-1, :, 1] > 0)


def test_cmax_curves_match_union_find():
    X, Y = _data()
    theta0 = ensemble.ensemble_init(SHAPE, 6, seed=4)
    V, U = ensemble.split_params(theta0, SHAPE)  # views: editing them edits theta0
    V[:2, 1], U[:2, :, 1] = V[:2, 0] * 1.001, U[:2, :, 0]  # runs 0, 1: neurons 0 and 1 merged
    V[0, 2], U[0, :, 2] = V[0, 0], U[0, :, 0]  # run 0: neuron 2 too
    V[3, 3], U[3, :, 3] = 0.0, 0.0  # run 3: a dead neuron
    path = adaptive.train_ensemble(theta0, SHAPE, X, Y, optimizer="adam", lr=0.01, n_steps=20,
                                   batch_size=4, record_every=5)
    C = clusters.cmax_curves(path.theta, SHAPE)
    assert C.shape == (6, 5) and C[0, 0] == 3 and C[1, 0] == 2 and C[2, 0] == 1
    for k in range(5):
        Vk, Uk = ensemble.split_params(path.theta[k], SHAPE)
        union_find = [len(clusters.partition(Vk[r], Uk[r])[0]) for r in range(6)]
        np.testing.assert_array_equal(C[:, k], union_find)


def test_bad_arguments_are_refused():
    X, Y = _data()
    theta0 = ensemble.ensemble_init(SHAPE, 1)
    with pytest.raises(ValueError, match="optimizer"):
        adaptive.train_ensemble(theta0, SHAPE, X, Y, optimizer="rmsprop", lr=0.1, n_steps=1)
    with pytest.raises(ValueError, match="lr"):
        adaptive.train_ensemble(theta0, SHAPE, X, Y, lr=-1.0, n_steps=1)
    with pytest.raises(ValueError, match="truncation"):
        adaptive.truncate(torch.ones(2), 0.0)


def test_merged_ensemble_computes_the_half_network():
    half = ensemble.TwoLayerShape(3, 2, 2, "tanh")
    X, _ = _data()
    theta0, merged, shape = planted.merged_ensemble(half, 5, copies=3, perturbation=1e-3,
                                                     seed=1, dtype=torch.float64)
    assert shape == ensemble.TwoLayerShape(3, 6, 2, "tanh") and theta0.shape == (5, shape.dim)
    small = ensemble.ensemble_init(half, 1, seed=1)
    torch.testing.assert_close(ensemble.ensemble_forward(merged, shape, X),
                               ensemble.ensemble_forward(small, half, X))
    d = clusters.pair_distances(theta0, shape, [(0, 1), (1, 2), (3, 5), (0, 3)])
    assert torch.all(d[:, :3] < 0.02) and torch.all(d[:, 3] > 0.1)


def test_steps_stay_steps_and_times_are_lr_times_steps():
    X, Y = _data()
    path = adaptive.train_ensemble(ensemble.ensemble_init(SHAPE, 2, seed=0), SHAPE, X, Y,
                                   optimizer="sgd", lr=0.1, n_steps=10, record_every=4)
    assert path.steps.tolist() == [0, 4, 8, 10] and path.steps.dtype == np.int64
    np.testing.assert_array_equal(path.times, 0.1 * np.array([0.0, 4.0, 8.0, 10.0]))


# issue 16: impossible settings were accepted and every run marked diverged at step 1


@pytest.mark.parametrize(("change", "error", "pattern"), [
    ({"batch_size": 0}, ValueError, "batch_size must be a positive integer, got 0"),
    ({"batch_size": -2}, ValueError, "batch_size must be a positive integer"),
    ({"batch_size": 4.0}, TypeError, "batch_size must be an integer, got 4.0"),
    ({"betas": (0.9, 1.0)}, ValueError, r"betas must lie in \[0, 1\)"),
    ({"betas": (1.0, 0.999)}, ValueError, r"betas must lie in \[0, 1\)"),
    ({"betas": (float("nan"), 0.9)}, ValueError, r"betas\[0\] must be"),
    ({"betas": 0.9}, TypeError, "betas must be two numbers"),
    ({"eps": 0.0}, ValueError, "eps must be a positive finite number"),
    ({"alpha": 0.0}, ValueError, "alpha must be"),
    ({"alpha": 2.5}, ValueError, r"alpha must lie in \(0, 2\]"),
    ({"truncation": 0.0}, ValueError, "truncation must be"),
    ({"truncation": float("nan")}, ValueError, "truncation must be"),
    ({"weight_decay": -0.1}, ValueError, "weight_decay must be a non-negative"),
    ({"lr": float("nan")}, ValueError, "lr must be a positive finite number"),
    ({"n_steps": 5.0}, TypeError, "n_steps must be an integer"),
    ({"max_abs": 0.0}, ValueError, "max_abs must be"),
    ({"v0": -torch.ones(2, SHAPE.dim, dtype=torch.float64)}, ValueError, "v0"),
    ({"m0": torch.zeros(3, SHAPE.dim, dtype=torch.float64)}, ValueError, "m0 must have"),
])
def test_impossible_settings_are_refused_up_front(change, error, pattern):
    X, Y = _data()
    theta0 = ensemble.ensemble_init(SHAPE, 2, seed=0)
    kwargs = {"optimizer": "adam", "lr": 0.01, "n_steps": 3, **change}
    with pytest.raises(error, match=pattern):
        adaptive.train_ensemble(theta0, SHAPE, X, Y, **kwargs)


def test_bad_shapes_and_dtypes_are_refused_up_front():
    X, Y = _data()
    theta0 = ensemble.ensemble_init(SHAPE, 2, seed=0)
    for bad_theta in (theta0[:, :-1], theta0[0], theta0.float()[:, :3],
                      torch.full_like(theta0, float("nan"))):
        with pytest.raises(ValueError, match="theta0"):
            adaptive.train_ensemble(bad_theta, SHAPE, X, Y, lr=0.01, n_steps=2)
    for bad_X, bad_Y, name in ((X[:, :2], Y, "X"), (X, Y[:, 0], "Y"), (X[:0], Y[:0], "X"),
                               (X.float(), Y, "X"), (X, Y[:5], "need the same samples")):
        with pytest.raises((ValueError, TypeError), match=name):
            adaptive.train_ensemble(theta0, SHAPE, bad_X, bad_Y, lr=0.01, n_steps=2)


def test_numpy_scalars_train_like_python_numbers():
    X, Y = _data()
    theta0 = ensemble.ensemble_init(SHAPE, 2, seed=0)
    a = adaptive.train_ensemble(theta0, SHAPE, X, Y, lr=np.float64(0.01), n_steps=np.int64(5),
                                batch_size=np.int64(4), seed=np.int64(1))
    b = adaptive.train_ensemble(theta0, SHAPE, X, Y, lr=0.01, n_steps=5, batch_size=4, seed=1)
    assert torch.equal(a.theta, b.theta) and a.diverged_at.tolist() == [-1, -1]


def test_diverged_runs_are_reported_and_their_cmax_is_nan():
    X, Y = _data()
    theta0 = ensemble.ensemble_init(SHAPE, 4, seed=1)
    path = adaptive.train_ensemble(theta0, SHAPE, X, Y, optimizer="sgd", lr=0.05, n_steps=6,
                                   batch_size=4, record_every=2)
    assert path.divergence_report() == "all 4 runs stayed finite"
    states = path.theta.clone()
    states[2:, 1] = float("nan")  # run 1 blows up after the second record
    path.diverged_at[1] = 4
    assert path.divergence_report(0.05) == "1 of 4 runs diverged at lr=0.05: run 1 at step 4"
    C = clusters.cmax_curves(states, SHAPE)
    assert np.isnan(C[1, 2:]).all() and np.isfinite(np.delete(C, 1, axis=0)).all()


def test_adamw_refuses_a_decay_that_zeroes_or_flips_the_weights():
    shape = ensemble.TwoLayerShape(2, 3, 1, "tanh")
    theta = ensemble.ensemble_init(shape, 2, seed=0)
    X, Y = torch.randn(8, 2), torch.randn(8, 1)
    with pytest.raises(ValueError, match="weight_decay"):
        adaptive.train_ensemble(theta, shape, X, Y, optimizer="adamw", lr=0.5, n_steps=2,
                                weight_decay=2.0)
