"""A model as a function of one flat parameter vector θ, and the inputs it accepts.

The conservation-law machinery works with ``θ`` of shape ``(D,)`` (float64): the law counts
differentiate ``θ ↦ f(θ, x)`` and ``θ ↦ h(θ)``, and the flow integrates ``dθ/dt``. A *layout*
``[(name, shape), ...]`` (the order of ``model.named_parameters()``) maps ``θ`` back to named
tensors. :func:`check_inputs` and :func:`random_inputs` know the input shape of each library
model.

Explained in: book/01_conservation/01_gradient_flow.ipynb
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, jacrev, vmap

from flowlaws.common.models import Deep, MoE, MultiHeadAttention, SwiGLU, TwoLayer

__all__ = [
    "Layout", "ModelFn", "Params", "block_params", "check_inputs", "flat_model_fn", "flatten",
    "jacobian", "model_layout", "random_inputs", "sample_shape", "unflatten",
]

Params = dict[str, Tensor]
ModelFn = Callable[[Tensor, Tensor], Tensor]
Layout = list[tuple[str, torch.Size]]


def flatten(params: Params) -> tuple[Tensor, Layout]:
    """``(θ, layout)``: the tensors of ``params`` (detached, float64, on their device) in one
    vector ``(D,)``, and the names and shapes that :func:`unflatten` needs."""
    layout = [(name, value.shape) for name, value in params.items()]
    theta = torch.cat([value.detach().reshape(-1).to(torch.float64) for value in params.values()])
    return theta, layout


def unflatten(theta: Tensor | np.ndarray, layout: Layout) -> Params:
    """Named views of ``θ`` ``(D,)`` (a NumPy array is read as float64); works under ``vmap``."""
    if not isinstance(theta, Tensor):
        theta = torch.as_tensor(theta, dtype=torch.float64)
    pieces = torch.split(theta, [math.prod(shape) for _, shape in layout])
    return {name: piece.view(shape) for (name, shape), piece in zip(layout, pieces, strict=True)}


def block_params(params: Params, block: str) -> Params:
    """The entries ``"{block}.{name}"`` of ``params``, keyed ``name`` (``block=""``: all): the
    parameters of one submodule, as its own ``named_parameters()`` names them."""
    if not block:
        return dict(params)
    cut = len(block) + 1
    return {k[cut:]: v for k, v in params.items() if k.startswith(f"{block}.")}


def model_layout(model: nn.Module) -> tuple[Tensor, Layout]:
    """:func:`flatten` of ``model``'s named parameters."""
    return flatten(dict(model.named_parameters()))


def flat_model_fn(model: nn.Module, layout: Layout) -> ModelFn:
    """``(θ, x) ↦ model(x)``, the parameters read from ``θ`` (``torch.func.functional_call``)."""
    return lambda theta, x: functional_call(model, unflatten(theta, layout), (x,))


def sample_shape(model: nn.Module) -> tuple[int | None, ...] | None:
    """The shape of one input (``None`` for a free axis), or ``None`` when unknown."""
    if isinstance(model, TwoLayer):
        return (model.V.in_features,)
    if isinstance(model, Deep):
        return (model.layers[0].in_features,)
    if isinstance(model, SwiGLU):
        return (model.A.in_features,)
    if isinstance(model, MoE):
        return (model.d_model,)
    if isinstance(model, MultiHeadAttention):
        return (None, model.d_model)
    return None


def check_inputs(model: nn.Module, inputs: Tensor) -> Tensor:
    """``inputs`` as float64 (a composite's integer token ids kept), or a ``ValueError``
    naming ``inputs`` and what is allowed."""
    shape = sample_shape(model)
    ids = shape is None and isinstance(inputs, Tensor) and inputs.dtype == torch.int64
    if not ids and (
        not isinstance(inputs, Tensor) or inputs.dtype not in (torch.float32, torch.float64)
    ):
        got = inputs.dtype if isinstance(inputs, Tensor) else type(inputs).__name__
        raise ValueError(f"inputs must be a float32 or float64 tensor, got {got}")
    ok = shape is None or (
        inputs.dim() == len(shape) + 1
        and all(s is None or s == n for s, n in zip(shape, inputs.shape[1:], strict=True))
    )
    if not ok or inputs.dim() == 0 or inputs.shape[0] < 1:
        want = "(n, ...)" if shape is None else (
            "(n, " + ", ".join("tokens" if s is None else str(s) for s in shape) + ")")
        raise ValueError(f"inputs must have shape {want} with n >= 1, got {tuple(inputs.shape)}")
    first = next(model.parameters(), None)
    if first is None:
        raise ValueError(f"model ({type(model).__name__}) has no parameters: nothing to count")
    return inputs.to(device=first.device, dtype=torch.int64 if ids else torch.float64)


def random_inputs(model: nn.Module, n: int, tokens: int = 4, seed: int = 0) -> Tensor:
    """``n`` standard Gaussian inputs for ``model`` in float64 (``tokens`` tokens for attention).

    Shape ``(n, *input)``. Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    shape = sample_shape(model)
    if shape is None:
        raise ValueError(f"model must be one of the flowlaws models, got {type(model).__name__}")
    sizes = tuple(tokens if s is None else s for s in shape)
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((n, *sizes), generator=gen, dtype=torch.float64)


def jacobian(f: ModelFn, theta: Tensor, X: Tensor, batched: bool = True) -> Tensor:
    """``∇_θ f_k(θ, x_n)`` for every input and output, shape ``(n · outputs, D)``."""
    one = lambda x: jacrev(lambda t: f(t, x[None]).reshape(-1))(theta)  # noqa: E731
    if batched:
        return vmap(one, chunk_size=256)(X).reshape(-1, theta.numel())
    rows = []
    for x in X:
        out = f(theta, x[None]).reshape(-1)
        for k in range(out.numel()):
            rows.append(grad(lambda t, k=k, x=x: f(t, x[None]).reshape(-1)[k])(theta))
    return torch.stack(rows)
