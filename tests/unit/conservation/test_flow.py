"""Tests of flowlaws.conservation.flow, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.common.models import TwoLayer
from flowlaws.conservation.flow import (
    DatasetLoss,
    Trajectory,
    conservation_error,
    cross_entropy_loss,
    gradient_flow,
    mse_loss,
    parameters_of,
)

from ..problems import balance, laws, problem


def test_gradient_flow_conserves_the_law_to_1e8_relative() -> None:
    _, loss, p0 = problem()
    flow = gradient_flow(loss, p0, np.linspace(0, 1.5, 7), laws=laws)
    assert flow.losses[-1] < 0.1 * flow.losses[0]  # the path really moved
    assert conservation_error(flow, balance).max() < 1e-8
    assert conservation_error(flow, "balance").max() < 1e-8
    assert flow.optimizer == "flow"


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


def test_conservation_error_of_a_trajectory_built_by_hand() -> None:
    _, loss, p0 = problem()
    params = {k: torch.stack([v, 2 * v]) for k, v in p0.items()}
    run = Trajectory(np.array([0.0, 1.0]), params, np.zeros(2))
    sq_norm = sum(float(v.pow(2).sum()) for v in p0.values())
    expected = float((3 * balance(p0)).norm()) / sq_norm  # h(2θ) − h(θ) = 3h(θ)
    np.testing.assert_allclose(conservation_error(run, balance), [0.0, expected])
    np.testing.assert_allclose(
        conservation_error(run, balance, relative=False), [0.0, expected * sq_norm]
    )


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
