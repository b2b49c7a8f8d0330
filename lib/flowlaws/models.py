"""The architectures of the book, as ordinary ``torch.nn.Module`` s.

Weight-shape convention (PyTorch's, used for every invariant in :mod:`flowlaws.laws`):
a linear map ``y = W x`` stores ``W`` with shape ``(n_out, n_in)``. The seed papers write
``x^T W`` (``in x out``); their ``A_{:,i}`` (a column) is our ``A[i, :]`` (a row), and so on.

Explained in: book/01_conservation/01_gradient_flow.ipynb (TwoLayer).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

ACTIVATIONS = {
    "linear": lambda z: z,
    "relu": F.relu,
    "gelu": F.gelu,
    "silu": F.silu,
    "tanh": torch.tanh,
}


def _check_positive_ints(**sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


class TwoLayer(nn.Module):
    """``f(x) = U σ(V x)``: one hidden layer of ``width`` units.

    Shapes: ``V.weight`` is ``(width, n_in)``, ``U.weight`` is ``(n_out, width)``;
    input ``(batch, n_in)``, output ``(batch, n_out)``.

    Args:
        activation: one of ``"linear"``, ``"relu"``, ``"gelu"``, ``"silu"``, ``"tanh"``.
        bias: add biases to both layers.
    """

    def __init__(
        self, n_in: int, width: int, n_out: int, activation: str = "relu", bias: bool = False
    ) -> None:
        super().__init__()
        _check_positive_ints(n_in=n_in, width=width, n_out=n_out)
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}"
            )
        self.activation = activation
        self.V = nn.Linear(n_in, width, bias=bias)
        self.U = nn.Linear(width, n_out, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.U(ACTIVATIONS[self.activation](self.V(x)))
