"""Tests of flowlaws.conservation.flat_params: θ and its named tensors round-trip."""

import numpy as np
import pytest
import torch

from flowlaws.common.models import MultiHeadAttention, TwoLayer
from flowlaws.conservation.flat_params import (
    block_params,
    check_inputs,
    flat_model_fn,
    flatten,
    jacobian,
    model_layout,
    random_inputs,
    unflatten,
)


def test_flatten_and_unflatten_round_trip_tensors_and_numpy_arrays():
    params = {"a": torch.arange(6.0).reshape(2, 3), "b": torch.tensor(7.0), "c": torch.ones(4)}
    theta, layout = flatten(params)
    assert theta.dtype == torch.float64 and theta.shape == (11,)
    for back in (unflatten(theta, layout), unflatten(theta.numpy(), layout)):
        assert all(torch.equal(back[k], params[k].double()) for k in params)


def test_unflatten_reads_a_strided_numpy_column():
    theta, layout = flatten({"w": torch.arange(6.0).reshape(3, 2)})
    columns = np.stack([theta.numpy(), 2 * theta.numpy()], axis=1)  # solve_ivp's sol.y layout
    assert torch.equal(unflatten(columns[:, 1], layout)["w"], 2 * torch.arange(6.0).reshape(3, 2))


def test_flat_model_fn_is_the_model_and_its_jacobian_has_one_row_per_output():
    torch.manual_seed(0)
    model = TwoLayer(3, 4, 2).double()
    theta, layout = model_layout(model)
    X = random_inputs(model, 5)
    assert torch.allclose(flat_model_fn(model, layout)(theta, X), model(X))
    J = jacobian(flat_model_fn(model, layout), theta, X)
    assert J.shape == (5 * 2, theta.numel())
    assert torch.allclose(J, jacobian(flat_model_fn(model, layout), theta, X, batched=False))


def test_check_inputs_names_the_argument_and_the_shape_it_wants():
    model = MultiHeadAttention(8, 2, 4, 4)
    with pytest.raises(ValueError, match=r"inputs must have shape \(n, tokens, 8\)"):
        check_inputs(model, torch.zeros(3, 8))
    with pytest.raises(ValueError, match="float32 or float64"):
        check_inputs(model, torch.zeros(3, 2, 8, dtype=torch.int32))


def test_block_params_strips_the_prefix() -> None:
    params = {"a.b.w": torch.ones(1), "a.bc.w": torch.zeros(1)}
    assert list(block_params(params, "a.b")) == ["w"]
    assert block_params(params, "") == params
