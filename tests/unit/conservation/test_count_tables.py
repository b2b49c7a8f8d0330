"""Tests of flowlaws.conservation.count_tables, against answers known in advance."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
import torch  # noqa: E402

from flowlaws.book.ledger import verdict_of  # noqa: E402
from flowlaws.common.models import Deep, MultiHeadAttention, SwiGLU, TwoLayer  # noqa: E402
from flowlaws.conservation import count_tables  # noqa: E402
from flowlaws.conservation.count_tables import closed_form, count_table  # noqa: E402
from flowlaws.conservation.laws import drift, random_inputs, seed_claim_fn  # noqa: E402


def test_closed_forms_of_each_theorem():
    assert closed_form(TwoLayer(3, 5, 2, "relu")) == 5
    assert closed_form(TwoLayer(3, 5, 2, "gelu")) == 0
    assert closed_form(TwoLayer(3, 5, 2, "silu")) == 0
    assert closed_form(SwiGLU(3, 7, 2)) == 7
    assert closed_form(MultiHeadAttention(8, 3, 4, 2)) == 3 * (10 + 3)
    assert closed_form(MultiHeadAttention(8, 3, 4, 2, pe="sinusoidal")) == 3 * (10 + 3)
    assert closed_form(MultiHeadAttention(8, 3, 4, 2, pe="rope")) == 3 * (2 + 3)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (Deep(1, [3], 1, "linear"), 5),  # not 3·4/2 = 6: a single input and output
        (TwoLayer(1, 3, 1, "linear"), 5),
        (TwoLayer(3, 2, 2, "linear"), 3),
        (Deep(2, [2, 2], 2, "linear"), 6),
        (Deep(3, [3, 3], 3, "linear"), 12),
        (Deep(2, [2, 5], 3, "relu"), 7),
        (Deep(3, [4, 3], 2, "relu", bias=True), 7),
    ],
)
def test_closed_forms_of_deep_and_linear_networks(model, expected):
    assert closed_form(model) == expected


def test_closed_form_refuses_models_without_one():
    with pytest.raises(ValueError, match="Deep gelu"):
        closed_form(Deep(3, [2], 2, "gelu"))
    with pytest.raises(ValueError, match="Sequential"):
        closed_form(torch.nn.Sequential(TwoLayer(3, 2, 2)))


def test_count_table_puts_counts_next_to_closed_forms():
    torch.manual_seed(0)
    swiglu = SwiGLU(3, 2, 2).double()
    gelu = TwoLayer(2, 2, 1, "gelu").double()
    cases = [("SwiGLU", "(3,2,2)", swiglu, random_inputs(swiglu, 20)),
             ("GELU", "(2,2,1)", gelu, random_inputs(gelu, 20))]
    rows = count_table(cases, progress=False)
    assert [r["laws"] for r in rows] == [2, 0]
    assert [r["closed form"] for r in rows] == [2, 0]
    assert all(r["agrees"] and r["certified"] for r in rows)
    assert rows[0]["D"] == 3 * 2 * 2 + 2 * 2
    assert rows[0]["lie dim"] == rows[0]["D"] - 2


def test_count_table_reports_a_disagreement():
    torch.manual_seed(0)
    model = MultiHeadAttention(4, 1, 2, 2).double()  # one token: the softmax is constant
    rows = count_table([("MHA", "1 token", model, random_inputs(model, 6, tokens=1))],
                       progress=False)
    assert rows[0]["laws"] > rows[0]["closed form"] == 6
    assert not rows[0]["agrees"]


def test_moe_counterexample_moves_the_gate_sum_only_under_the_sigmoid_gate() -> None:
    x, y = torch.ones(1, 1, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64)
    moved = {}
    for gate in ("softmax", "sigmoid"):
        layer = count_tables.moe_counterexample(gate)
        assert layer.gate.weight.tolist() == [[1.0], [0.0]]
        moved[gate] = float(drift(layer, x, y, candidate=seed_claim_fn(layer))["gate.sum"])
    assert abs(moved["softmax"]) < 1e-12 and abs(moved["sigmoid"]) > 1e-3


def test_moe_verdict_and_counts_text_read_the_rows() -> None:
    rows = {("softmax", None): {"agrees": True, "certified": True, "n_laws": 12},
            ("softmax", 2): {"agrees": False, "certified": True, "n_laws": 15},
            ("sigmoid", None): {"agrees": True, "certified": False, "n_laws": 9}}
    assert count_tables.moe_verdict(rows, [("softmax", None)]) == verdict_of(True, True)
    assert count_tables.moe_verdict(rows, [("softmax", None), ("softmax", 2)]) == verdict_of(
        False, True)
    assert count_tables.moe_verdict(rows, [("sigmoid", None)]) == verdict_of(True, False)
    text = count_tables.moe_counts_text(rows, [("softmax", None), ("softmax", 2)])
    assert text == "softmax top-all: 12, softmax top-2: 15"


def test_feedforward_cases_and_tally() -> None:
    cases = count_tables.feedforward_cases([(2, 3, 1)], 2, seed=0)
    assert [c[0] for c in cases] == ["ReLU", "GELU", "SiLU", "SwiGLU"]
    for _, size, net, X in cases:
        D = sum(p.numel() for p in net.parameters())
        assert size == "(2,3,1)" and X.shape[0] == 2 * D and X.dtype == torch.float64
    rows = [{"model": "a", "agrees": True, "certified": True},
            {"model": "a", "agrees": False, "certified": True},
            {"model": "b", "agrees": True, "certified": False}]
    assert count_tables.tally(rows, "a") == (False, True, "1/2")
    assert count_tables.tally(rows, "b") == (True, False, "1/1")
    with pytest.raises(ValueError, match="no row of model 'c'"):
        count_tables.tally(rows, "c")
