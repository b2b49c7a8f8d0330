"""Tests of flowlaws.conservation.losses, against answers known in advance."""

from __future__ import annotations

import pytest
import torch

from flowlaws.common.models import TwoLayer
from flowlaws.conservation.laws import balancedness
from flowlaws.conservation.losses import (
    DatasetLoss,
    cross_entropy_loss,
    gradient_and_loss,
    linear_regression,
    mse_loss,
    parameters_of,
)

from ..problems import balance


def test_cross_entropy_loss_for_classifiers_and_language_models() -> None:
    torch.manual_seed(0)
    classifier = torch.nn.Linear(5, 3)
    X, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
    loss = cross_entropy_loss(classifier, X, y)
    p = parameters_of(classifier)
    expected = torch.nn.functional.cross_entropy(classifier(X), y)
    torch.testing.assert_close(loss(p), expected)
    assert isinstance(loss, DatasetLoss) and loss.n_samples == 8
    lm = torch.nn.Embedding(10, 10)
    tokens, targets = torch.randint(0, 10, (4, 6)), torch.randint(0, 10, (4, 6))
    lm_loss = cross_entropy_loss(lm, tokens, targets)
    full = torch.nn.functional.cross_entropy(lm(tokens).reshape(-1, 10), targets.reshape(-1))
    torch.testing.assert_close(lm_loss(parameters_of(lm)), full)
    assert lm_loss(parameters_of(lm), torch.tensor([0, 2])).shape == ()


def test_mse_loss_refuses_targets_that_would_broadcast():
    # issue 16: (n,) targets for an (n, 1) output broadcast to an n x n loss (77.6, not 0)
    model = TwoLayer(3, 4, 1, bias=False).double()
    X = torch.randn(10, 3, dtype=torch.float64)
    with torch.no_grad():
        Y = model(X)
    params = parameters_of(model)
    assert mse_loss(model, X, Y)(params).item() == 0.0
    loss = mse_loss(model, X, Y[:, 0])
    with pytest.raises(ValueError, match=r"\(10,\).*\(10, 1\)"):
        loss(params)
    with pytest.raises(ValueError, match=r"\(4,\).*\(4, 1\)"):
        loss(params, torch.arange(4))


def test_linear_regression_draws_what_chapters_i1_and_i5_drew() -> None:
    """The set-up I.1 and I.5 wrote out: same draws in the same order, same numbers."""
    torch.manual_seed(3)
    X = torch.randn(6, 4, dtype=torch.float64)
    Y = torch.randn(6, 2, dtype=torch.float64)
    model = TwoLayer(4, 3, 2, activation="linear").double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    torch.manual_seed(3)
    problem = linear_regression(4, 3, 2, 6, 0.5)
    torch.testing.assert_close(problem.X, X)
    torch.testing.assert_close(problem.Y, Y)
    for name, p in model.named_parameters():
        torch.testing.assert_close(problem.theta0[name], p.detach())
    expected = 0.5 * (model(X) - Y).pow(2).sum() / 6
    torch.testing.assert_close(problem.loss(problem.theta0), expected)


@pytest.mark.parametrize(("name", "kwargs"), [
    ("width", {"width": 0}), ("n_samples", {"n_samples": 2.0}), ("init_scale", {"init_scale": 0}),
])
def test_linear_regression_names_a_bad_argument(name: str, kwargs: dict) -> None:
    args = {"n_in": 4, "width": 3, "n_out": 2, "n_samples": 6, "init_scale": 0.5} | kwargs
    with pytest.raises(ValueError, match=name):
        linear_regression(**args)


def test_balancedness_is_the_known_matrix_and_its_gradient_vanishes_along_the_flow() -> None:
    problem = linear_regression(4, 3, 2, 6, 0.5)
    torch.testing.assert_close(balancedness(problem.theta0), balance(problem.theta0))
    # d/dt h = -(U^T gU + gU^T U - gV V^T - V gV^T) = 0 for the loss's gradient g
    g, _ = gradient_and_loss(problem.loss, problem.theta0)
    U, V = problem.theta0["U.weight"], problem.theta0["V.weight"]
    gU, gV = g["U.weight"], g["V.weight"]
    dh = U.T @ gU + gU.T @ U - gV @ V.T - V @ gV.T
    assert float(dh.abs().max()) < 1e-12
