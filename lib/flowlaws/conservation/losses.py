"""Losses as functions of a model's parameter dict, their gradients, and the small random
regression problem of chapters I.1 and I.5.

Parameters travel as a ``dict[str, Tensor]`` (the model's ``named_parameters``), so the same
loss works for :func:`torch.func.functional_call`, the ODE solver of
:mod:`flowlaws.conservation.flow` and the discrete loops of :mod:`flowlaws.conservation.training`.
A :class:`DatasetLoss` is the full-batch loss, and the loss of a mini-batch of rows.

Explained in: book/01_conservation/01_gradient_flow.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from flowlaws.common.models import TwoLayer
from flowlaws.conservation.flat_params import Params

__all__ = [
    "Params",
    "LossFn",
    "LawsFn",
    "parameters_of",
    "DatasetLoss",
    "mse_loss",
    "cross_entropy_loss",
    "gradient_and_loss",
    "LinearRegression",
    "linear_regression",
]



LossFn = Callable[[Params], torch.Tensor]


LawsFn = Callable[[Params], dict[str, torch.Tensor]]


def parameters_of(model: nn.Module) -> Params:
    """A detached copy of the model's parameters, keyed by their names."""
    return {name: p.detach().clone() for name, p in model.named_parameters()}


class DatasetLoss:
    """A loss over a whole data set that can also be evaluated on a mini-batch of rows.

    ``loss(params)`` is the full-batch loss; ``loss(params, index)`` the same loss on the rows
    ``index`` (an int64 tensor), which is what mini-batch SGD differentiates.
    ``n_samples`` is the number of rows ``N``, the range :func:`train` draws indices from.

    Args:
        criterion: ``(output, target) -> scalar``, averaged over the rows it is given.
    """

    def __init__(
        self,
        model: nn.Module,
        X: torch.Tensor,
        Y: torch.Tensor,
        criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> None:
        for name, data in (("X", X), ("Y", Y)):
            if not isinstance(data, torch.Tensor) or data.dim() == 0:
                raise TypeError(f"{name} must be a tensor with one row per sample, got "
                                f"{type(data).__name__}")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(
                f"X and Y need the same number of rows, got {X.shape[0]} and {Y.shape[0]}"
            )
        if X.shape[0] == 0:
            raise ValueError("X and Y hold no rows: a loss over no samples is 0/0")
        self.model, self.X, self.Y, self.criterion = model, X, Y, criterion
        self.n_samples = int(X.shape[0])

    def __call__(self, params: Params, index: torch.Tensor | None = None) -> torch.Tensor:
        X, Y = (self.X, self.Y) if index is None else (self.X[index], self.Y[index])
        return self.criterion(functional_call(self.model, params, (X,)), Y)


def _half_squared_error(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if output.shape != target.shape:  # (n, 1) against (n,) would broadcast to an n x n loss
        raise ValueError(
            f"the targets Y have shape {tuple(target.shape)} but the model's output has shape "
            f"{tuple(output.shape)}; give Y the output's shape (e.g. Y.reshape(-1, 1))"
        )
    return 0.5 * (output - target).pow(2).sum() / output.shape[0]


def _token_cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def mse_loss(model: nn.Module, X: torch.Tensor, Y: torch.Tensor) -> DatasetLoss:
    """``L(θ) = (1/2N) Σ_n ‖f(θ, x_n) − y_n‖²`` as a function of the parameter dict.

    Shapes: ``X`` is ``(N, ...)`` (the model's input), ``Y`` has exactly the model's output
    shape: ``(N,)`` targets for an ``(N, 1)`` output are a ``ValueError`` naming both shapes
    (they would broadcast to an ``N × N`` loss).
    The result also accepts an index tensor for mini-batches (see :class:`DatasetLoss`).
    """
    return DatasetLoss(model, X, Y, _half_squared_error)


def cross_entropy_loss(model: nn.Module, X: torch.Tensor, Y: torch.Tensor) -> DatasetLoss:
    """Mean cross-entropy of the model's logits against integer targets.

    Shapes: logits ``(N, C)`` with ``Y`` ``(N,)`` (a classifier), or ``(N, T, V)`` with ``Y``
    ``(N, T)`` (a language model: every position of every sequence counts once).

    Explained in: book/01_conservation/06_real_data.ipynb.
    """
    return DatasetLoss(model, X, Y, _token_cross_entropy)


def gradient_and_loss(
    loss_fn: LossFn, params: Params, index: torch.Tensor | None = None
) -> tuple[Params, torch.Tensor]:
    """``(∇L(θ), L(θ))`` at the parameter dict ``θ`` (on the rows ``index`` when given).

    Plain :func:`torch.autograd.grad` on detached copies: for the book's small models it has
    a few times less overhead per call than :func:`torch.func.grad`, and gives the same numbers.
    A parameter the loss does not use gets a zero gradient.
    """
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    loss = loss_fn(leaves) if index is None else loss_fn(leaves, index)
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True,
                                materialize_grads=True)
    return dict(zip(leaves, grads, strict=True)), loss.detach()


@dataclass
class LinearRegression:
    """A linear two-layer network ``x ↦ U V x`` on random regression data, ready to train.

    Attributes:
        X: ``(n_samples, n_in)`` float64 inputs; Y: ``(n_samples, n_out)`` float64 targets.
        model: the :class:`~flowlaws.common.models.TwoLayer` (``V`` is ``(width, n_in)``,
            ``U`` is ``(n_out, width)``), float64, on the data's device.
        loss: :func:`mse_loss` of ``model`` on ``(X, Y)``.
        theta0: the initial parameter dict (``"V.weight"``, ``"U.weight"``).
    """

    X: torch.Tensor
    Y: torch.Tensor
    model: nn.Module
    loss: DatasetLoss
    theta0: Params


def linear_regression(
    n_in: int, width: int, n_out: int, n_samples: int, init_scale: float,
    device: torch.device | str = "cpu",
) -> LinearRegression:
    """The set-up of chapters I.1 and I.5: standard-normal ``X`` and ``Y``, a linear
    :class:`~flowlaws.common.models.TwoLayer` whose weights are redrawn from
    ``N(0, init_scale²)``, its :func:`mse_loss` and its initial parameters.

    Draws from torch's global generator in this order: ``X``, ``Y``, the model's default
    initialisation, then each weight (seed it first with
    :func:`~flowlaws.book.runtime.seed_everything`).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    for name, value in (("n_in", n_in), ("width", width), ("n_out", n_out),
                        ("n_samples", n_samples)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not init_scale > 0:
        raise ValueError(f"init_scale must be > 0 (a standard deviation), got {init_scale!r}")
    X = torch.randn(n_samples, n_in, dtype=torch.float64, device=device)
    Y = torch.randn(n_samples, n_out, dtype=torch.float64, device=device)
    model = TwoLayer(n_in, width, n_out, activation="linear").double().to(device)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, init_scale)
    loss = mse_loss(model, X, Y)
    return LinearRegression(X, Y, model, loss, parameters_of(model))
