"""Tests of flowlaws.flow: the flow integrator, the discrete optimisers, the one-step identity."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.flow import (
    DatasetLoss,
    DivergenceError,
    Trajectory,
    conservation_error,
    cross_entropy_loss,
    gradient_descent,
    gradient_flow,
    mse_loss,
    one_step_change_quadratic,
    one_step_change_two_layer,
    parameters_of,
    train,
)
from flowlaws.models import TwoLayer


def balance(p: dict[str, torch.Tensor]) -> torch.Tensor:
    """``UᵀU − VVᵀ``, the conserved matrix of the linear two-layer net."""
    return p["U.weight"].T @ p["U.weight"] - p["V.weight"] @ p["V.weight"].T


def unit_balance(p: dict[str, torch.Tensor]) -> torch.Tensor:
    """``‖U[:, i]‖² − ‖V[i, :]‖²``, the per-unit laws of the ReLU net (the diagonal)."""
    return p["U.weight"].pow(2).sum(0) - p["V.weight"].pow(2).sum(1)


def laws(p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"balance": balance(p)}


def problem(activation: str = "linear", n: int = 20, seed: int = 0):
    """A 4-3-2 net on a random linear teacher, float64."""
    torch.manual_seed(seed)
    model = TwoLayer(4, 3, 2, activation).double()
    X = torch.randn(n, 4, dtype=torch.float64)
    Y = X @ torch.randn(4, 2, dtype=torch.float64)
    return model, mse_loss(model, X, Y), parameters_of(model)


def test_gradient_flow_conserves_the_law_to_1e8_relative() -> None:
    _, loss, p0 = problem()
    flow = gradient_flow(loss, p0, np.linspace(0, 1.5, 7), laws=laws)
    assert flow.losses[-1] < 0.1 * flow.losses[0]  # the path really moved
    assert conservation_error(flow, balance).max() < 1e-8
    assert conservation_error(flow, "balance").max() < 1e-8
    assert flow.optimizer == "flow"


def test_gradient_descent_keeps_its_old_interface() -> None:
    _, loss, p0 = problem()
    run = gradient_descent(loss, p0, 0.01, 10, record_every=3)
    assert isinstance(run, Trajectory)
    np.testing.assert_allclose(run.times, 0.01 * np.array([0, 3, 6, 9, 10]))
    assert run.params["U.weight"].shape == (5, 2, 3)
    assert torch.equal(run.at(0)["V.weight"], p0["V.weight"])
    assert run.map(balance).shape == (5, 3, 3)
    assert run.losses.shape == (5,) and run.losses[-1] < run.losses[0]


def test_train_gd_matches_the_update_written_by_hand() -> None:
    _, loss, p0 = problem()
    run = train(loss, p0, "gd", 0.05, 3, record_params=True)
    p = dict(p0)
    for _ in range(3):
        g = torch.func.grad(loss)(p)
        p = {k: p[k] - 0.05 * g[k] for k in p}
    for k in p:
        torch.testing.assert_close(run.at(-1)[k], p[k], rtol=0, atol=1e-14)


@pytest.mark.parametrize(
    ("name", "make", "kwargs"),
    [
        ("momentum", lambda ps: torch.optim.SGD(ps, lr=0.03, momentum=0.9, weight_decay=0.01), {}),
        ("adam", lambda ps: torch.optim.Adam(ps, lr=0.03, weight_decay=0.01), {}),
        ("adamw", lambda ps: torch.optim.AdamW(ps, lr=0.03, weight_decay=0.01), {}),
    ],
)
def test_optimisers_match_torch_optim(name, make, kwargs) -> None:
    model, loss, p0 = problem()
    run = train(loss, p0, name, 0.03, 5, weight_decay=0.01, record_params=True, **kwargs)
    opt = make(list(model.parameters()))
    for _ in range(5):
        opt.zero_grad()
        loss(dict(model.named_parameters())).backward()
        opt.step()
    for k, v in model.named_parameters():
        torch.testing.assert_close(run.at(-1)[k], v.detach(), rtol=1e-10, atol=1e-12)


def test_laws_are_recorded_at_every_step_without_parameters() -> None:
    _, loss, p0 = problem()
    run = train(loss, p0, "gd", 0.01, 50, laws=laws)
    assert run.params == {} and run.laws["balance"].shape == (51, 3, 3)
    assert run.steps.tolist() == list(range(51)) and run.lr == 0.01 and run.optimizer == "gd"
    full = train(loss, p0, "gd", 0.01, 50, record_params=True)
    np.testing.assert_allclose(
        conservation_error(run, "balance"), conservation_error(full, balance), atol=1e-15
    )
    with pytest.raises(ValueError, match="record"):
        run.at(0)


def test_one_step_identity_of_the_two_layer_net_to_1e12() -> None:
    _, loss, p0 = problem()
    for lr in (1e-3, 0.1, 0.5):
        g = torch.func.grad(loss)(p0)
        p1 = train(loss, p0, "gd", lr, 1, record_params=True).at(-1)
        change = balance(p1) - balance(p0)
        torch.testing.assert_close(change, one_step_change_two_layer(g, lr), rtol=0, atol=1e-12)
        torch.testing.assert_close(
            change, one_step_change_quadratic(balance, g, lr), rtol=0, atol=1e-12
        )


def test_one_step_identity_holds_for_minibatches_relu_units_and_decay() -> None:
    _, loss, p0 = problem("relu")
    index = torch.tensor([1, 4, 7, 9])
    g = torch.func.grad(lambda p: loss(p, index))(p0)
    lr, wd = 0.2, 0.3
    p1 = {k: p0[k] - lr * (g[k] + wd * p0[k]) for k in p0}
    expected = one_step_change_quadratic(unit_balance, g, lr, params=p0, weight_decay=wd)
    torch.testing.assert_close(unit_balance(p1) - unit_balance(p0), expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="params"):
        one_step_change_quadratic(unit_balance, g, lr, weight_decay=wd)


def test_sgd_is_seeded_and_reproducible() -> None:
    _, loss, p0 = problem()
    a, b, c = (train(loss, p0, "sgd", 0.05, 20, batch_size=5, seed=s, laws=laws) for s in (1, 1, 2))
    assert torch.equal(a.laws["balance"], b.laws["balance"])
    assert not torch.equal(a.laws["balance"], c.laws["balance"])
    assert a.losses[-1] < a.losses[0]


@pytest.mark.parametrize(
    ("optimizer", "batch_size", "match"),
    [("gd", 5, "full-batch"), ("sgd", None, "batch_size"), ("sgd", 21, r"\[1, 20\]"),
     ("rmsprop", None, "optimizer")],
)
def test_bad_optimiser_arguments_are_refused(optimizer, batch_size, match) -> None:
    _, loss, p0 = problem()
    with pytest.raises(ValueError, match=match):
        train(loss, p0, optimizer, 0.1, 5, batch_size=batch_size)


def test_minibatches_need_a_dataset_loss() -> None:
    _, loss, p0 = problem()
    with pytest.raises(ValueError, match="n_samples"):
        train(lambda p: loss(p), p0, "sgd", 0.1, 5, batch_size=4)


@pytest.mark.parametrize("optimizer", ["gd", "momentum", "adam"])
def test_divergence_stops_and_names_step_and_lr(optimizer) -> None:
    _, loss, p0 = problem()
    with pytest.raises(DivergenceError) as info:
        train(loss, p0, optimizer, 50.0 if optimizer != "adam" else 1e300, 500)
    assert info.value.lr == (50.0 if optimizer != "adam" else 1e300)
    assert 0 < info.value.step <= 500
    assert "lr=" in str(info.value) and f"step {info.value.step}" in str(info.value)


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


def test_progress_bar_runs() -> None:
    _, loss, p0 = problem()
    assert len(train(loss, p0, "gd", 0.01, 5, progress=True)) == 6


def test_adam_on_minibatches_and_bad_lr() -> None:
    _, loss, p0 = problem()
    run = train(loss, p0, "adam", 0.01, 30, batch_size=4, laws=laws, seed=5)
    assert run.losses.shape == (31,) and run.laws["balance"].shape == (31, 3, 3)
    for lr in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="lr"):
            train(loss, p0, "gd", lr, 5)


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
