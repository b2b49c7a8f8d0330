"""Conservation laws: the seed's invariants checked directly, and counts against closed forms.

Every pinned count below comes from a closed form (a symmetry group's dimension), never from
the library's own output:

- ``U V`` with width ``r ≤ n_in + n_out``: the symmetric part of gl(r), ``r(r+1)/2`` laws;
  without brackets one would count the fibre dimension of ``(U, V) ↦ U V``: ``r²`` when
  ``r ≤ min(n_in, n_out)``, and ``D − n_in·n_out`` when the product fills every matrix.
- ReLU and SwiGLU: one rescaling per hidden unit; GELU and SiLU: none.
- attention: gl(d_k) on (Q_i, K_i) and gl(d_v) on (V_i, O_i) per head, symmetric parts
  ``d(d+1)/2``; sinusoidal PE the same; RoPE: the commutant of the rotations is C^{d_k/2},
  whose symmetric part (the real scalings of each 2×2 block) gives ``d_k/2``.
"""

from __future__ import annotations

import pytest
import torch

from flowlaws import laws
from flowlaws.models import Deep, MoE, MultiHeadAttention, SwiGLU, TwoLayer


def _model(build, seed: int = 0):
    torch.manual_seed(seed)
    return build().double()


def _count(model, n_inputs: int, **kwargs) -> laws.LawCount:
    return laws.count(model, laws.random_inputs(model, n_inputs, tokens=3), **kwargs)


@pytest.mark.parametrize(("n_in", "r", "n_out"), [(3, 2, 2), (4, 2, 3), (2, 3, 2), (2, 4, 3)])
def test_linear_two_layer_has_r_r_plus_1_over_2_laws(n_in: int, r: int, n_out: int) -> None:
    found = _count(_model(lambda: TwoLayer(n_in, r, n_out, "linear")), 3 * n_in)
    assert found.n_laws == r * (r + 1) // 2
    assert found.certified and found.known == found.n_laws
    if r <= min(n_in, n_out):  # the Jacobian alone: the fibre of (U, V) -> UV, dimension r²
        assert found.n_params - found.jacobian_rank == r * r
    else:  # UV reaches every n_out x n_in matrix
        assert found.jacobian_rank == n_in * n_out
    assert found.lie_dim > found.jacobian_rank  # the brackets matter


def test_commuting_fields_add_no_dimension() -> None:
    # f(x) = (u·v) x: one field, whose brackets with itself vanish; θ ↦ u·v has a fibre of
    # codimension 1, so D − 1 = 5 laws (width 3 > n_in + n_out, outside the r(r+1)/2 regime)
    found = _count(_model(lambda: TwoLayer(1, 3, 1, "linear")), 4)
    assert (found.jacobian_rank, found.lie_dim, found.n_laws) == (1, 1, 5)
    assert found.certified


@pytest.mark.parametrize(("n_in", "width", "n_out"), [(3, 4, 2), (2, 3, 3)])
def test_relu_two_layer_has_one_law_per_hidden_unit(n_in: int, width: int, n_out: int) -> None:
    model = _model(lambda: TwoLayer(n_in, width, n_out, "relu"))
    found = _count(model, 2 * width * (n_in + n_out) + 10)
    assert found.n_laws == width and found.certified


@pytest.mark.parametrize("activation", ["gelu", "silu"])
@pytest.mark.parametrize(("n_in", "width", "n_out"), [(2, 3, 2), (3, 2, 1)])
def test_gelu_and_silu_have_no_law(activation: str, n_in: int, width: int, n_out: int) -> None:
    model = _model(lambda: TwoLayer(n_in, width, n_out, activation))
    found = _count(model, 2 * width * (n_in + n_out))
    assert found.n_laws == 0 and found.lie_dim == found.n_params
    assert laws.invariants(model) == {} and found.certified


@pytest.mark.parametrize(("n_in", "width", "n_out"), [(3, 2, 2), (2, 3, 2)])
def test_swiglu_has_one_law_per_hidden_unit(n_in: int, width: int, n_out: int) -> None:
    found = _count(_model(lambda: SwiGLU(n_in, width, n_out)), 4 * width * (2 * n_in + n_out))
    assert found.n_laws == width and found.certified


@pytest.mark.parametrize("pe", [None, "sinusoidal"])
@pytest.mark.parametrize(("d_model", "heads", "d_k", "d_v"), [(4, 2, 2, 2), (3, 1, 2, 3)])
def test_attention_has_the_gl_dk_and_gl_dv_laws(pe, d_model, heads, d_k, d_v) -> None:
    found = _count(_model(lambda: MultiHeadAttention(d_model, heads, d_k, d_v, pe=pe)), 30)
    assert found.n_laws == heads * (d_k * (d_k + 1) // 2 + d_v * (d_v + 1) // 2)
    assert found.certified


@pytest.mark.parametrize(("d_model", "heads", "d_k", "d_v"), [(4, 2, 2, 2), (4, 1, 4, 2)])
def test_rope_attention_keeps_one_qk_law_per_block(d_model, heads, d_k, d_v) -> None:
    found = _count(_model(lambda: MultiHeadAttention(d_model, heads, d_k, d_v, pe="rope")), 30)
    assert found.n_laws == heads * (d_k // 2 + d_v * (d_v + 1) // 2)
    assert found.certified


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


@pytest.mark.parametrize("build", LAW_MODELS)
def test_invariants_are_orthogonal_to_every_jacobian_row(build) -> None:
    model = _model(build)
    assert laws.invariants(model)
    assert laws.orthogonality(model, laws.random_inputs(model, 20, tokens=4)) < 1e-10


def _transposed_qk(p: laws.Params) -> dict[str, torch.Tensor]:
    Q, K = p["W_Q"][0], p["W_K"][0]
    return {"QtQ-KtK": Q.T @ Q - K.T @ K}


def _full_qk(p: laws.Params) -> dict[str, torch.Tensor]:
    Q, K = p["W_Q"][0], p["W_K"][0]
    return {"QQt-KKt": Q @ Q.T - K @ K.T}


def _swiglu_b(p: laws.Params) -> dict[str, torch.Tensor]:
    return {"B": p["B.weight"].pow(2).sum(1) - p["C.weight"].pow(2).sum(0)}


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
        for r in laws.moe_claims_vs_count(
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


def test_deep_linear_counts_the_balancedness_laws_of_every_layer() -> None:
    found = _count(_model(lambda: Deep(2, [2, 2], 2, "linear")), 6)
    assert found.known == 2 * 3 and found.n_laws >= found.known


def test_reference_one_bracket_at_a_time_agrees_with_the_batched_count() -> None:
    model = _model(lambda: TwoLayer(3, 2, 2, "linear"))
    X = laws.random_inputs(model, 6)
    fast, slow = laws.count(model, X, batched=True), laws.count(model, X, batched=False)
    assert (fast.n_laws, fast.dims) == (slow.n_laws, slow.dims)


def test_disagreeing_points_are_reported() -> None:
    model = _model(lambda: TwoLayer(3, 2, 2, "linear"))
    for p in model.parameters():
        p.data.zero_()  # every field vanishes at θ = 0: the rank there is too low
    found = _count(model, 6)
    assert not found.consistent and not found.certified
    assert found.n_laws == 3 and found.dims[0][0] == 0
    assert any("disagree" in note for note in found.notes)


def test_a_small_gap_is_not_a_confident_count() -> None:
    found = _count(_model(lambda: TwoLayer(3, 2, 2, "linear")), 6, min_gap=1e300)
    assert not found.trusted and not found.certified
    assert any("not to be trusted" in note for note in found.notes)
    assert "NOT certified" in str(found)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: laws.count(m, torch.ones(4, 3, dtype=torch.long)), "inputs must be a float"),
        (lambda m: laws.count(m, torch.randn(4, 2)), "inputs must have shape"),
        (lambda m: laws.count(m, torch.randn(4, 3, 1)), "inputs must have shape"),
        (lambda m: laws.orthogonality(m, [[1.0, 2.0, 3.0]]), "inputs must be a float"),
        (lambda m: laws.count(m, torch.randn(4, 3), n_points=0), "n_points"),
    ],
)
def test_bad_inputs_raise_value_error_naming_them(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(TwoLayer(3, 2, 2))


def test_attention_inputs_need_tokens_and_d_model() -> None:
    model = MultiHeadAttention(4, 2, 2, 2)
    with pytest.raises(ValueError, match=r"inputs must have shape \(n, tokens, 4\)"):
        laws.count(model, torch.randn(5, 4))
