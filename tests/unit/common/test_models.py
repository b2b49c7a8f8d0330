"""Tests of flowlaws.common.models, against answers known in advance."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from flowlaws.common.models import (
    Deep,
    MoE,
    MultiHeadAttention,
    SwiGLU,
    TwoLayer,
    rotary,
    sinusoidal_encoding,
)


def _attention_by_hand(model: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """One sequence, head by head, with matrix products only (an independent computation)."""
    out = torch.zeros_like(x[0])
    for i in range(model.heads):
        q, k, v = x[0] @ model.W_Q[i].T, x[0] @ model.W_K[i].T, x[0] @ model.W_V[i].T
        weights = torch.softmax(q @ k.T / math.sqrt(model.d_k), dim=-1)
        out = out + weights @ v @ model.W_O[i].T
    return out


def test_two_layer_keeps_its_attribute_names_and_shapes() -> None:
    model = TwoLayer(3, 4, 2, activation="tanh")
    assert model.V.weight.shape == (4, 3) and model.U.weight.shape == (2, 4)
    x = torch.randn(5, 3)
    assert torch.allclose(model(x), torch.tanh(x @ model.V.weight.T) @ model.U.weight.T)


def test_deep_with_one_hidden_layer_is_two_layer() -> None:
    deep, two = Deep(3, [4], 2, "gelu"), TwoLayer(3, 4, 2, "gelu")
    two.V.weight.data, two.U.weight.data = deep.layers[0].weight.data, deep.layers[1].weight.data
    x = torch.randn(6, 3)
    assert torch.allclose(deep(x), two(x))
    assert [layer.weight.shape for layer in Deep(2, [3, 4], 5).layers] == [(3, 2), (4, 3), (5, 4)]


def test_swiglu_is_c_of_silu_b_times_a() -> None:
    model = SwiGLU(3, 4, 2)
    x = torch.randn(5, 3)
    A, B, C = model.A.weight, model.B.weight, model.C.weight
    assert A.shape == B.shape == (4, 3) and C.shape == (2, 4)
    assert torch.allclose(model(x), (F.silu(x @ B.T) * (x @ A.T)) @ C.T)


def test_attention_matches_a_head_by_head_computation() -> None:
    model = MultiHeadAttention(6, 3, 2, 4)
    x = torch.randn(1, 5, 6)
    assert model(x).shape == (1, 5, 6)
    assert torch.allclose(model(x)[0], _attention_by_hand(model, x), atol=1e-6)
    assert torch.allclose(model.attention(x).sum(-1), torch.ones(1, 3, 5))


def test_sinusoidal_pe_is_attention_on_shifted_input() -> None:
    plain, sinus = MultiHeadAttention(4, 2, 2, 2), MultiHeadAttention(4, 2, 2, 2, pe="sinusoidal")
    sinus.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 4)
    assert torch.allclose(sinus(x), plain(x + sinusoidal_encoding(3, 4, x.dtype)))
    assert torch.allclose(
        sinusoidal_encoding(2, 4)[1],
        torch.tensor(
            [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], dtype=torch.float64
        ),
    )


def test_rotary_logits_depend_on_the_offset_only() -> None:
    q, k = torch.randn(4), torch.randn(4)
    rq, rk = rotary(q.expand(6, 4)), rotary(k.expand(6, 4))
    logits = rq @ rk.T
    assert torch.allclose(torch.diagonal(logits, 2), torch.full((4,), float(logits[0, 2])))
    assert torch.allclose(rq.norm(dim=1), q.norm().expand(6))
    assert not torch.allclose(logits[0, 1], logits[0, 2])


def test_causal_attention_ignores_later_tokens() -> None:
    model = MultiHeadAttention(4, 2, 2, 2, causal=True)
    x = torch.randn(1, 4, 4)
    y = x.clone()
    y[0, 3] += 1.0
    assert torch.allclose(model(x)[0, :3], model(y)[0, :3])
    assert not torch.allclose(model(x)[0, 3], model(y)[0, 3])


@pytest.mark.parametrize("gate", ["softmax", "sigmoid"])
def test_moe_gates_sum_to_one_and_top_k_keeps_k(gate: str) -> None:
    x = torch.randn(7, 3)
    dense, sparse = MoE(3, 4, 2, 2, gate=gate), MoE(3, 4, 2, 2, gate=gate, top_k=2)
    sparse.load_state_dict(dense.state_dict())
    for model in (dense, sparse):
        assert torch.allclose(model.gates(x).sum(-1), torch.ones(7))
    assert ((sparse.gates(x) > 0).sum(-1) == 2).all()
    z = dense.gate(x)
    expected = (
        torch.softmax(z, -1)
        if gate == "softmax"
        else torch.sigmoid(z) / torch.sigmoid(z).sum(-1, keepdim=True)
    )
    assert torch.allclose(dense.gates(x), expected)


def test_moe_output_is_gated_sum_of_experts() -> None:
    model = MoE(3, 2, 4, 2)
    x = torch.randn(5, 3)
    g = model.gates(x)
    expected = g[:, :1] * model.experts[0](x) + g[:, 1:] * model.experts[1](x)
    assert torch.allclose(model(x), expected)


def test_models_work_in_float64() -> None:
    for model, x in [
        (SwiGLU(2, 3, 2), torch.randn(4, 2)),
        (MultiHeadAttention(4, 2, 2, 2, pe="rope"), torch.randn(2, 3, 4)),
        (MoE(2, 2, 2, 2, top_k=1), torch.randn(4, 2)),
    ]:
        assert model.double()(x.double()).dtype == torch.float64


@pytest.mark.parametrize(
    ("build", "argument"),
    [
        (lambda: TwoLayer(2, 3, 2, activation="softplus"), "activation"),
        (lambda: Deep(2, [3], 2, activation="elu"), "activation"),
        (lambda: Deep(2, [], 2), "widths"),
        (lambda: Deep(2, [3, 0], 2), "widths[1]"),
        (lambda: SwiGLU(2, 0, 2), "width"),
        (lambda: MultiHeadAttention(4, 2, 3, 2, pe="rope"), "d_k"),
        (lambda: MultiHeadAttention(4, 2, 2, 2, pe="alibi"), "pe"),
        (lambda: MoE(3, 4, 2, 2, gate="relu"), "gate"),
        (lambda: MoE(3, 4, 2, 2, top_k=5), "top_k"),
        (lambda: MoE(3, 4, 2, 2, top_k=0), "top_k"),
        (lambda: MoE(3, 4, 2, 2, top_k=1.5), "top_k"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(build, argument: str) -> None:
    with pytest.raises(ValueError, match=f"^{argument.replace('[', '.').replace(']', '.')} "):
        build()


def test_bad_inputs_raise_value_error_naming_x() -> None:
    with pytest.raises(ValueError, match="x must have shape"):
        MultiHeadAttention(4, 2, 2, 2)(torch.randn(3, 4))
    with pytest.raises(ValueError, match="x must have shape"):
        MoE(3, 2, 2, 2)(torch.randn(5, 4))
    with pytest.raises(ValueError, match="x must be a floating-point"):
        MoE(3, 2, 2, 2)(torch.ones(5, 3, dtype=torch.long))
