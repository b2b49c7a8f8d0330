"""Tests of flowlaws.percolation.dynamics.ensemble, against answers known in advance."""

from __future__ import annotations

import pytest
import torch

from flowlaws.common.models import TwoLayer
from flowlaws.percolation.dynamics import ensemble


@pytest.mark.parametrize("activation", ["tanh", "relu", "linear"])
def test_per_sample_grads_match_autograd_and_two_layer(activation):
    shape = ensemble.TwoLayerShape(3, 5, 2, activation)
    theta = ensemble.ensemble_init(shape, 4, seed=1).requires_grad_(True)
    g = torch.Generator().manual_seed(2)
    X = torch.randn(7, 3, generator=g, dtype=torch.float64)
    Y = torch.randn(7, 2, generator=g, dtype=torch.float64)
    (auto,) = torch.autograd.grad(ensemble.ensemble_loss(theta, shape, X, Y).sum(), theta)
    mine = ensemble.per_sample_grads(theta.detach(), shape, X, Y).mean(dim=1)
    torch.testing.assert_close(mine, auto)
    model = TwoLayer(3, 5, 2, activation).double()
    V, U = ensemble.split_params(theta.detach(), shape)
    model.V.weight.data, model.U.weight.data = V[0].clone(), U[0].clone()
    torch.testing.assert_close(ensemble.ensemble_forward(theta.detach(), shape, X)[0], model(X))


def test_ensemble_from_two_layer_model():
    model = TwoLayer(3, 4, 2, "tanh").double()
    theta, shape = ensemble.ensemble_from_model(model, 5)
    X = torch.randn(6, 3, dtype=torch.float64)
    out = ensemble.ensemble_forward(theta, shape, X)
    assert out.shape == (5, 6, 2)
    torch.testing.assert_close(out[3], model(X).detach())
    with pytest.raises(ValueError, match="bias-free"):
        ensemble.ensemble_from_model(TwoLayer(3, 4, 2, bias=True), 2)


def test_ensemble_loss_averages_over_samples_for_per_run_data():
    shape = ensemble.TwoLayerShape(2, 3, 1, "linear")
    theta = ensemble.ensemble_init(shape, 4, seed=0, dtype=torch.float32)
    X, Y = torch.randn(10, 2), torch.randn(10, 1)
    shared = ensemble.ensemble_loss(theta, shape, X, Y)
    per_run = ensemble.ensemble_loss(theta, shape, X.expand(4, 10, 2), Y.expand(4, 10, 1))
    assert torch.allclose(shared, per_run)


def test_one_dimensional_targets_are_refused_not_broadcast():
    # issue 16: Y (n,) against outputs (R, n, 1) gave an n x n loss without complaint
    shape = ensemble.TwoLayerShape(3, 4, 1)
    theta = ensemble.ensemble_init(shape, 2, seed=0)
    X = torch.randn(6, 3, dtype=torch.float64)
    Y = ensemble.ensemble_forward(theta, shape, X)[0]  # (6, 1): run 0 fits exactly
    assert ensemble.ensemble_loss(theta, shape, X, Y)[0].item() == 0.0
    for bad in (Y[:, 0], Y.T, Y[None, :3]):
        with pytest.raises(ValueError, match=r"targets Y have shape .*\(2, 6, 1\)"):
            ensemble.ensemble_loss(theta, shape, X, bad)
        with pytest.raises(ValueError, match="targets Y"):
            ensemble.per_sample_grads(theta, shape, X, bad)
    per_run = ensemble.ensemble_forward(theta, shape, X)
    assert torch.all(ensemble.ensemble_loss(theta, shape, X, per_run) == 0)
