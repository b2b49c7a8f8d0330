"""Tests of flowlaws.conservation.brackets, against brackets known in closed form."""

from __future__ import annotations

import torch

from flowlaws.common.models import TwoLayer
from flowlaws.conservation import brackets, flat_params, laws, lie_count


def _model(build, seed: int = 0):
    torch.manual_seed(seed)
    return build().double()


def test_the_bracket_of_two_linear_fields_is_their_matrix_commutator() -> None:
    # X(θ) = A θ, Z(θ) = B θ: [X, Z](θ) = DZ X − DX Z = (BA − AB) θ
    gen = torch.Generator().manual_seed(0)
    A, B, theta = (torch.randn(s, generator=gen, dtype=torch.float64) for s in [(4, 4), (4, 4), 4])

    def linear(M):
        return lambda t: (M @ t, (M @ t).norm())

    value, scale = brackets.bracket(linear(A), linear(B))(theta)
    assert torch.allclose(value, (B @ A - A @ B) @ theta, atol=1e-12)
    assert torch.isclose(scale, (B @ A @ theta).norm() + (A @ B @ theta).norm())


def test_commuting_fields_add_no_dimension() -> None:
    # f(x) = (u·v) x: one field, whose brackets with itself vanish; θ ↦ u·v has a fibre of
    # codimension 1, so D − 1 = 5 laws (width 3 > n_in + n_out, outside the r(r+1)/2 regime)
    model = _model(lambda: TwoLayer(1, 3, 1, "linear"))
    found = lie_count.count(model, laws.random_inputs(model, 4))
    assert (found.jacobian_rank, found.lie_dim, found.n_laws) == (1, 1, 5)
    assert found.certified


def test_one_bracket_at_a_time_agrees_with_the_batched_level() -> None:
    model = _model(lambda: TwoLayer(3, 2, 2, "linear"))
    X = laws.random_inputs(model, 6)
    theta, layout = flat_params.model_layout(model)
    f = flat_params.flat_model_fn(model, layout)
    fast = brackets.brackets(f, theta, X, 2, 5, torch.Generator().manual_seed(3), batched=True)
    slow = brackets.brackets(f, theta, X, 2, 5, torch.Generator().manual_seed(3), batched=False)
    assert fast.shape == (5, theta.numel()) and torch.allclose(fast, slow, atol=1e-12)
    assert fast.norm(dim=1).max() < 1.0 + 1e-12  # divided by the size of their terms


def test_reference_one_bracket_at_a_time_agrees_with_the_batched_count() -> None:
    model = _model(lambda: TwoLayer(3, 2, 2, "linear"))
    X = laws.random_inputs(model, 6)
    fast, slow = lie_count.count(model, X, batched=True), lie_count.count(model, X, batched=False)
    assert (fast.n_laws, fast.dims) == (slow.n_laws, slow.dims)
