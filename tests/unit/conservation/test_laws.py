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
    lambda: MoE(3, 3, 2, 2, gate="sigmoid"),
    lambda: MoE(3, 3, 2, 2, gate="sigmoid", top_k=1),
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
    rates = laws.drift(model, X, Y, candidate=laws.seed_claim_fn(model))
    assert float(rates["experts.0.units"].abs().max()) < 1e-12
    assert (float(rates["gate.sum"].abs().max()) < 1e-12) == conserved
    assert ("gate.sum" in laws.drift(model, X, Y)) == conserved  # the laws follow the gate


@pytest.mark.parametrize("gate", ["softmax", "sigmoid"])
def test_top_1_freezes_the_whole_gate(gate: str) -> None:
    model = _model(lambda: MoE(3, 3, 2, 2, gate=gate, top_k=1))
    found = _count(model, 60)
    # g = 1 on the selected expert: no gradient reaches gate.weight (experts x d_model)
    assert found.n_laws == 3 * 2 + 3 * 3 and found.known == found.n_laws and found.certified
    assert laws.invariants(model)["gate.weight"].shape == (3, 3)
    assert "gate.sum" in laws.seed_claims(model) and "gate.sum" not in laws.invariants(model)


@pytest.mark.parametrize("gate", ["softmax", "sigmoid"])
def test_a_single_expert_freezes_the_gate(gate: str) -> None:
    model = _model(lambda: MoE(2, 1, 2, 2, gate=gate))  # g = 1 whatever the gate
    found = _count(model, 40)
    assert found.n_laws == found.known == 2 + 2 and found.certified
    assert set(laws.invariants(model)) == {"experts.0.units", "gate.weight"}


def test_moe_invariants_follow_the_gate_and_the_seed_claims_do_not() -> None:
    d, E, width = 3, 3, 2
    expected = {("softmax", None): E * width + d, ("softmax", 2): E * width + d,
                ("softmax", 1): E * (width + d), ("sigmoid", None): E * width,
                ("sigmoid", 2): E * width, ("sigmoid", 1): E * (width + d)}
    for row in moe.moe_claims_vs_count(d, E, width, 2, n_inputs=100):
        key = (row["gate"], row["top_k"])
        assert row["n_laws"] == row["known"] == expected[key] and row["certified"], row
        assert row["claimed"] == E * width + d
        assert row["agrees"] == (key in {("softmax", None), ("softmax", 2)})
    sigmoid = _model(lambda: MoE(d, E, width, 2, gate="sigmoid"))
    assert set(laws.invariants(sigmoid)) == {f"experts.{e}.units" for e in range(E)}
    assert set(laws.seed_claims(sigmoid)) == set(laws.invariants(sigmoid)) | {"gate.sum"}


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


class _Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = TwoLayer(3, 2, 3, "linear"), TwoLayer(3, 2, 2, "linear")

    def forward(self, x):
        return self.b(self.a(x))


@pytest.mark.parametrize(
    ("build", "keys", "message"),
    [
        (lambda: TwoLayer(3, 2, 2, "gelu"), None, "no known laws"),
        (lambda: Deep(3, [2, 2], 2, "tanh"), None, "no known laws"),
        (_Stack, None, "no known laws for _Stack"),
        (lambda: torch.nn.Sequential(TwoLayer(3, 2, 2, "linear")), None, "no known laws"),
        (lambda: TwoLayer(3, 2, 2, "linear"), ["hiden"], "keys must name laws among"),
        (lambda: TwoLayer(3, 2, 2, "linear"), [], "keys must name laws among"),
    ],
)
def test_orthogonality_refuses_when_nothing_would_be_checked(build, keys, message) -> None:
    # each of these used to return exactly 0.0, the value that reads "the law holds"
    model = _model(build)
    with pytest.raises(ValueError, match=message):
        laws.orthogonality(model, torch.randn(5, 3, dtype=torch.float64), keys)


def test_orthogonality_checks_a_candidate_on_a_composite_module() -> None:
    model = _model(_Stack)
    X = torch.randn(8, 3, dtype=torch.float64)
    inner = lambda p: {"a": p["a.V.weight"] @ p["a.V.weight"].T - p["a.U.weight"].T  # noqa: E731
                       @ p["a.U.weight"]}
    assert laws.orthogonality(model, X, candidate=inner) < 1e-10
    with pytest.raises(ValueError, match="no known laws for _Stack"):
        laws.drift(model, X, torch.zeros(8, 2, dtype=torch.float64))


def test_orthogonality_is_nan_when_every_gradient_vanishes() -> None:
    model = _model(lambda: TwoLayer(3, 2, 2, "linear"))
    for p in model.parameters():
        p.data.zero_()  # the law gradients and the Jacobian are all zero at θ = 0
    assert torch.isnan(torch.tensor(laws.orthogonality(model, torch.randn(4, 3).double())))


def test_count_of_a_model_without_parameters_says_so() -> None:
    with pytest.raises(ValueError, match="has no parameters"):
        lie_count.count(torch.nn.ReLU(), torch.randn(4, 3, dtype=torch.float64))


def test_attention_inputs_need_tokens_and_d_model() -> None:
    model = MultiHeadAttention(4, 2, 2, 2)
    with pytest.raises(ValueError, match=r"inputs must have shape \(n, tokens, 4\)"):
        lie_count.count(model, torch.randn(5, 4))
