"""Tests of flowlaws.conservation.laws, against answers known in advance."""

from __future__ import annotations

import pytest
import torch

from flowlaws.common.models import Deep, MoE, MultiHeadAttention, SwiGLU, TwoLayer
from flowlaws.common.transformer import CausalTransformer, rms_norm
from flowlaws.conservation import count_tables, laws, lie_count


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
        for r in count_tables.moe_claims_vs_count(
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
    for row in count_tables.moe_claims_vs_count(d, E, width, 2, n_inputs=100):
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
        (lambda: torch.nn.Sequential(torch.nn.Linear(3, 2)), None, "no known laws for Sequential"),
        (lambda: torch.nn.Sequential(TwoLayer(3, 2, 2, "gelu")), None, "has no known laws"),
        (_Stack, ["a/hiden"], "keys must name laws among"),
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
    with pytest.raises(ValueError, match="no known laws for Sequential"):
        laws.drift(torch.nn.Sequential(torch.nn.Linear(3, 2)).double(), X,
                   torch.zeros(8, 2, dtype=torch.float64))


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


# --- composite modules: the walk over library blocks ---------------------------------------


def test_a_stack_of_blocks_gets_per_block_laws_keyed_by_qualified_name() -> None:
    stack = _model(lambda: torch.nn.Sequential(TwoLayer(3, 4, 3, "linear"), SwiGLU(3, 4, 2)))
    assert set(laws.invariants(stack)) == {"0/hidden", "1/units"}
    assert torch.equal(laws.invariants(stack)["1/units"], laws.invariants(stack[1])["units"])
    X = torch.randn(12, 3, dtype=torch.float64)
    assert laws.orthogonality(stack, X) < 1e-10
    assert laws.orthogonality(stack, X, ["1/units"]) < 1e-10
    rates = laws.drift(stack, X, torch.randn(12, 2, dtype=torch.float64))
    assert set(rates) == {"0/hidden", "1/units"}
    assert max(float(v.abs().max()) for v in rates.values()) < 1e-12
    nested = _model(_Stack)
    assert laws.law_blocks(nested).keys() == {"a", "b"} and laws.unclaimed_parameters(nested) == []


def test_the_transformer_walks_to_every_attention_and_swiglu_block() -> None:
    model = _model(lambda: CausalTransformer(7, 8, 3, 2, 4, 4, 6))
    assert list(laws.law_blocks(model)) == [f"layers.{i}.{b}" for i in range(3)
                                            for b in ("attn", "ffn")]
    assert laws.unclaimed_parameters(model) == ["embed.weight", "unembed.weight"]
    assert "layers.2.attn/head1.QK" in laws.invariants(model)
    ids = torch.randint(0, 7, (3, 5), generator=torch.Generator().manual_seed(0))
    assert laws.orthogonality(model, ids) < 1e-10  # token ids as inputs, embedding included


class _Gained(torch.nn.Module):
    """``x + attn(γ ⊙ rms(x))``: a learnable RMSNorm gain in front of a library block."""

    def __init__(self, d: int = 4) -> None:
        super().__init__()
        self.gain = torch.nn.Parameter(1 + torch.rand(d))
        self.attn = MultiHeadAttention(d, 2, 2, 2, pe="rope", causal=True)

    def forward(self, x):
        return x + self.attn(self.gain * rms_norm(x))


def _gain_law(p: laws.Params) -> dict[str, torch.Tensor]:
    cols = sum(p[f"attn.W_{m}"].pow(2).sum((0, 1)) for m in "QKV")
    return {"gain": p["gain"].pow(2) - cols}


def test_a_norm_gain_adds_a_law_that_is_not_claimed_and_the_block_laws_still_hold() -> None:
    model = _model(_Gained)
    X = torch.randn(6, 5, 4, dtype=torch.float64)
    assert laws.unclaimed_parameters(model) == ["gain"]
    assert all(k.startswith("attn/") for k in laws.invariants(model))
    assert laws.orthogonality(model, X) < 1e-10  # the block laws hold with the gain in front
    assert laws.orthogonality(model, X, candidate=_gain_law) < 1e-10  # an extra, unclaimed law
    single = _model(lambda: MultiHeadAttention(4, 2, 2, 2, pe="rope", causal=True))
    cols = lambda p: {"c": sum(p[f"W_{m}"].pow(2).sum((0, 1)) for m in "QKV")}  # noqa: E731
    assert laws.orthogonality(single, X, candidate=cols) > 1e-3  # no law without the gain


class _Leaky(torch.nn.Module):
    """Two SwiGLU blocks; the second block's ``A`` is also read outside it: its law breaks."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(SwiGLU(3, 4, 3), SwiGLU(3, 4, 3))

    def forward(self, x):
        y = x + self.blocks[0](x)
        return y + self.blocks[1](y) + (y @ self.blocks[1].A.weight.T)[:, :3]


def test_the_walk_can_fail_a_block_whose_law_is_broken() -> None:
    model = _model(_Leaky)
    X = torch.randn(10, 3, dtype=torch.float64)
    assert laws.orthogonality(model, X, ["blocks.0/units"]) < 1e-10
    assert laws.orthogonality(model, X, ["blocks.1/units"]) > 1e-3
    assert laws.orthogonality(model, X) > 1e-3  # the whole check fails with one broken block
    rates = laws.drift(model, X, torch.randn(10, 3, dtype=torch.float64))
    assert float(rates["blocks.0/units"].abs().max()) < 1e-12
    assert float(rates["blocks.1/units"].abs().max()) > 1e-3


def test_a_weight_tied_to_a_block_is_refused() -> None:
    model = _model(lambda: torch.nn.Sequential(SwiGLU(3, 4, 3), torch.nn.Linear(4, 3, bias=False)))
    model[1].weight = model[0].C.weight  # the Linear shares the block's C
    with pytest.raises(ValueError, match="shared by a library block and another module"):
        laws.invariants(model)
    reused = torch.nn.Sequential(model[0], model[0])  # one block used twice: still its laws
    assert set(laws.invariants(reused)) == {"0/units"}
