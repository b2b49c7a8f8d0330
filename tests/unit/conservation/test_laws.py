"""Tests of flowlaws.conservation.laws, against answers known in advance."""

from __future__ import annotations

import pytest
import torch

from flowlaws.common.models import Deep, MoE, MultiHeadAttention, SwiGLU, TwoLayer
from flowlaws.conservation import laws, lie_count, moe


def _model(build, seed: int = 0):
    torch.manual_seed(seed)
    return build().double()


def _count(model, n_inputs: int, **kwargs) -> lie_count.LawCount:
    return lie_count.count(model, laws.random_inputs(model, n_inputs, tokens=3), **kwargs)


LAW_MODELS = [
    lambda: TwoLayer(3, 4, 2, "linear", bias=True),
    lambda: TwoLayer(3, 4, 2, "relu", bias=True),
    lambda: Deep(3, [4, 3], 2, "linear"),
    lambda: Deep(3, [4, 3], 2, "relu"),
    lambda: SwiGLU(3, 4, 2),
    lambda: MultiHeadAttention(5, 2, 3, 2),
    lambda: MultiHeadAttention(5, 2, 3, 2, pe="sinusoidal", causal=True),
    lambda: MultiHeadAttention(5, 2, 4, 3, pe="rope"),
    lambda: MoE(3, 3, 2, 2),
    lambda: MoE(3, 3, 2, 2, top_k=2),
]


def _transposed_qk(p: laws.Params) -> dict[str, torch.Tensor]:
    Q, K = p["W_Q"][0], p["W_K"][0]
    return {"QtQ-KtK": Q.T @ Q - K.T @ K}


def _full_qk(p: laws.Params) -> dict[str, torch.Tensor]:
    Q, K = p["W_Q"][0], p["W_K"][0]
    return {"QQt-KKt": Q @ Q.T - K @ K.T}


def _swiglu_b(p: laws.Params) -> dict[str, torch.Tensor]:
    return {"B": p["B.weight"].pow(2).sum(1) - p["C.weight"].pow(2).sum(0)}


@pytest.mark.parametrize("build", LAW_MODELS)
def test_invariants_are_orthogonal_to_every_jacobian_row(build) -> None:
    model = _model(build)
    assert laws.invariants(model)
    assert laws.orthogonality(model, laws.random_inputs(model, 20, tokens=4)) < 1e-10


@pytest.mark.parametrize(
    ("build", "candidate"),
    [
        (lambda: MultiHeadAttention(5, 2, 3, 2), _transposed_qk),  # the seed's convention
        (lambda: MultiHeadAttention(5, 2, 4, 2, pe="rope"), _full_qk),  # RoPE breaks gl(d_k)
        (lambda: SwiGLU(3, 4, 2), _swiglu_b),  # silu is not homogeneous
    ],
)
def test_wrong_candidates_are_not_orthogonal(build, candidate) -> None:
    model = _model(build)
    X = laws.random_inputs(model, 20, tokens=4)
    assert laws.orthogonality(model, X, candidate=candidate) > 1e-3


def test_the_sigmoid_gate_does_not_conserve_the_sum_of_gate_vectors() -> None:
    rows = {
        (r["gate"], r["top_k"]): r
        for r in moe.moe_claims_vs_count(
            gatings=(("softmax", None), ("sigmoid", None)), n_inputs=100
        )
    }
    assert rows["softmax", None]["agrees"] and rows["softmax", None]["n_laws"] == 9
    sigmoid = rows["sigmoid", None]
    assert not sigmoid["gate_sum_hold"] and sigmoid["gate_sum_cosine"] > 1e-3
    assert sigmoid["experts_hold"] and not sigmoid["agrees"]


@pytest.mark.parametrize(("gate", "conserved"), [("softmax", True), ("sigmoid", False)])
def test_gate_sum_drift_is_a_counter_example_for_sigmoid(gate: str, conserved: bool) -> None:
    model = _model(lambda: MoE(3, 3, 2, 2, gate=gate))
    X = laws.random_inputs(model, 10)
    Y = torch.randn(10, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    rates = laws.drift(model, X, Y)
    assert float(rates["experts.0.units"].abs().max()) < 1e-12
    assert (float(rates["gate.sum"].abs().max()) < 1e-12) == conserved


def test_top_1_freezes_the_whole_gate() -> None:
    model = _model(lambda: MoE(3, 3, 2, 2, top_k=1))
    found = _count(model, 60)
    # g = 1 on the selected expert: no gradient reaches gate.weight (experts x d_model)
    assert found.n_laws == 3 * 2 + 3 * 3 and not found.certified


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: lie_count.count(m, torch.ones(4, 3, dtype=torch.long)),
         "inputs must be a float"),
        (lambda m: lie_count.count(m, torch.randn(4, 2)), "inputs must have shape"),
        (lambda m: lie_count.count(m, torch.randn(4, 3, 1)), "inputs must have shape"),
        (lambda m: laws.orthogonality(m, [[1.0, 2.0, 3.0]]), "inputs must be a float"),
        (lambda m: lie_count.count(m, torch.randn(4, 3), n_points=0), "n_points"),
    ],
)
def test_bad_inputs_raise_value_error_naming_them(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(TwoLayer(3, 2, 2))


def test_attention_inputs_need_tokens_and_d_model() -> None:
    model = MultiHeadAttention(4, 2, 2, 2)
    with pytest.raises(ValueError, match=r"inputs must have shape \(n, tokens, 4\)"):
        lie_count.count(model, torch.randn(5, 4))
