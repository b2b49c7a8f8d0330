"""Tests of flowlaws.conservation.training, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.common.optim import DivergenceError
from flowlaws.conservation.flow import (
    Trajectory,
    conservation_error,
)
from flowlaws.conservation.training import gradient_descent, train

from ..problems import balance, laws, problem


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
