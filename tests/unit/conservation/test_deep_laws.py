"""Tests of flowlaws.conservation.deep_laws, against answers known in advance."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch

from flowlaws.common.transformer import CausalTransformer
from flowlaws.conservation import deep_laws
from flowlaws.conservation.losses import cross_entropy_loss, parameters_of


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(0)
    model = CausalTransformer(7, 8, 2, 2, 4, 4, 6).double()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 7, (6, 5), generator=gen)
    targets = torch.randint(0, 7, (6, 5), generator=gen)
    return model, cross_entropy_loss(model, ids, targets), parameters_of(model)


def test_every_block_law_has_a_rounding_level_rate(lm) -> None:
    model, loss, params = lm
    rates = deep_laws.law_rates(model, loss, params, chunk=5)  # several chunks per law
    assert len(rates) == 2 * (2 * 2 + 1) and "layers.1.attn/head0.VO" in rates
    assert max(rates.values()) < 1e-12
    table = deep_laws.rates_by_block(rates)
    assert list(table) == ["layers.0.attn", "layers.0.ffn", "layers.1.attn", "layers.1.ffn"]
    assert set(table["layers.1.attn"]) == {"QK", "VO"} and set(table["layers.0.ffn"]) == {"units"}
    fig = deep_laws.plot_block_rates(table, "test")
    plt.close(fig)


def _rows(p):  # RoPE mixes rows 2j and 2j+1: the row quantities are not laws
    return {"rows": p["W_Q"].pow(2).sum(-1) - p["W_K"].pow(2).sum(-1)}


def test_a_non_law_has_a_large_rate(lm) -> None:
    model, loss, params = lm
    rates = deep_laws.law_rates(model, loss, params, laws={"layers.1.attn": _rows})
    assert list(rates) == ["layers.1.attn/rows"] and rates["layers.1.attn/rows"] > 1e-3
    controls = deep_laws.control_law_fns(model)
    assert list(controls) == ["layers.0.attn", "layers.1.attn"]
    control = deep_laws.law_rates(model, loss, params, laws=controls)
    assert control["layers.1.attn/rows"] == rates["layers.1.attn/rows"]
    table = deep_laws.rates_by_block(deep_laws.law_rates(model, loss, params))
    steps = deep_laws.one_step_scaling(model, loss, params)
    rows = deep_laws.block_rows(table, steps, deep_laws.rates_by_block(control))
    assert [r["control"] == "—" for r in rows] == [False, True, False, True]
    assert rows[0]["laws"] == "QK, VO" and float(rows[1]["exponent"]) == pytest.approx(2)


def test_one_gd_step_moves_each_block_by_tau_squared_h_of_g(lm) -> None:
    model, loss, params = lm
    steps = deep_laws.one_step_scaling(model, loss, params, (1.0, 0.5, 0.25))
    assert len(steps) == 4
    for step in steps.values():
        assert step.gap < 1e-8 and abs(step.exponent - 2) < 1e-8
        assert step.changes[1] == pytest.approx(4 * step.changes[2], rel=1e-8)
    with pytest.raises(ValueError, match="lrs must hold"):
        deep_laws.one_step_scaling(model, loss, params, (0.5, 0.25))
