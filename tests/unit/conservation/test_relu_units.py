"""Tests of flowlaws.conservation.relu_units and of counts with dead or linear ReLU units."""

from __future__ import annotations

import pytest
import torch

from flowlaws.common.models import Deep, MoE, SwiGLU, TwoLayer
from flowlaws.conservation import laws, lie_count
from flowlaws.conservation.count_tables import closed_form
from flowlaws.conservation.relu_units import (
    activation_pattern,
    degenerate_units,
    idle_weights,
    nondegenerate,
    twin_units,
    unit_activity,
)


def _two_layer_with_a_dead_unit() -> tuple[TwoLayer, torch.Tensor]:
    """``TwoLayer(3, 4, 2)`` on inputs in the positive orthant; unit 2's weights are negative."""
    torch.manual_seed(0)
    model = TwoLayer(3, 4, 2, "relu").double()
    X = laws.random_inputs(model, 60).abs()
    with torch.no_grad():
        model.V.weight.copy_(torch.tensor(
            [[1.0, -1.0, 0.5], [-1.0, 1.0, 0.3], [-1.0, -0.5, -0.2], [0.4, 0.6, -1.0]]))
    return model, X


def test_unit_activity_is_the_fraction_of_inputs_on_which_a_unit_is_active() -> None:
    model = Deep(1, [2, 2], 1, "relu").double()
    with torch.no_grad():
        model.layers[0].weight.copy_(torch.tensor([[1.0], [-1.0]]))
        model.layers[1].weight.copy_(torch.tensor([[1.0, 1.0], [-1.0, -2.0]]))
    X = torch.tensor([[1.0], [-1.0], [2.0], [3.0]], dtype=torch.float64)
    activity = unit_activity(model, X)
    assert activity["hidden0"].tolist() == [0.75, 0.25]
    assert activity["hidden1"].tolist() == [1.0, 0.0]  # linear, dead
    assert degenerate_units(activity) == (["hidden1[1]"], ["hidden1[0]"])
    assert unit_activity(SwiGLU(1, 2, 1), X) == {} and unit_activity(
        TwoLayer(1, 2, 1, "gelu"), X) == {}
    assert activation_pattern(model, dict(model.named_parameters()), X).shape == (4 * 4,)


def test_a_dead_unit_gets_a_note_that_names_it() -> None:
    model, X = _two_layer_with_a_dead_unit()
    found = lie_count.count(model, X)
    # the dead unit's 3 + 2 weights get no gradient: 5 frozen entries instead of its 1 law
    assert (found.n_laws, found.known) == (8, 4) and not found.certified
    assert found.unit_activity["hidden"][2] == 0.0
    assert all(0 < a < 1 for i, a in enumerate(found.unit_activity["hidden"]) if i != 2)
    note = next(n for n in found.notes if "8 laws counted, 4 known" in n)
    assert "dead" in note and "hidden[2]" in note


def test_a_linear_unit_is_named_too() -> None:
    torch.manual_seed(3)
    model = Deep(2, [3, 3], 2, "relu").double()
    X = laws.random_inputs(model, 80)
    with torch.no_grad():
        model.layers[1].weight[1] = torch.tensor([1.0, 0.5, 0.8])  # active whenever any is
        model.layers[0].weight.copy_(torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.3, 1.0]]))
    found = lie_count.count(model, X)
    assert found.n_laws > found.known
    note = next(n for n in found.notes if "known" in n)
    assert "linear (active on 100 %): " in note and "hidden1[1]" in note


def test_the_nearby_points_stay_in_thetas_region() -> None:
    # a dead unit of layer 2 with one weight at -1e-4: a 1 % perturbation used to revive it
    # on some inputs, and the largest dimension was then another region's count
    torch.manual_seed(1)
    model = Deep(2, [3, 3], 1, "relu").double()
    X = laws.random_inputs(model, 80)
    with torch.no_grad():
        model.layers[1].weight[0] = torch.tensor([-1.0, -1.0, -1e-4])
    own = lie_count.count(model, X, n_points=1)
    for seed in range(3):
        found = lie_count.count(model, X, seed=seed)
        assert found.consistent and found.n_laws == own.n_laws == 10
        assert any("hidden1[0]" in n for n in found.notes)


def test_too_few_inputs_are_named_when_no_unit_is_degenerate() -> None:
    model, _ = nondegenerate(lambda: TwoLayer(3, 4, 2, "relu").double(),
                             laws.random_inputs(TwoLayer(3, 4, 2), 6))
    found = lie_count.count(model, laws.random_inputs(model, 6))
    assert found.n_laws > found.known
    assert any("known" in n and "inputs" in n and "dead" not in n for n in found.notes)


def test_units_that_switch_together_are_named() -> None:
    # units 0 and 1 of layer 2 are active on the same inputs: a width-2 linear block between
    # layers, three balancedness laws instead of two, so 7 laws where one per unit gives 6
    X = torch.randn(56, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    torch.manual_seed(1)
    model = Deep(2, [3, 3], 1, "relu").double()
    assert twin_units(model, X) == [["hidden1[0]", "hidden1[1]"]]
    found = lie_count.count(model, X)
    assert (found.n_laws, found.known) == (7, 6)
    assert any("same inputs: hidden1[0], hidden1[1]" in n for n in found.notes)
    assert nondegenerate(lambda: Deep(2, [3, 3], 1, "relu").double(), X, seeds=range(1, 9))[1] > 1


@pytest.mark.parametrize(
    ("seed", "before", "now"), [(2, 9, 7), (20, 7, 6), (29, 8, 6), (38, 12, 10)]
)
def test_brackets_of_all_inputs_do_not_stop_a_level_early(seed: int, before: int, now: int) -> None:
    # with one input drawn per field these read `before` laws (seed 20: dims (11, 11), stopped);
    # random combinations over all inputs reach the full algebra at the first bracket level
    torch.manual_seed(seed)
    model = Deep(2, [3, 3], 1, "relu").double()
    X = torch.randn(40, 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    found = lie_count.count(model, X)
    assert found.dims[0][1] == found.dims[0][-1] == found.n_params - found.n_laws
    assert found.n_laws == now < before


def test_weights_no_input_moves_are_named() -> None:
    # units hidden0[0] and hidden1[0] are never active together: layers.1.weight[0, 0] is idle
    X = torch.randn(56, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    torch.manual_seed(2)
    model = Deep(2, [3, 3], 1, "relu").double()
    assert idle_weights(model, X) == ["layers.1.weight[0, 0]"]
    found = lie_count.count(model, X)
    assert (found.n_laws, found.known) == (7, 6)
    assert any("weights no input moves (each a law): layers.1.weight[0, 0]" in n
               for n in found.notes)
    top1 = MoE(2, 2, 1, 1, top_k=1).double()
    assert len(idle_weights(top1, torch.randn(9, 2, dtype=torch.float64))) == 4  # the gate


# Marcotte et al. (2023): [2, 2, 5, 3] ReLU has 7 laws; deep linear nets their balancedness
@pytest.mark.parametrize(
    ("n_in", "widths", "n_out", "activation"),
    [
        (2, [2, 5], 3, "relu"),
        (3, [4, 3], 2, "relu"),
        (2, [3, 3], 1, "relu"),  # stopped a level early with one input per field
        (1, [3], 1, "linear"),
        (2, [2, 2], 2, "linear"),
        (3, [2, 3], 2, "linear"),
        (2, [3, 2, 2], 3, "linear"),
    ],
)
def test_marcotte_networks_are_certified_against_the_closed_forms(
    n_in, widths, n_out, activation
) -> None:
    probe = Deep(n_in, widths, n_out, activation)
    D = sum(p.numel() for p in probe.parameters())
    n = 2 * D + 20 if activation == "relu" else 3 * max(n_in, 2)
    X = torch.randn(n, n_in, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    model, _ = nondegenerate(lambda: Deep(n_in, widths, n_out, activation).double(), X)
    found = lie_count.count(model, X)
    assert found.n_laws == closed_form(model) and found.certified, str(found)
    assert all(0.2 < a < 0.8 for acts in found.unit_activity.values() for a in acts)


def test_nondegenerate_redraws_seeds_and_says_when_it_cannot() -> None:
    X = torch.randn(50, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model, seed = nondegenerate(lambda: Deep(2, [3, 3], 1, "relu"), X, low=0.3, high=0.7)
    activity = torch.cat(list(unit_activity(model, X).values()))
    assert ((activity > 0.3) & (activity < 0.7)).all()
    torch.manual_seed(seed)
    assert torch.equal(Deep(2, [3, 3], 1, "relu").layers[0].weight, model.layers[0].weight)
    assert nondegenerate(lambda: Deep(2, [3], 1, "linear"), X)[1] == 0
    with pytest.raises(RuntimeError, match="no seed"):
        nondegenerate(lambda: Deep(2, [3, 3], 1, "relu"), X, low=0.49, high=0.5, seeds=range(5))
    with pytest.raises(ValueError, match="low"):
        nondegenerate(lambda: Deep(2, [3], 1, "relu"), X, low=0.8, high=0.2)
