"""The hidden units of a ReLU network on a set of inputs: active, dead or linear.

Without biases, a unit of layer 2 or later is *dead* (never active) when its incoming weights
are all negative and *linear* (always active) when they are all positive; both are common at
random initialisation, and each is extra conservation laws of its region (a dead unit's
weights get no gradient at all). :func:`unit_activity` measures every unit on the inputs,
:func:`degenerate_units` names the dead and linear ones, and :func:`nondegenerate` redraws a
model's seed until every unit is active on 20–80 % of the inputs, the networks the closed
forms are about. :mod:`flowlaws.conservation.lie_count` uses :func:`activation_pattern` to
count in ``θ``'s own region.

Explained in: book/01_conservation/02_feedforward.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from flowlaws.common.models import Deep, TwoLayer

__all__ = [
    "unit_activity",
    "degenerate_units",
    "activation_pattern",
    "nondegenerate",
]


def _hidden_layers(model: nn.Module) -> list[tuple[str, str]] | None:
    """``(law name, parameter prefix)`` of each hidden ReLU layer, ``None`` for other models.

    The names are those of :func:`~flowlaws.conservation.laws.invariants`.
    """
    if isinstance(model, TwoLayer) and model.activation == "relu":
        return [("hidden", "V")]
    if isinstance(model, Deep) and model.activation == "relu":
        return [(f"hidden{k}", f"layers.{k}") for k in range(len(model.layers) - 1)]
    return None


def _preactivations(
    model: nn.Module, params: dict[str, Tensor], inputs: Tensor
) -> dict[str, Tensor] | None:
    """Each hidden ReLU layer's pre-activations ``(n, width)`` at ``params``."""
    layers = _hidden_layers(model)
    if layers is None:
        return None
    out, h = {}, inputs.to(next(iter(params.values())).dtype)
    for name, prefix in layers:
        z = h @ params[f"{prefix}.weight"].T
        bias = params.get(f"{prefix}.bias")
        out[name] = z if bias is None else z + bias
        h = torch.relu(out[name])
    return out


def unit_activity(model: nn.Module, inputs: Tensor) -> dict[str, Tensor]:
    """The fraction of ``inputs`` on which each hidden ReLU unit is active (pre-activation > 0).

    One entry per hidden layer, named like the laws of
    :func:`~flowlaws.conservation.laws.invariants` (``"hidden"`` for ``TwoLayer``,
    ``"hidden{l}"`` for ``Deep``), each of shape ``(width,)`` with values in ``[0, 1]``:
    0 is a dead unit, 1 a linear one. An empty dict for a model without ReLU units.
    ``inputs``: ``(n, n_in)``. Explained in: book/01_conservation/02_feedforward.ipynb
    """
    params = {k: v.detach() for k, v in model.named_parameters()}
    with torch.no_grad():
        z = _preactivations(model, params, inputs)
    return {} if z is None else {k: (v > 0).double().mean(0) for k, v in z.items()}


def degenerate_units(activity: dict[str, Tensor]) -> tuple[list[str], list[str]]:
    """The dead units (active on no input) and linear units (on every input) of ``activity``.

    Units are named ``"{layer}[{i}]"`` (``"hidden1[3]"``), in the order of the layers.
    """
    dead = [f"{k}[{i}]" for k, a in activity.items() for i in range(a.numel()) if a[i] == 0]
    linear = [f"{k}[{i}]" for k, a in activity.items() for i in range(a.numel()) if a[i] == 1]
    return dead, linear


def activation_pattern(model: nn.Module, params: dict[str, Tensor], inputs: Tensor) -> Tensor:
    """Which hidden ReLU units are active on which input at ``params``, one flat bool tensor.

    Two parameter points with the same pattern on ``inputs`` lie in the same region, where
    the network is one multilinear function of its weights; empty for a model without ReLU.
    """
    z = _preactivations(model, params, inputs)
    if z is None:
        return torch.zeros(0, dtype=torch.bool)
    return torch.cat([(v > 0).reshape(-1) for v in z.values()])


def nondegenerate(
    build: Callable[[], nn.Module],
    inputs: Tensor,
    low: float = 0.2,
    high: float = 0.8,
    seeds: range = range(10_000),
) -> tuple[nn.Module, int]:
    """The first ``build()`` after ``torch.manual_seed(s)``, ``s`` in ``seeds``, whose hidden
    ReLU units are each active on a fraction of ``inputs`` strictly between ``low`` and
    ``high``; returns the model and ``s``.

    Dead units and units active on every input (linear ones) are genuine extra laws of their
    region; the closed forms (one law per hidden unit) are about the region without them. A
    model without ReLU units is accepted at the first seed. A ``RuntimeError`` when no seed
    in ``seeds`` gives one. Explained in: book/01_conservation/02_feedforward.ipynb
    """
    if not 0 <= low < high <= 1:
        raise ValueError(f"need 0 <= low < high <= 1, got low={low}, high={high}")
    for seed in seeds:
        torch.manual_seed(seed)
        model = build()
        activity = unit_activity(model, inputs)
        if all(((a > low) & (a < high)).all() for a in activity.values()):
            return model, seed
    raise RuntimeError(
        f"no seed in {seeds} gives every unit an activity in ({low}, {high}) on these inputs"
    )
