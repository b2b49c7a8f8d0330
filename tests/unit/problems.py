"""Small problems with known laws, shared by the unit tests of both parts' training code."""

from __future__ import annotations

import torch

from flowlaws.common.models import TwoLayer
from flowlaws.conservation.losses import mse_loss, parameters_of


def balance(p: dict[str, torch.Tensor]) -> torch.Tensor:
    """``UᵀU − VVᵀ``, the conserved matrix of the linear two-layer net."""
    return p["U.weight"].T @ p["U.weight"] - p["V.weight"] @ p["V.weight"].T


def laws(p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The balancedness law as a named dict, as ``train(..., laws=...)`` records it."""
    return {"balance": balance(p)}


def problem(activation: str = "linear", n: int = 20, seed: int = 0):
    """A 4-3-2 net on a random linear teacher, float64: ``(model, loss, parameters)``."""
    torch.manual_seed(seed)
    model = TwoLayer(4, 3, 2, activation).double()
    X = torch.randn(n, 4, dtype=torch.float64)
    Y = X @ torch.randn(4, 2, dtype=torch.float64)
    return model, mse_loss(model, X, Y), parameters_of(model)
