"""Lie brackets of gradient fields, evaluated by forward-mode products, level by level.

The fields are ``θ ↦ ∇_θ ⟨c, f(θ, X)⟩``; :func:`bracket` forms ``[X, Z]`` from two
Jacobian-vector products, :func:`brackets` draws a level of random right-nested brackets in
one ``vmap``, and :func:`lie_dims` grows a :class:`~flowlaws.conservation.spans.Span` level by
level until it is closed under brackets (the dimension of the generated Lie algebra at ``θ``).

Explained in: book/01_conservation/01_gradient_flow.ipynb
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.func import grad, jvp, vmap

from flowlaws.conservation.flat_params import ModelFn
from flowlaws.conservation.spans import Span

__all__ = ["Scaled", "field", "bracket", "nested", "brackets", "lie_dims"]


Scaled = Callable[[Tensor], tuple[Tensor, Tensor]]
"""A field that also returns the size of the terms its value was computed from."""


def field(f: ModelFn, x: Tensor, c: Tensor) -> Scaled:
    """The gradient field ``θ ↦ ∇_θ ⟨c, f(θ, x)⟩`` (``x`` a batch, ``c`` like ``f(θ, x)``).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    gradient = grad(lambda t: (f(t, x) * c).sum())

    def value(theta: Tensor) -> tuple[Tensor, Tensor]:
        g = gradient(theta)
        return g, g.norm()

    return value


def bracket(X: Scaled, Z: Scaled) -> Scaled:
    """``[X, Z](θ) = DZ(θ) X(θ) − DX(θ) Z(θ)``, by two forward-mode products.

    The returned scale is what rounding errors are relative to: ``‖DZ X‖ + ‖DX Z‖``, times
    ``scale(Z) / ‖Z‖`` so that an inner bracket that cancelled to rounding noise (commuting
    fields) keeps its outer brackets at noise level instead of being blown up to size one.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """

    def value(theta: Tensor) -> tuple[Tensor, Tensor]:
        x = X(theta)[0]
        z, dz, z_scale = jvp(Z, (theta,), (x,), has_aux=True)
        dx = jvp(lambda t: X(t)[0], (theta,), (z,))[1]
        inflation = z_scale / z.norm().clamp_min(torch.finfo(z.dtype).tiny)
        return dz - dx, (dz.norm() + dx.norm()) * inflation

    return value


def nested(f: ModelFn, theta: Tensor, X: Tensor, cs: Tensor) -> Tensor:
    """The right-nested bracket ``[X_0, [X_1, … [X_{k-1}, X_k]]](θ)``, divided by its scale.

    Field ``j`` is ``∇_θ ⟨cs[j], f(θ, X)⟩``, a combination over all the inputs ``X``;
    ``cs``: ``(k+1, n, *output)``; the result has shape ``(D,)`` and norm at most about one;
    a bracket that vanishes identically comes out at ~1e-16.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    Z = field(f, X, cs[-1])
    for j in range(cs.shape[0] - 2, -1, -1):
        Z = bracket(field(f, X, cs[j]), Z)
    value, scale = Z(theta)
    return value / scale.clamp_min(torch.finfo(value.dtype).tiny)


def brackets(
    f: ModelFn,
    theta: Tensor,
    X: Tensor,
    depth: int,
    n: int,
    gen: torch.Generator,
    batched: bool = True,
    chunk: int = 64,
) -> Tensor:
    """``n`` random right-nested brackets of ``depth + 1`` fields, shape ``(n, D)``.

    Each field is ``∇_θ ⟨C, f(θ, X)⟩`` with ``C`` Gaussian, one coefficient per input and
    output: a random combination of the fields of *all* the inputs. Brackets are multilinear
    in the fields, so ``n`` random ones span the same space as all brackets of single-input
    fields once ``n`` exceeds the dimension still missing (generically), with no input left
    out (inputs drawn one per field missed rarely active ReLU regions and could stop a level
    early). ``batched=False`` evaluates them one at a time in a Python loop.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    # drawn on the CPU generator, then moved: the same seed gives the same count on any device
    out_shape = f(theta, X).shape
    cs = torch.randn((n, depth + 1, *out_shape), generator=gen, dtype=theta.dtype).to(theta.device)
    if batched:
        return vmap(lambda b: nested(f, theta, X, b), chunk_size=chunk)(cs)
    return torch.stack([nested(f, theta, X, b) for b in cs])


def lie_dims(
    f: ModelFn,
    theta: Tensor,
    X: Tensor,
    J: Tensor,
    gen: torch.Generator,
    max_depth: int = 6,
    batched: bool = True,
    laws: Tensor | None = None,
    exact: bool = False,
) -> tuple[list[int], list[tuple[float, float]], bool]:
    """The dimension of the span at ``θ`` after 0, 1, 2, … levels of brackets.

    ``J``: the Jacobian ``(rows, D)`` over ``X``, level 0. Stops at the first level that adds
    nothing (at a generic ``θ`` the ranks are locally constant, so the span is then closed
    under brackets), at ``D``, or at ``D − k`` when ``laws`` (``(D, k)``, an orthonormal basis
    of the gradients of ``k`` laws known to hold) is given: those gradients are orthogonal to
    every field and so to every bracket, the span cannot grow past ``D − k``, and the level
    that would only confirm that is skipped. ``exact``: every rank from all singular values
    (:class:`~flowlaws.conservation.spans.Span`). Returns the dims, the (gap, margin) they
    were read at, and whether it stopped for one of those reasons.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    D = theta.numel()
    bound = None if laws is None else D - laws.shape[1]
    span = Span(theta.new_zeros((0, D)), laws=laws, exact=exact)
    span.add(J, rescale=True)
    dims, gaps = [span.rank], [(span.gap, span.margin)]
    for depth in range(1, max_depth + 1):
        if span.rank == D or span.rank == bound:
            return dims, gaps, True
        span.add(brackets(f, theta, X, depth, D - span.rank + 4, gen, batched))
        dims.append(span.rank)
        gaps.append((span.gap, span.margin))
        if dims[-1] == dims[-2]:
            return dims, gaps, True
    return dims, gaps, span.rank == D
