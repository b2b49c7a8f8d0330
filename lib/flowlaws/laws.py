"""Conservation laws of gradient flow: the known invariants, a direct check, and a count of all.

A function ``h(θ)`` is conserved by the gradient flow of *every* loss ``L(θ) = ℓ(f(θ, x), y)``
exactly when ``∇h(θ) ⊥ ∇_θ f_k(θ, x)`` for every input ``x`` and output ``k``
(:func:`orthogonality` checks that). The number of independent such laws near a generic
``θ`` is ``D − dim Lie(W)(θ)``, where ``W`` is the set of fields ``θ ↦ ∇_θ f_k(θ, x)`` and
``Lie(W)`` the Lie algebra their brackets generate (Marcotte, Gribonval & Peyré, 2023);
:func:`count` computes it numerically, in float64, with :mod:`torch.func`.

Weight-shape convention: PyTorch's ``out x in`` (see :mod:`flowlaws.models`). The seed
writes ``x^T W`` (``in x out``): its ``Q_i^T Q_i − K_i^T K_i`` is our
``W_Q[i] W_Q[i]^T − W_K[i] W_K[i]^T`` (``d_k x d_k``), its ``‖A_{:,i}‖² − ‖C_{i,:}‖²`` our
``‖A[i,:]‖² − ‖C[:,i]‖²``. The transposed forms (``W_Q^T W_Q − W_K^T W_K``) are *not* laws.

Explained in: book/01_conservation/01_gradient_flow.ipynb (the definition and the count),
book/01_conservation/02_feedforward.ipynb, book/01_conservation/03_attention.ipynb,
book/01_conservation/04_moe.ipynb (the invariants of each model).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, jacrev, jvp, vmap

from flowlaws.models import Deep, MoE, MultiHeadAttention, SwiGLU, TwoLayer

with warnings.catch_warnings():
    # torch 2.13 scripts its forward-mode decompositions on the first jvp and warns that
    # torch.jit.script is deprecated: an internal matter, not the reader's.
    warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
    jvp(torch.sin, (torch.zeros(1),), (torch.ones(1),))

Params = dict[str, Tensor]
ModelFn = Callable[[Tensor, Tensor], Tensor]

RANK_TOL = 1e-9
"""A singular value counts towards a rank when it exceeds ``RANK_TOL · σ_max``."""
MIN_GAP = 1e4
"""A rank is trusted when ``σ_r / σ_{r+1}`` is at least this (``σ_{r+1}`` floored: ``ε σ_max``)."""
LAW_TOL = 1e-8
"""A claimed invariant holds when :func:`orthogonality` is below this."""


# ----------------------------------------------------------------------------------------------
# The seed's invariants, one function per architecture, on a parameter dict.


def _unit_rows(p: Params, prefix: str) -> Tensor:
    """The incoming weights of a layer's units as rows, the bias (if any) as a last column."""
    W = p[f"{prefix}.weight"]
    bias = p.get(f"{prefix}.bias")
    return W if bias is None else torch.cat([W, bias[:, None]], dim=1)


def _balance(W_in: Tensor, W_out: Tensor, activation: str) -> Tensor | None:
    """``W_in W_in^T − W_out^T W_out`` (linear), its diagonal (ReLU), or ``None``."""
    if activation == "linear":
        return W_in @ W_in.T - W_out.T @ W_out
    if activation == "relu":
        return W_in.pow(2).sum(1) - W_out.pow(2).sum(0)
    return None


def _two_layer_laws(model: TwoLayer, p: Params) -> dict[str, Tensor]:
    law = _balance(_unit_rows(p, "V"), p["U.weight"], model.activation)
    return {} if law is None else {"hidden": law}


def _deep_laws(model: Deep, p: Params) -> dict[str, Tensor]:
    out = {}
    for k in range(len(model.layers) - 1):
        law = _balance(_unit_rows(p, f"layers.{k}"), p[f"layers.{k + 1}.weight"], model.activation)
        if law is not None:
            out[f"hidden{k}"] = law
    return out


def _swiglu_laws(p: Params, prefix: str = "") -> dict[str, Tensor]:
    A, C = p[f"{prefix}A.weight"], p[f"{prefix}C.weight"]
    return {f"{prefix}units": A.pow(2).sum(1) - C.pow(2).sum(0)}


def _attention_laws(model: MultiHeadAttention, p: Params) -> dict[str, Tensor]:
    Q, K, V, O = p["W_Q"], p["W_K"], p["W_V"], p["W_O"]  # noqa: E741
    out = {}
    for i in range(model.heads):
        if model.pe == "rope":
            blocks = lambda W: W.reshape(model.d_k // 2, -1).pow(2).sum(1)  # noqa: E731
            out[f"head{i}.QK"] = blocks(Q[i]) - blocks(K[i])
        else:
            out[f"head{i}.QK"] = Q[i] @ Q[i].T - K[i] @ K[i].T
        out[f"head{i}.VO"] = V[i] @ V[i].T - O[i].T @ O[i]
    return out


def _moe_laws(model: MoE, p: Params) -> dict[str, Tensor]:
    out = {}
    for e in range(len(model.experts)):
        out.update(_swiglu_laws(p, f"experts.{e}."))
    out["gate.sum"] = p["gate.weight"].sum(0)
    return out


def _law_fn(model: nn.Module) -> Callable[[Params], dict[str, Tensor]]:
    """The seed's invariants of ``model`` as a function of a parameter dict."""
    if isinstance(model, TwoLayer):
        return lambda p: _two_layer_laws(model, p)
    if isinstance(model, Deep):
        return lambda p: _deep_laws(model, p)
    if isinstance(model, SwiGLU):
        return _swiglu_laws
    if isinstance(model, MultiHeadAttention):
        return lambda p: _attention_laws(model, p)
    if isinstance(model, MoE):
        return lambda p: _moe_laws(model, p)
    return lambda p: {}


def invariants(model: nn.Module) -> dict[str, Tensor]:
    """The seed's invariants of ``model`` at its current parameters (``out x in`` convention).

    - ``TwoLayer``/``Deep``, linear: ``"hidden"`` (``"hidden{l}"``) ``= W_l W_l^T −
      W_{l+1}^T W_{l+1}``, a ``(width, width)`` matrix (the layer balancedness); ReLU: its
      diagonal, ``‖row i of W_l‖² − ‖column i of W_{l+1}‖²`` per hidden unit. A bias of
      ``W_l`` counts as one more input column. GELU, SiLU, tanh: none (empty dict).
    - ``SwiGLU``: ``"units"`` ``= ‖A[i,:]‖² − ‖C[:,i]‖²``, shape ``(width,)``.
    - ``MultiHeadAttention``: ``"head{i}.QK" = W_Q[i] W_Q[i]^T − W_K[i] W_K[i]^T``
      (``(d_k, d_k)``; with RoPE instead ``‖W_Q[i][2j:2j+2]‖_F² − ‖W_K[i][2j:2j+2]‖_F²``, shape
      ``(d_k/2,)``) and ``"head{i}.VO" = W_V[i] W_V[i]^T − W_O[i]^T W_O[i]`` (``(d_v, d_v)``).
    - ``MoE``: ``"experts.{e}.units"`` for each expert and ``"gate.sum" = Σ_e W[e, :]``
      (``(d_model,)``), as the seed claims for *both* gates (false for the sigmoid gate:
      see :func:`moe_claims_vs_count`).

    Units: the square of the weights' units. Explained in: book/01_conservation/02_feedforward.ipynb
    """
    params = {name: value.detach() for name, value in model.named_parameters()}
    return _law_fn(model)(params)


# ----------------------------------------------------------------------------------------------
# Flat parameter vectors, inputs, and the model as a function of (θ, x).


def _layout(model: nn.Module) -> tuple[Tensor, list[tuple[str, torch.Size]]]:
    named = list(model.named_parameters())
    theta = torch.cat([v.detach().reshape(-1).to(torch.float64) for _, v in named])
    return theta, [(name, v.shape) for name, v in named]


def _unflatten(theta: Tensor, layout: list[tuple[str, torch.Size]]) -> Params:
    sizes = [math.prod(shape) for _, shape in layout]
    pieces = torch.split(theta, sizes)
    return {name: piece.view(shape) for (name, shape), piece in zip(layout, pieces, strict=True)}


def _model_fn(model: nn.Module, layout: list[tuple[str, torch.Size]]) -> ModelFn:
    return lambda theta, x: functional_call(model, _unflatten(theta, layout), (x,))


LawFn = Callable[[Params], dict[str, Tensor]]


def _law_vector_fn(
    model: nn.Module,
    layout: list[tuple[str, torch.Size]],
    keys: list[str] | None = None,
    candidate: LawFn | None = None,
) -> Callable[[Tensor], Tensor]:
    """``θ ↦`` the chosen invariants' entries, flattened into one vector."""
    laws = _law_fn(model) if candidate is None else candidate

    def h(theta: Tensor) -> Tensor:
        values = laws(_unflatten(theta, layout))
        chosen = [v.reshape(-1) for k, v in values.items() if keys is None or k in keys]
        return torch.cat(chosen) if chosen else theta[:0]

    return h


def _sample_shape(model: nn.Module) -> tuple[int | None, ...] | None:
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


def _check_inputs(model: nn.Module, inputs: Tensor) -> Tensor:
    """``inputs`` as float64, or a ``ValueError`` naming ``inputs`` and what is allowed."""
    if not isinstance(inputs, Tensor) or inputs.dtype not in (torch.float32, torch.float64):
        got = inputs.dtype if isinstance(inputs, Tensor) else type(inputs).__name__
        raise ValueError(f"inputs must be a float32 or float64 tensor, got {got}")
    shape = _sample_shape(model)
    ok = shape is None or (
        inputs.dim() == len(shape) + 1
        and all(s is None or s == n for s, n in zip(shape, inputs.shape[1:], strict=True))
    )
    if not ok or inputs.shape[0] < 1:
        want = "(n, " + ", ".join("tokens" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"inputs must have shape {want} with n >= 1, got {tuple(inputs.shape)}")
    device = next(model.parameters()).device
    return inputs.to(device=device, dtype=torch.float64)


def random_inputs(model: nn.Module, n: int, tokens: int = 4, seed: int = 0) -> Tensor:
    """``n`` standard Gaussian inputs for ``model`` in float64 (``tokens`` tokens for attention).

    Shape ``(n, *input)``. Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    shape = _sample_shape(model)
    if shape is None:
        raise ValueError(f"model must be one of the flowlaws models, got {type(model).__name__}")
    sizes = tuple(tokens if s is None else s for s in shape)
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((n, *sizes), generator=gen, dtype=torch.float64)


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block on one intra-op thread, then restore the previous number.

    The count's tensors are small (``D`` up to a few hundred): there OpenMP threads gain
    little, and on a shared, loaded machine they lose a lot (measured: 1.6 s on one thread
    against 12 s on two for ``MultiHeadAttention(8, 2, 4, 4, pe="rope")``).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ----------------------------------------------------------------------------------------------
# Direct check: ∇h ⊥ ∇f(θ, x).


def _jacobian(f: ModelFn, theta: Tensor, X: Tensor, batched: bool = True) -> Tensor:
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


def _relative_dots(G: Tensor, J: Tensor) -> float:
    """``max |⟨g, j⟩| / (‖g‖ ‖j‖)`` over the rows of ``G`` and ``J`` (zero rows skipped)."""
    G = G[G.norm(dim=1) > 0]
    J = J[J.norm(dim=1) > 0]
    if G.numel() == 0 or J.numel() == 0:
        return 0.0
    dots = (G / G.norm(dim=1, keepdim=True)) @ (J / J.norm(dim=1, keepdim=True)).T
    return float(dots.abs().max())


def orthogonality(
    model: nn.Module,
    inputs: Tensor,
    keys: list[str] | None = None,
    candidate: LawFn | None = None,
) -> float:
    """The largest ``|⟨∇h, ∇_θ f_k(θ, x)⟩| / (‖∇h‖ ‖∇_θ f_k(θ, x)‖)``: ≈ 0 for true laws.

    The maximum runs over every scalar entry ``h`` of :func:`invariants` (or of those named in
    ``keys``), every input in ``inputs`` (``(n, *input)``) and every output ``k``, at the
    model's current parameters, in float64. A dimensionless cosine in ``[0, 1]``; 0.0 when
    there is no invariant. Around 1e-15 for a law; a false candidate gives ~1e-2 or more.
    ``candidate`` replaces the seed's invariants by your own: a function from the parameter
    dict (``model.named_parameters()`` names) to a dict of tensors.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    X = _check_inputs(model, inputs)
    theta, layout = _layout(model)
    h = _law_vector_fn(model, layout, keys, candidate)
    with one_thread():
        return _relative_dots(jacrev(h)(theta), _jacobian(_model_fn(model, layout), theta, X))


def drift(model: nn.Module, inputs: Tensor, targets: Tensor) -> dict[str, Tensor]:
    """``dh/dt = −⟨∇h, ∇L⟩`` for each invariant under the gradient flow of the MSE loss.

    ``L(θ) = (1/2n) Σ ‖f(θ, x_n) − y_n‖²`` with ``targets`` (``y``) shaped like the outputs;
    each value has the shape of its invariant. Zero for a law, whatever the data: a non-zero
    value is a counter-example. Explained in: book/01_conservation/04_moe.ipynb
    """
    X = _check_inputs(model, inputs)
    theta, layout = _layout(model)
    f = _model_fn(model, layout)
    loss = lambda t: 0.5 * (f(t, X) - targets.to(X.dtype)).pow(2).sum() / X.shape[0]  # noqa: E731
    g = grad(loss)(theta)
    laws = _law_fn(model)
    return {
        k: -jvp(lambda t, k=k: laws(_unflatten(t, layout))[k], (theta,), (g,))[1]
        for k in laws(_unflatten(theta, layout))
    }


# ----------------------------------------------------------------------------------------------
# Ranks read from singular values.


@dataclass
class _Span:
    """A running span of row vectors, kept as the ``R`` of a QR (same singular values, ≤ D rows).

    The Jacobian block is scaled to unit root-mean-square row norm (``rescale``); brackets
    come already divided by the size of the terms they were computed from (:func:`_bracket`),
    so that a bracket that vanishes identically stays at rounding level and adds no rank.
    """

    rows: Tensor
    rank: int = 0
    gap: float = math.inf

    def add(self, block: Tensor, tol: float = RANK_TOL, rescale: bool = False) -> None:
        if rescale:
            scale = block.norm(dim=1).pow(2).mean().sqrt()
            block = block / scale if scale > 0 else block
        self.rows = torch.linalg.qr(torch.cat([self.rows, block]), mode="r")[1]
        self.rank, self.gap = _rank_and_gap(torch.linalg.svdvals(self.rows), tol)


def _rank_and_gap(S: Tensor, tol: float = RANK_TOL) -> tuple[int, float]:
    """The numerical rank of singular values ``S`` and the gap ``σ_r / σ_{r+1}`` it was read at."""
    if S.numel() == 0 or S[0] == 0:
        return 0, math.inf
    rank = int((S > tol * S[0]).sum())
    floor = torch.finfo(S.dtype).eps * S[0]
    below = S[rank] if rank < S.numel() else S.new_zeros(())
    return rank, float(S[rank - 1] / torch.maximum(below, floor))


def _rank(M: Tensor, tol: float = RANK_TOL) -> tuple[int, float]:
    if M.numel() == 0:
        return 0, math.inf
    return _rank_and_gap(torch.linalg.svdvals(M), tol)


# ----------------------------------------------------------------------------------------------
# Iterated Lie brackets of the fields x ↦ ∇_θ ⟨c, f(θ, x)⟩.


Scaled = Callable[[Tensor], tuple[Tensor, Tensor]]
"""A field that also returns the size of the terms its value was computed from."""


def _field(f: ModelFn, x: Tensor, c: Tensor) -> Scaled:
    """The gradient field ``θ ↦ ∇_θ ⟨c, f(θ, x)⟩`` (``x`` a batch of one, ``c`` like the output)."""
    gradient = grad(lambda t: (f(t, x) * c).sum())

    def value(theta: Tensor) -> tuple[Tensor, Tensor]:
        g = gradient(theta)
        return g, g.norm()

    return value


def _bracket(X: Scaled, Z: Scaled) -> Scaled:
    """``[X, Z](θ) = DZ(θ) X(θ) − DX(θ) Z(θ)``, by two forward-mode products.

    The returned scale is what rounding errors are relative to: ``‖DZ X‖ + ‖DX Z‖``, times
    ``scale(Z) / ‖Z‖`` so that an inner bracket that cancelled to rounding noise (commuting
    fields) keeps its outer brackets at noise level instead of being blown up to size one.
    """

    def value(theta: Tensor) -> tuple[Tensor, Tensor]:
        x = X(theta)[0]
        z, dz, z_scale = jvp(Z, (theta,), (x,), has_aux=True)
        dx = jvp(lambda t: X(t)[0], (theta,), (z,))[1]
        inflation = z_scale / z.norm().clamp_min(torch.finfo(z.dtype).tiny)
        return dz - dx, (dz.norm() + dx.norm()) * inflation

    return value


def _nested(f: ModelFn, theta: Tensor, xs: Tensor, cs: Tensor) -> Tensor:
    """The right-nested bracket ``[X_0, [X_1, … [X_{k-1}, X_k]]](θ)``, divided by its scale.

    ``xs``: ``(k+1, 1, *input)``; ``cs``: ``(k+1, 1, *output)``; the result has shape ``(D,)``
    and norm at most about one; a bracket that vanishes identically comes out at ~1e-16.
    """
    Z = _field(f, xs[-1], cs[-1])
    for j in range(xs.shape[0] - 2, -1, -1):
        Z = _bracket(_field(f, xs[j], cs[j]), Z)
    value, scale = Z(theta)
    return value / scale.clamp_min(torch.finfo(value.dtype).tiny)


def _brackets(
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

    Each field is ``∇_θ ⟨c, f(θ, x)⟩`` with ``x`` drawn from ``X`` and ``c`` Gaussian: the
    brackets are multilinear in the ``c``'s, so ``n`` random ones span the same space as all
    of them once ``n`` exceeds the dimension still missing (generically). ``batched=False``
    evaluates them one at a time in a Python loop (the reference of ``bench/bench_laws.py``).
    """
    # drawn on the CPU generator, then moved: the same seed gives the same count on any device
    idx = torch.randint(X.shape[0], (n, depth + 1), generator=gen).to(X.device)
    xs = X[idx][:, :, None]
    out_shape = f(theta, X[:1]).shape
    cs = torch.randn((n, depth + 1, *out_shape), generator=gen, dtype=theta.dtype).to(theta.device)
    if batched:
        return vmap(lambda a, b: _nested(f, theta, a, b), chunk_size=chunk)(xs, cs)
    return torch.stack([_nested(f, theta, a, b) for a, b in zip(xs, cs, strict=True)])


def _lie_dims(
    f: ModelFn,
    theta: Tensor,
    X: Tensor,
    J: Tensor,
    gen: torch.Generator,
    max_depth: int = 6,
    batched: bool = True,
) -> tuple[list[int], list[float], bool]:
    """The dimension of the span at ``θ`` after 0, 1, 2, … levels of brackets.

    Stops at the first level that adds nothing (at a generic ``θ`` the ranks are locally
    constant, so the span is then closed under brackets) or at ``D``. Returns the dims, the
    gaps they were read at, and whether it stopped for one of those two reasons.
    """
    D = theta.numel()
    span = _Span(theta.new_zeros((0, D)))
    span.add(J, rescale=True)
    dims, gaps = [span.rank], [span.gap]
    for depth in range(1, max_depth + 1):
        if span.rank == D:
            return dims, gaps, True
        span.add(_brackets(f, theta, X, depth, D - span.rank + 4, gen, batched))
        dims.append(span.rank)
        gaps.append(span.gap)
        if dims[-1] == dims[-2]:
            return dims, gaps, True
    return dims, gaps, span.rank == D


# ----------------------------------------------------------------------------------------------
# The count.


@dataclass
class LawCount:
    """The number of independent conservation laws near generic parameters.

    Attributes:
        n_laws: ``D − lie_dim``, an upper bound (a finite set of inputs may generate less).
        n_params: ``D``, the number of scalar parameters.
        jacobian_rank: the dimension of the span of the fields alone (no brackets);
            ``D − jacobian_rank`` is what one would wrongly count without brackets.
        lie_dim: the dimension of the generated Lie algebra at ``θ`` (max over points).
        known: the rank of the gradients of :func:`invariants`, a lower bound when they hold.
        certified: ``known == n_laws``, the ranks trusted, consistent across points, the
            claimed invariants orthogonal to the fields.
        gap: the smallest ``σ_r / σ_{r+1}`` over the ranks read (lie and jacobian).
        trusted: ``gap >= min_gap``; when false, the count is not to be relied on.
        consistent: every point gave the same ``lie_dim`` and ``jacobian_rank``.
        law_residual: :func:`orthogonality` of the claimed invariants (max over points).
        dims: per point, the span's dimension after 0, 1, 2, … levels of brackets.
        notes: plain-language warnings (disagreements, small gaps, false claims).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """

    n_laws: int
    n_params: int
    jacobian_rank: int
    lie_dim: int
    known: int
    certified: bool
    gap: float
    trusted: bool
    consistent: bool
    law_residual: float
    dims: list[list[int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        flag = "certified" if self.certified else "NOT certified"
        text = (
            f"{self.n_laws} laws (D={self.n_params}, jacobian rank {self.jacobian_rank}, "
            f"lie dim {self.lie_dim}, known {self.known}, gap {self.gap:.1e}, {flag})"
        )
        return "\n".join([text, *("  note: " + n for n in self.notes)])


@dataclass
class _Point:
    dims: list[int]
    lie_gap: float
    stable: bool
    jac_gap: float
    known: int
    residual: float


def _point_at(
    f: ModelFn,
    h: Callable,
    theta: Tensor,
    X: Tensor,
    gen: torch.Generator,
    max_depth: int,
    batched: bool,
) -> _Point:
    J = _jacobian(f, theta, X, batched)
    dims, gaps, stable = _lie_dims(f, theta, X, J, gen, max_depth, batched)
    G = jacrev(h)(theta)
    return _Point(dims, gaps[-1], stable, gaps[0], _rank(G)[0], _relative_dots(G, J))


def _points(
    theta: Tensor, layout: list, n_points: int, spread: float, gen: torch.Generator
) -> list[Tensor]:
    """``θ`` itself, then ``θ + spread · rms · ξ`` with ``ξ`` standard Gaussian, per tensor.

    The perturbed points are generic points *near* ``θ``: a special ``θ`` (equal heads, a
    zero block) has a rank that is too low there, and they show it. They stay in the same
    region of a ReLU network (dead units stay dead), whose count is a local one.
    """
    pieces = torch.split(theta, [math.prod(s) for _, s in layout])
    scales = [
        float(p.pow(2).mean().sqrt()) or float(theta.pow(2).mean().sqrt()) or 1.0 for p in pieces
    ]
    points = [theta]
    for _ in range(n_points - 1):
        noise = [
            s * torch.randn(p.shape, generator=gen, dtype=theta.dtype).to(theta.device)
            for s, p in zip(scales, pieces, strict=True)
        ]
        points.append(theta + spread * torch.cat(noise))
    return points


def _summarize(points: list[_Point], D: int, min_gap: float) -> LawCount:
    jac = max(p.dims[0] for p in points)
    lie = max(p.dims[-1] for p in points)
    known = max(p.known for p in points)
    gap = min(min(p.lie_gap, p.jac_gap) for p in points)
    residual = max(p.residual for p in points)
    consistent = len({(p.dims[0], p.dims[-1]) for p in points}) == 1
    trusted = gap >= min_gap and all(p.stable for p in points)
    notes = _notes(points, gap, min_gap, residual, consistent)
    certified = trusted and consistent and residual < LAW_TOL and known == D - lie
    return LawCount(
        D - lie,
        D,
        jac,
        lie,
        known,
        certified,
        gap,
        trusted,
        consistent,
        residual,
        [p.dims for p in points],
        notes,
    )


def _notes(points: list[_Point], gap: float, min_gap: float, residual: float, consistent: bool):
    notes = []
    if not consistent:
        notes.append(
            "the points disagree: (jacobian rank, lie dim) = "
            f"{[(p.dims[0], p.dims[-1]) for p in points]}; the largest (generic) value is kept"
        )
    if gap < min_gap:
        notes.append(f"rank gap {gap:.2e} below {min_gap:.0e}: the count is not to be trusted")
    if not all(p.stable for p in points):
        notes.append("the span still grew at max_depth: the count is only an upper bound")
    if residual >= LAW_TOL:
        notes.append(f"a claimed invariant is not orthogonal to the fields (cosine {residual:.1e})")
    return notes


def count(
    model: nn.Module,
    inputs: Tensor,
    seed: int = 0,
    *,
    n_points: int = 3,
    spread: float = 0.01,
    max_depth: int = 6,
    min_gap: float = MIN_GAP,
    batched: bool = True,
) -> LawCount:
    """The number of independent conservation laws of ``model``: ``D − dim Lie(W)(θ)``.

    ``W`` is spanned by the fields ``θ ↦ ∇_θ ⟨c, f(θ, x)⟩`` for ``x`` in ``inputs``
    (``(n, *input)``, float32 or float64; computed in float64) and every output direction
    ``c``. Level 0 is the exact Jacobian over ``inputs``; level ``k`` adds ``D − r + 4`` random
    right-nested brackets of ``k + 1`` fields (``r`` the dimension so far), evaluated in one
    ``vmap`` by nested forward-mode products. The dimension is read by SVD with the relative
    threshold :data:`RANK_TOL`; levels stop when one adds nothing. The first point is the
    model's current parameters, then ``n_points − 1`` random points near it (each tensor
    moved by ``spread`` times its root-mean-square, Gaussian); the largest (generic)
    dimension is kept and any disagreement is noted.

    For ReLU give more inputs than parameters (the fields depend on the activation pattern
    of each input). ``batched=False`` computes one bracket at a time (the benchmark's
    reference). Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    X = _check_inputs(model, inputs)
    if not isinstance(n_points, int) or n_points < 1:
        raise ValueError(f"n_points must be a positive int, got {n_points!r}")
    theta, layout = _layout(model)
    f, h = _model_fn(model, layout), _law_vector_fn(model, layout)
    gen = torch.Generator().manual_seed(seed)
    with one_thread():
        found = [
            _point_at(f, h, point, X, gen, max_depth, batched)
            for point in _points(theta, layout, n_points, spread, gen)
        ]
    return _summarize(found, theta.numel(), min_gap)


# ----------------------------------------------------------------------------------------------
# Mixture of experts: the seed's claims against the count.

MOE_GATINGS = (
    ("softmax", None),
    ("softmax", 2),
    ("softmax", 1),
    ("sigmoid", None),
    ("sigmoid", 2),
    ("sigmoid", 1),
)


def moe_claims_vs_count(
    d_model: int = 3,
    experts: int = 3,
    width: int = 2,
    n_out: int = 2,
    n_inputs: int = 150,
    seed: int = 0,
    gatings: tuple[tuple[str, int | None], ...] = MOE_GATINGS,
) -> list[dict[str, object]]:
    """One row per gating: the seed's claim, the count, and whether each claimed law holds.

    The seed claims ``experts · width`` SwiGLU laws plus the ``d_model`` entries of
    ``Σ_e W[e, :]``, for softmax and normalized-sigmoid gates, dense or top-k alike. Each
    row has ``gate``, ``top_k``, ``n_params``, ``claimed``, ``n_laws`` (:func:`count`),
    ``experts_hold`` and ``gate_sum_hold`` (:func:`orthogonality` below :data:`LAW_TOL`, with
    the cosines ``experts_cosine``, ``gate_sum_cosine``), ``certified`` and ``agrees``
    (count equal to the claim and every claimed law holding). Nothing is adjusted to agree.

    Explained in: book/01_conservation/04_moe.ipynb
    """
    rows = []
    for gate, top_k in gatings:
        torch.manual_seed(seed)
        model = MoE(d_model, experts, width, n_out, gate=gate, top_k=top_k).double()
        X = random_inputs(model, n_inputs, seed=seed)
        found = count(model, X, seed=seed)
        expert_keys = [f"experts.{e}.units" for e in range(experts)]
        cos_e, cos_g = orthogonality(model, X, expert_keys), orthogonality(model, X, ["gate.sum"])
        claimed = experts * width + d_model
        rows.append(
            {
                "gate": gate,
                "top_k": top_k,
                "n_params": found.n_params,
                "claimed": claimed,
                "n_laws": found.n_laws,
                "experts_cosine": cos_e,
                "gate_sum_cosine": cos_g,
                "experts_hold": cos_e < LAW_TOL,
                "gate_sum_hold": cos_g < LAW_TOL,
                "certified": found.certified,
                "agrees": found.n_laws == claimed and cos_e < LAW_TOL and cos_g < LAW_TOL,
            }
        )
    return rows
