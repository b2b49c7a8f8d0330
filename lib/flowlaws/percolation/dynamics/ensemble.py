"""An ensemble of two-layer networks ``f(x) = U σ(V x)`` as one batched tensor.

A flat state is ``[V.ravel(), U.ravel()]`` per run, states have shape ``(n_runs, dim)``
(:class:`TwoLayerShape`). ``V`` has shape ``(n_runs, width, n_in)`` and ``U``
``(n_runs, n_out, width)`` (PyTorch's out × in convention with a leading ensemble dimension, as
in :class:`flowlaws.common.models.TwoLayer`). Forward passes, per-sample gradients and
reweighted gradients are written in closed form with ``einsum`` (checked against autograd in
the tests), so every Part II loop advances all runs with one batch of tensor operations.

Explained in: book/02_percolation/01_sde.ipynb.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from flowlaws.book.cache import stored_type
from flowlaws.common.checks import as_float, as_int

__all__ = [
    "TwoLayerShape",
    "ensemble_init",
    "ensemble_from_model",
    "split_params",
    "ensemble_forward",
    "per_sample_grads",
    "forward_cache",
    "weighted_grad",
    "ensemble_loss",
    "check_ensemble_inputs",
]


_ACT = {
    "linear": (lambda z: z, lambda z: torch.ones_like(z)),
    "relu": (torch.relu, lambda z: (z > 0).to(z.dtype)),
    "tanh": (torch.tanh, lambda z: 1 - torch.tanh(z) ** 2),
}


@stored_type
@dataclass(frozen=True)
class TwoLayerShape:
    """Sizes of ``f(x) = U σ(V x)``; a flat state is ``[V.ravel(), U.ravel()]`` per run."""

    n_in: int
    width: int
    n_out: int
    activation: str = "tanh"

    def __post_init__(self) -> None:
        for name in ("n_in", "width", "n_out"):  # numpy sizes become ints
            object.__setattr__(self, name, as_int(name, getattr(self, name), minimum=1))
        if self.activation not in _ACT:
            raise ValueError(f"activation must be one of {sorted(_ACT)}, got {self.activation!r}")

    @property
    def dim(self) -> int:
        """Number of parameters of one network."""
        return self.width * (self.n_in + self.n_out)


def ensemble_init(
    shape: TwoLayerShape, n_runs: int, *, scale: float = 1.0, seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """``(n_runs, dim)`` Gaussian initial states.

    ``V ~ N(0, scale²/n_in)`` and ``U ~ N(0, scale²/width)``, entrywise.
    """
    n_runs, seed = as_int("n_runs", n_runs, minimum=1), as_int("seed", seed)
    scale = as_float("scale", scale)
    g = torch.Generator().manual_seed(seed)
    V = torch.randn(n_runs, shape.width, shape.n_in, generator=g, dtype=dtype)
    U = torch.randn(n_runs, shape.n_out, shape.width, generator=g, dtype=dtype)
    V, U = V * scale / math.sqrt(shape.n_in), U * scale / math.sqrt(shape.width)
    return torch.cat([V.flatten(1), U.flatten(1)], dim=1)


def ensemble_from_model(model: torch.nn.Module, n_runs: int) -> tuple[torch.Tensor, TwoLayerShape]:
    """``(n_runs, dim)`` copies of a bias-free :class:`flowlaws.common.models.TwoLayer`, and
    its shape.

    Every run starts at the model's weights (the noise makes them differ).
    """
    if getattr(model.V, "bias", None) is not None or getattr(model.U, "bias", None) is not None:
        raise ValueError("only bias-free TwoLayer models are supported (bias=False)")
    if model.activation not in _ACT:
        raise ValueError(f"activation must be one of {sorted(_ACT)}, got {model.activation!r}")
    V, U = model.V.weight.detach(), model.U.weight.detach()
    shape = TwoLayerShape(V.shape[1], V.shape[0], U.shape[0], model.activation)
    flat = torch.cat([V.reshape(-1), U.reshape(-1)])
    return flat.expand(n_runs, -1).clone(), shape


def split_params(theta: torch.Tensor, shape: TwoLayerShape) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R, dim)`` → ``V`` ``(R, width, n_in)``, ``U`` ``(R, n_out, width)`` (views)."""
    n_v = shape.width * shape.n_in
    V = theta[:, :n_v].reshape(-1, shape.width, shape.n_in)
    return V, theta[:, n_v:].reshape(-1, shape.n_out, shape.width)


def _inputs(X: torch.Tensor) -> str:
    return "ni" if X.dim() == 2 else "rni"


def ensemble_forward(theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor) -> torch.Tensor:
    """Outputs ``(R, N, n_out)`` of every run.

    ``X`` is ``(N, n_in)`` (shared) or ``(R, N, n_in)`` (one batch per run).
    """
    V, U = split_params(theta, shape)
    z = torch.einsum(f"rwi,{_inputs(X)}->rnw", V, X)
    return torch.einsum("row,rnw->rno", U, _ACT[shape.activation][0](z))


def per_sample_grads(
    theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor
) -> torch.Tensor:
    """``(R, N, dim)`` gradients of ``ℓ_n = ½‖U σ(V x_n) − y_n‖²``, in closed form.

    ``∂ℓ/∂U = e σ(z)ᵀ`` and ``∂ℓ/∂V = ((Uᵀe) ⊙ σ'(z)) xᵀ`` with ``z = V x``, ``e = f − y``.
    ``X`` is ``(N, n_in)`` or ``(R, N, n_in)``, ``Y`` matches (``(N, n_out)`` or ``(R, N, n_out)``).
    """
    h, e, delta = forward_cache(theta, shape, X, Y)
    gU = torch.einsum("rno,rnw->rnow", e, h)
    gV = torch.einsum(f"rnw,{_inputs(X)}->rnwi", delta, X)
    return torch.cat([gV.flatten(2), gU.flatten(2)], dim=2)


def forward_cache(theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor,
                   Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``h = σ(Vx)``, residual ``e``, back-propagated ``δ = (Uᵀe) ⊙ σ'(Vx)``; ``(R, N, ·)``."""
    act, dact = _ACT[shape.activation]
    V, U = split_params(theta, shape)
    z = torch.einsum(f"rwi,{_inputs(X)}->rnw", V, X)
    h = act(z)
    out = torch.einsum("row,rnw->rno", U, h)
    _check_targets(out, Y)
    e = out - Y
    return h, e, torch.einsum("row,rno->rnw", U, e) * dact(z)


def _check_targets(output: torch.Tensor, Y: torch.Tensor) -> None:
    """``Y`` must be ``(N, n_out)`` or ``(R, N, n_out)`` for outputs ``(R, N, n_out)``."""
    if not isinstance(Y, torch.Tensor):
        raise TypeError(f"the targets Y must be a tensor, got {type(Y).__name__}")
    if tuple(Y.shape) not in (tuple(output.shape[1:]), tuple(output.shape)):
        raise ValueError(
            f"the targets Y have shape {tuple(Y.shape)} but the outputs have shape "
            f"{tuple(output.shape)} (runs, samples, n_out); Y must be "
            f"{tuple(output.shape[1:])} or {tuple(output.shape)} (e.g. Y.reshape(-1, 1))"
        )


def weighted_grad(weights: torch.Tensor, cache: tuple, X: torch.Tensor) -> torch.Tensor:
    """``Σ_n w_n ∇ℓ_n`` ``(R, dim)`` for weights ``(R, N)``, without per-sample gradients."""
    h, e, delta = cache
    gV = torch.einsum(f"rn,rnw,{_inputs(X)}->rwi", weights, delta, X)
    gU = torch.einsum("rn,rno,rnw->row", weights, e, h)
    return torch.cat([gV.flatten(1), gU.flatten(1)], dim=1)


def ensemble_loss(
    theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor
) -> torch.Tensor:
    """``(R,)`` full-batch losses ``L = (1/2N) Σ_n ‖f(x_n) − y_n‖²``.

    The same loss as :func:`flowlaws.conservation.losses.mse_loss`. ``Y`` is ``(N, n_out)`` or
    ``(R, N, n_out)``; any other shape (``(N,)`` for ``n_out = 1`` would broadcast to an
    ``N × N`` loss) is a ``ValueError`` naming the shapes.
    """
    # N is the sample axis, -2: X is (N, n_in) shared by the runs or (R, N, n_in) per run
    if X.shape[-2] == 0:
        raise ValueError(f"X {tuple(X.shape)} holds no samples: a loss over none is 0/0")
    out = ensemble_forward(theta, shape, X)
    _check_targets(out, Y)
    return 0.5 * (out - Y).pow(2).sum(dim=(1, 2)) / X.shape[-2]


def check_ensemble_inputs(theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor,
                          Y: torch.Tensor) -> None:
    """Refuse, by name, states and data that do not fit ``shape``: ``theta0`` a finite floating
    ``(n_runs, dim)`` tensor, ``X`` ``(N, n_in)`` or ``(n_runs, N, n_in)`` and ``Y`` ``(N, n_out)``
    or ``(n_runs, N, n_out)`` with ``N ≥ 1``, all of ``theta0``'s dtype."""
    if not (isinstance(theta0, torch.Tensor) and theta0.dim() == 2 and theta0.shape[0] >= 1
            and theta0.shape[1] == shape.dim and theta0.is_floating_point()):
        raise ValueError(f"theta0 must be a floating (n_runs, {shape.dim}) tensor for {shape}, "
                         f"got {_describe(theta0)}")
    if not bool(torch.isfinite(theta0).all()):
        raise ValueError("theta0 holds NaN or infinite entries")
    for name, data, width in (("X", X, shape.n_in), ("Y", Y, shape.n_out)):
        if not (isinstance(data, torch.Tensor) and data.dim() in (2, 3)
                and data.shape[-1] == width and data.shape[-2] >= 1):
            raise ValueError(f"{name} must be (N, {width}) or (n_runs, N, {width}) with N >= 1, "
                             f"got {_describe(data)}")
        if data.dim() == 3 and data.shape[0] != theta0.shape[0]:
            raise ValueError(f"{name} holds {data.shape[0]} batches for {theta0.shape[0]} runs")
        if data.dtype != theta0.dtype:
            raise TypeError(f"{name} has dtype {data.dtype} but theta0 {theta0.dtype}; convert "
                            f"with {name}.to(theta0.dtype)")
    if X.shape[-2] != Y.shape[-2]:
        raise ValueError(f"X {tuple(X.shape)} and Y {tuple(Y.shape)} need the same samples")


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__
