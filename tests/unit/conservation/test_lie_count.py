"""Tests of flowlaws.conservation.lie_count, against answers known in advance."""

from __future__ import annotations

import pytest
import torch

from flowlaws.common.models import Deep, MultiHeadAttention, SwiGLU, TwoLayer
from flowlaws.conservation import laws, lie_count


def _model(build, seed: int = 0):
    torch.manual_seed(seed)
    return build().double()


def _count(model, n_inputs: int, **kwargs) -> lie_count.LawCount:
    return lie_count.count(model, laws.random_inputs(model, n_inputs, tokens=3), **kwargs)


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


def test_deep_linear_counts_the_balancedness_laws_of_every_layer() -> None:
    found = _count(_model(lambda: Deep(2, [2, 2], 2, "linear")), 6)
    assert found.known == 2 * 3 and found.n_laws >= found.known


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


def test_a_rank_just_above_the_threshold_is_not_trusted() -> None:
    # two inputs, one scaled by 7e-9: the Jacobian has as many rows as its rank, σ_3 does not
    # exist, and the gap read against the floor ε σ_max looks huge (~3e7) while σ_2 sits
    # only ~8x above the threshold RANK_TOL · σ_max
    model = _model(lambda: TwoLayer(2, 1, 1, "linear"))
    X = torch.tensor([[1.0, 0.0], [0.0, 7e-9]], dtype=torch.float64)
    weak = lie_count.count(model, X)
    assert weak.gap > lie_count.MIN_GAP and weak.margin < 10
    assert not weak.trusted and not weak.certified
    assert any("times the rank threshold" in note for note in weak.notes)
    X[1, 1] = 1e-3
    clear = lie_count.count(model, X)
    assert clear.margin > 1e5 and clear.trusted and clear.certified


def test_the_margin_of_the_book_models_is_large() -> None:
    for build, n in [(lambda: SwiGLU(3, 2, 2), 40), (lambda: MultiHeadAttention(4, 2, 2, 2), 30)]:
        found = _count(_model(build), n)
        assert found.margin > 1e3 * lie_count.MIN_MARGIN and found.certified


def test_known_laws_end_the_levels_without_a_confirming_one() -> None:
    # the known laws' gradients are orthogonal to every bracket: once the span reaches
    # D - known it cannot grow, and the level that would only confirm it is skipped
    model = _model(lambda: TwoLayer(3, 2, 2, "linear"))
    X = laws.random_inputs(model, 6)
    fast, full = lie_count.count(model, X), lie_count.count(model, X, use_known=False)
    assert fast.n_laws == full.n_laws == 3 and fast.certified and full.certified
    assert [dims + [dims[-1]] for dims in fast.dims] == full.dims
    relu = _model(lambda: TwoLayer(3, 4, 2, "relu"))
    found = _count(relu, 60)
    assert found.dims == [[20 - 4]] * 3 and found.certified  # the Jacobian alone reaches it
    assert _count(relu, 60, use_known=False).dims == [[16, 16]] * 3


def test_lanczos_ranks_give_the_count_of_a_full_svd() -> None:
    # D = 384, 40 known laws: the Jacobian's rank and D − known confirmed by Lanczos
    model = _model(lambda: MultiHeadAttention(12, 2, 4, 4))
    X = laws.random_inputs(model, 6, tokens=3)
    fast, exact = lie_count.count(model, X), lie_count.count(model, X, exact_svd=True)
    assert fast.n_laws == exact.n_laws == 40 and fast.dims == exact.dims
    assert fast.certified and exact.certified
    assert fast.margin <= exact.margin * (1 + 1e-6) and fast.margin > 1e3
