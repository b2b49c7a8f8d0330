"""The hidden units of a ReLU network on a set of inputs: active, dead, linear or twins.

Without biases, a unit of layer 2 or later is *dead* (never active) when its incoming weights
are all negative and *linear* (always active) when they are all positive; both are common at
random initialisation, and each is extra conservation laws of its region (a dead unit's
weights get no gradient at all). :func:`unit_activity` measures every unit on the inputs;
:func:`degenerate_units` names the dead and linear ones, :func:`twin_units` the units that
switch together, :func:`idle_weights` the weights no input moves (any model);
:func:`excess_note` says which of them explain a count above the known laws; and
:func:`nondegenerate` redraws a model's seed until every unit is active on 20–80 % of the
inputs with none of these, the networks the closed forms are about.
:mod:`flowlaws.conservation.lie_count` uses :func:`activation_pattern` to count in ``θ``'s
own region.

Explained in: book/01_conservation/02_feedforward.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from flowlaws.common.models import Deep, TwoLayer
from flowlaws.conservation.flat_params import check_inputs, flat_model_fn, jacobian, model_layout

__all__ = [
    "unit_activity",
    "degenerate_units",
    "activation_pattern",
    "twin_units",
    "idle_weights",
    "excess_note",
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


def twin_units(model: nn.Module, inputs: Tensor) -> list[list[str]]:
    """Groups of two or more units of one layer that are active on exactly the same inputs.

    Twins act as one linear block between their layers on every input, which has more laws
    than one per unit (two twins: three balancedness laws instead of two). Dead and linear
    units are left to :func:`degenerate_units`.
    """
    params = {k: v.detach() for k, v in model.named_parameters()}
    with torch.no_grad():
        z = _preactivations(model, params, inputs)
    groups = []
    for name, pre in (z or {}).items():
        on = pre > 0
        seen: dict[tuple[bool, ...], list[str]] = {}
        for i in range(on.shape[1]):
            if 0 < int(on[:, i].sum()) < on.shape[0]:
                seen.setdefault(tuple(on[:, i].tolist()), []).append(f"{name}[{i}]")
        groups += [g for g in seen.values() if len(g) > 1]
    return groups


def idle_weights(model: nn.Module, inputs: Tensor) -> list[str]:
    """The parameter entries that no input moves: a zero column of the Jacobian over ``inputs``.

    Each is a law of its own (it never changes under gradient flow on these inputs): the
    weights of a dead unit, a connection between two ReLU units never active together, a
    top-1 gate. Named ``"{parameter}[{index}]"`` (``"layers.1.weight[0, 2]"``).
    """
    X = check_inputs(model, inputs)
    theta, layout = model_layout(model)
    with torch.no_grad():
        idle = jacobian(flat_model_fn(model, layout), theta, X).abs().amax(0) == 0
    names, start = [], 0
    for name, shape in layout:
        size = int(torch.Size(shape).numel())
        for flat in idle[start:start + size].nonzero().flatten().tolist():
            index = torch.unravel_index(torch.tensor(flat), shape) if shape else ()
            names.append(f"{name}[{', '.join(str(int(i)) for i in index)}]")
        start += size
    return names


def excess_note(n_laws: int, known: int, model: nn.Module, inputs: Tensor) -> str:
    """Why a count found more laws than known: the dead, linear and twin ReLU units by name,
    a rarely active unit, or the usual causes when the model has no ReLU units."""
    extra = f"{n_laws} laws counted, {known} known: {n_laws - known} more"
    activity = unit_activity(model, inputs)
    dead, linear = degenerate_units(activity)
    named = [f"dead (active on 0 % of the inputs): {', '.join(dead)}"] if dead else []
    if linear:
        named.append(f"linear (active on 100 %): {', '.join(linear)}")
    twins = twin_units(model, inputs)
    if twins:
        named.append("active on the same inputs: " + "; ".join(", ".join(g) for g in twins))
    idle = idle_weights(model, inputs)
    if idle:
        shown = ", ".join(idle[:8]) + (f" and {len(idle) - 8} more" if len(idle) > 8 else "")
        named.append(f"weights no input moves (each a law): {shown}")
    if named:
        return (f"{extra}; degenerate units or weights, each adds laws of this region: "
                f"{'; '.join(named)}. nondegenerate() redraws a seed without them")
    if activity:
        rare = min(float(a.min()) for a in activity.values())
        if rare < 0.05:
            return (f"{extra}; no unit is dead or linear, but one is active on only "
                    f"{100 * rare:.1f} % of the {inputs.shape[0]} inputs: give more inputs")
    return (f"{extra}; too few inputs for the fields to span, a special θ, or laws the "
            "library does not list (try more inputs and another seed)")


def nondegenerate(
    build: Callable[[], nn.Module],
    inputs: Tensor,
    low: float = 0.2,
    high: float = 0.8,
    seeds: range = range(10_000),
) -> tuple[nn.Module, int]:
    """The first ``build()`` after ``torch.manual_seed(s)``, ``s`` in ``seeds``, whose hidden
    ReLU units are each active on a fraction of ``inputs`` strictly between ``low`` and
    ``high``, no two of a layer on the same inputs (:func:`twin_units`) and no weight that
    no input moves (:func:`idle_weights`: two connected units never active together);
    returns the model and ``s``.

    Dead units, units active on every input (linear ones), twins and idle weights are
    genuine extra laws of their region; the closed forms (one law per hidden unit) are about
    regions without them. A
    model without ReLU units is accepted at the first seed. A ``RuntimeError`` when no seed
    in ``seeds`` gives one. Explained in: book/01_conservation/02_feedforward.ipynb
    """
    if not 0 <= low < high <= 1:
        raise ValueError(f"need 0 <= low < high <= 1, got low={low}, high={high}")
    for seed in seeds:
        torch.manual_seed(seed)
        model = build()
        activity = unit_activity(model, inputs)
        if all(((a > low) & (a < high)).all() for a in activity.values()) and not (
            activity and (twin_units(model, inputs) or idle_weights(model, inputs))
        ):
            return model, seed
    raise RuntimeError(
        f"no seed in {seeds} gives every unit an activity in ({low}, {high}) on these inputs"
    )
