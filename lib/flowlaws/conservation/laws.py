"""The seed's conservation laws, one function per architecture, and how to check them.

:func:`invariants` evaluates the claimed laws of a model (balancedness of linear and ReLU
layers, one law per SwiGLU unit, ``QᵢᵀQᵢ − KᵢᵀKᵢ`` and ``VᵢᵀVᵢ − OᵢᵀOᵢ`` per attention head,
the 2×2 RoPE block laws, per-expert MoE laws and ``Σ_e W_e``); :func:`orthogonality` measures
how far ``∇h`` is from orthogonal to every ``∇_θ f(θ, x)``; :func:`drift` is ``dh/dt`` under
gradient flow. The count of *all* laws is :mod:`flowlaws.conservation.lie_count`.

A composite module (a stack of library blocks in an ``nn.Module`` or ``nn.Sequential``) is
walked block by block (:func:`law_blocks`, where the docstring says why the laws survive).

Explained in: book/01_conservation/02_feedforward.ipynb, 03_attention.ipynb and 04_moe.ipynb.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import grad, jacrev, jvp

from flowlaws.book.runtime import one_thread
from flowlaws.common.models import Deep, MoE, MultiHeadAttention, SwiGLU, TwoLayer
from flowlaws.conservation.flat_params import (
    ModelFn,
    Params,
    block_params,
    check_inputs,
    flat_model_fn,
    jacobian,
    model_layout,
    random_inputs,
    unflatten,
)

__all__ = [
    "Params", "ModelFn", "LAW_TOL", "LawFn", "balancedness", "invariants", "invariant_fn",
    "seed_claims", "seed_claim_fn", "law_blocks", "unclaimed_parameters", "random_inputs",
    "orthogonality", "drift",
]


with warnings.catch_warnings():
    # torch 2.13 scripts its forward-mode decompositions on the first jvp and warns that
    # torch.jit.script is deprecated: an internal matter, not the reader's.
    warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
    jvp(torch.sin, (torch.zeros(1),), (torch.ones(1),))


LawFn = Callable[[Params], dict[str, Tensor]]


LAW_TOL = 1e-8
"""A claimed invariant holds when :func:`orthogonality` is below this."""


def balancedness(params: Params) -> Tensor:
    """``UᵀU − VVᵀ``, the ``(width, width)`` conserved matrix of a linear two-layer network.

    ``params`` holds ``"U.weight"`` ``(n_out, width)`` and ``"V.weight"`` ``(width, n_in)`` (a
    :class:`~flowlaws.common.models.TwoLayer`'s names, or a gradient with the same keys).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    U, V = params["U.weight"], params["V.weight"]
    return U.T @ U - V @ V.T


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


def _moe_laws(model: MoE, p: Params, seed: bool = False) -> dict[str, Tensor]:
    """The expert laws, then the gate's: every entry of ``W`` when one expert is kept (top-1,
    or a single expert: ``g = 1``), else ``Σ_e W_e`` (softmax) or none (normalized sigmoid).
    ``seed``: ``Σ_e W_e`` for every gate, the seed's claim."""
    out = {}
    for e in range(len(model.experts)):
        out.update(_swiglu_laws(p, f"experts.{e}."))
    if seed:
        out["gate.sum"] = p["gate.weight"].sum(0)
    elif model.top_k == 1 or len(model.experts) == 1:
        out["gate.weight"] = p["gate.weight"]
    elif model.gate_kind == "softmax":
        out["gate.sum"] = p["gate.weight"].sum(0)
    return out


def _known_model(model: nn.Module) -> bool:
    return isinstance(model, (TwoLayer, Deep, SwiGLU, MultiHeadAttention, MoE))  # the blocks


def law_blocks(model: nn.Module) -> dict[str, nn.Module]:
    """The outermost library blocks of ``model`` by qualified name (``{"": model}`` for a block).

    A block is a :class:`TwoLayer`, :class:`Deep`, :class:`SwiGLU`,
    :class:`MultiHeadAttention` or :class:`MoE` (one used twice counts once, under its first
    name); :func:`invariants` keys its laws ``"{name}/{law}"``. Why they stay laws inside any
    composite (a residual stack with embeddings and norms): each comes from a symmetry that
    acts on the block's own parameters only and leaves the block's output unchanged for
    *every* input, so ``∇_φ L``, a combination of ``∇_φ g(φ, z)`` at whatever inputs ``z`` the
    rest of the model feeds the block, stays orthogonal to ``∇h``. That needs the block's
    parameters to reach the output only through the block's calls: a ``ValueError`` when one
    is a tensor shared with another module (tied weights); a composite that reads a block's
    weight in its own ``forward`` breaks the law, and :func:`orthogonality`/:func:`drift` show
    it. Parameters outside the blocks (:func:`unclaimed_parameters`) may add laws not claimed
    here: a learnable RMSNorm gain ``γ`` before a block that reads its input through linear
    maps gives the rescaling ``γ_i → e^ε γ_i``, input column ``i`` of each map ``→ e^{−ε}``,
    hence the extra law ``γ_i² − Σ ‖column i‖²`` (checked in the tests); the block laws hold.
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    if _known_model(model):
        return {"": model}
    blocks: dict[str, nn.Module] = {}
    for name, module in model.named_modules():
        inside = any(name.startswith(f"{b}.") for b in blocks)
        if not inside and _known_model(module):
            blocks[name] = module
    owner = {id(m): id(b) for b in blocks.values() for m in b.modules()}
    holders: dict[int, list[tuple[str, int | None]]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        holder = owner.get(id(model.get_submodule(name.rpartition(".")[0])))
        holders.setdefault(id(p), []).append((name, holder))
    for found in holders.values():
        if len({h for _, h in found}) > 1:
            raise ValueError(f"parameters {[n for n, _ in found]} are one tensor shared by a "
                             "library block and another module: its laws are not claimed")
    return blocks


def unclaimed_parameters(model: nn.Module) -> list[str]:
    """The names of the parameters of ``model`` outside every :func:`law_blocks` block.

    No law is claimed for them (an embedding, an unembedding, a norm's gain): they may take
    part in laws the library does not list. Explained in: book/01_conservation/06_real_data.ipynb
    """
    inside = tuple(f"{b}." for b in law_blocks(model))
    return [] if "." in inside else [n for n, _ in model.named_parameters()
                                     if not n.startswith(inside)]


def _composite_law_fn(blocks: dict[str, nn.Module], seed: bool) -> LawFn:
    """Every block's laws from a parameter dict of the whole model, keyed ``"{block}/{law}"``."""
    fns = {name: _law_fn(block, seed) for name, block in blocks.items()}

    def laws(p: Params) -> dict[str, Tensor]:
        out = {}
        for name, fn in fns.items():
            out.update({f"{name}/{k}": v for k, v in fn(block_params(p, name)).items()})
        return out

    return laws


def _law_fn(model: nn.Module, seed: bool = False) -> Callable[[Params], dict[str, Tensor]]:
    """The invariants of ``model`` (``seed``: the seed's claims) as a function of a parameter
    dict; a composite's are its blocks' (:func:`law_blocks`); an empty dict for a model with
    no library block."""
    if isinstance(model, MoE):
        return lambda p: _moe_laws(model, p, seed)
    if isinstance(model, TwoLayer):
        return lambda p: _two_layer_laws(model, p)
    if isinstance(model, Deep):
        return lambda p: _deep_laws(model, p)
    if isinstance(model, SwiGLU):
        return _swiglu_laws
    if isinstance(model, MultiHeadAttention):
        return lambda p: _attention_laws(model, p)
    blocks = law_blocks(model)
    return _composite_law_fn(blocks, seed) if blocks else lambda p: {}


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
    - ``MoE``: ``"experts.{e}.units"`` for each expert, and the gate's laws, which follow
      the gate: softmax (dense or top-k, k ≥ 2): ``"gate.sum" = Σ_e W[e, :]``
      (``(d_model,)``); top-1 or a single expert (either gate): ``"gate.weight"``, every
      entry of ``W`` (``(experts, d_model)``: ``g = 1``, no gradient reaches the gate);
      normalized sigmoid, dense or top-k with k ≥ 2: no gate law. The seed claims
      ``"gate.sum"`` for every gating: that list is :func:`seed_claims`.

    A composite module: the laws above of each block of :func:`law_blocks`, under
    ``"{block}/{law}"`` (``"layers.3.attn/head0.QK"``); its other parameters
    (:func:`unclaimed_parameters`) have none. A module without library blocks: an empty
    dict, like GELU.
    Units: the square of the weights' units. Explained in: book/01_conservation/02_feedforward.ipynb
    """
    return _law_fn(model)(_named(model))


def seed_claims(model: nn.Module) -> dict[str, Tensor]:
    """The invariants the seed claims for ``model``: :func:`invariants`, except for ``MoE``.

    For ``MoE`` the seed claims the expert laws and ``"gate.sum" = Σ_e W[e, :]`` for every
    gate, dense or top-k; that sum is not conserved by the normalized sigmoid gate, and top-1
    conserves every gate entry (:func:`invariants`). Pass :func:`seed_claim_fn` as
    ``candidate`` to :func:`orthogonality` or :func:`drift` to test the claims.
    Explained in: book/01_conservation/04_moe.ipynb
    """
    return _law_fn(model, seed=True)(_named(model))


def seed_claim_fn(model: nn.Module) -> LawFn:
    """:func:`seed_claims` as a function of a parameter dict, for ``candidate=``."""
    return _law_fn(model, seed=True)


def invariant_fn(model: nn.Module) -> LawFn:
    """:func:`invariants` as a function of a parameter dict (``model.named_parameters()``
    names), for training loops and gradients. Explained in: book/01_conservation/06_real_data.ipynb
    """
    return _law_fn(model)


def _named(model: nn.Module) -> Params:
    return {name: value.detach() for name, value in model.named_parameters()}


def _law_vector_fn(model: nn.Module, layout: list[tuple[str, torch.Size]],
                   keys: list[str] | None = None, candidate: LawFn | None = None,
                   ) -> Callable[[Tensor], Tensor]:
    """``θ ↦`` the chosen invariants' entries, flattened into one vector."""
    laws = _law_fn(model) if candidate is None else candidate

    def h(theta: Tensor) -> Tensor:
        values = laws(unflatten(theta, layout))
        chosen = [v.reshape(-1) for k, v in values.items() if keys is None or k in keys]
        return torch.cat(chosen) if chosen else theta[:0]

    return h


def _refuse_unknown(model: nn.Module, candidate: LawFn | None) -> None:
    """A ``ValueError`` for a module with no library block and no ``candidate``."""
    if candidate is None and not law_blocks(model):
        raise ValueError(
            f"no known laws for {type(model).__name__}: the library knows the laws of TwoLayer, "
            "Deep, SwiGLU, MultiHeadAttention and MoE (alone or as blocks of a composite "
            "module); pass candidate= to check your own"
        )


def _checked_keys(
    model: nn.Module, theta: Tensor, layout: list, keys: list[str] | None, candidate: LawFn | None
) -> list[str]:
    """The law names to check, or a ``ValueError`` when there is nothing to check.

    Refuses a module the library has no laws for (one without library blocks) unless a
    ``candidate`` is given, a model whose known laws are none (GELU, SiLU, tanh), and a key
    that is not one of the laws' names: each would otherwise read as a law that holds.
    """
    _refuse_unknown(model, candidate)
    laws = _law_fn(model) if candidate is None else candidate
    names = list(laws(unflatten(theta, layout)))
    if not names:
        what = f"{type(model).__name__} {getattr(model, 'activation', '')}".rstrip()
        raise ValueError(f"{what} has no {'candidate' if candidate else 'known'} laws: "
                         "nothing to check (pass candidate= to check your own)")
    if keys is not None:
        unknown = [k for k in keys if k not in names]
        if unknown or not keys:
            raise ValueError(f"keys must name laws among {names}, got {list(keys)!r}")
    return names if keys is None else list(keys)


def _relative_dots(G: Tensor, J: Tensor) -> float:
    """``max |⟨g, j⟩| / (‖g‖ ‖j‖)`` over the rows of ``G`` and ``J`` (zero rows skipped).

    NaN when nothing was compared (no non-zero row in ``G`` or in ``J``): never the 0.0 that
    reads as "the law holds".
    """
    G = G[G.norm(dim=1) > 0]
    J = J[J.norm(dim=1) > 0]
    if G.numel() == 0 or J.numel() == 0:
        return math.nan
    dots = (G / G.norm(dim=1, keepdim=True)) @ (J / J.norm(dim=1, keepdim=True)).T
    return float(dots.abs().max())


def orthogonality(model: nn.Module, inputs: Tensor, keys: list[str] | None = None,
                  candidate: LawFn | None = None) -> float:
    """The largest ``|⟨∇h, ∇_θ f_k(θ, x)⟩| / (‖∇h‖ ‖∇_θ f_k(θ, x)‖)``: ≈ 0 for true laws.

    The maximum runs over every scalar entry ``h`` of :func:`invariants` (or of those named in
    ``keys``), every input in ``inputs`` (``(n, *input)``) and every output ``k``, at the
    model's current parameters, in float64. A dimensionless cosine in ``[0, 1]``. Around
    1e-15 for a law; a false candidate gives ~1e-2 or more. ``candidate`` replaces
    :func:`invariants` by your own: a function from the parameter dict
    (``model.named_parameters()`` names) to a dict of tensors (:func:`seed_claim_fn`: the
    seed's claims).

    A composite module is checked block by block (:func:`law_blocks`; keys
    ``"{block}/{law}"``) against the Jacobian of the whole model, its other parameters
    included; its inputs may then be integer token ids.

    Nothing checked never reads as "holds": a ``ValueError`` when the model has no known laws
    (GELU; a module without library blocks) and no ``candidate``, or when a key is not a
    law's name; NaN when every law gradient or every
    Jacobian row is zero at ``θ`` (``θ = 0``, say).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    X = check_inputs(model, inputs)
    theta, layout = model_layout(model)
    chosen = _checked_keys(model, theta, layout, keys, candidate)
    h = _law_vector_fn(model, layout, chosen, candidate)
    with one_thread():
        return _relative_dots(jacrev(h)(theta), jacobian(flat_model_fn(model, layout), theta, X))


def drift(
    model: nn.Module, inputs: Tensor, targets: Tensor, candidate: LawFn | None = None
) -> dict[str, Tensor]:
    """``dh/dt = −⟨∇h, ∇L⟩`` for each invariant under the gradient flow of the MSE loss.

    ``L(θ) = (1/2n) Σ ‖f(θ, x_n) − y_n‖²`` with ``targets`` (``y``) shaped like the outputs;
    each value has the shape of its invariant. Zero for a law, whatever the data: a non-zero
    value is a counter-example. The invariants are :func:`invariants`, or ``candidate``'s
    (:func:`seed_claim_fn`: the seed's claims); a composite's are keyed
    ``"{block}/{law}"`` (:func:`law_blocks`); a ``ValueError`` for a module without library
    blocks and no ``candidate``. Explained in: book/01_conservation/04_moe.ipynb
    """
    X = check_inputs(model, inputs)
    _refuse_unknown(model, candidate)
    theta, layout = model_layout(model)
    f = flat_model_fn(model, layout)
    loss = lambda t: 0.5 * (f(t, X) - targets.to(torch.float64)).pow(2).sum() / X.shape[0]  # noqa: E731
    g = grad(loss)(theta)
    laws = _law_fn(model) if candidate is None else candidate
    return {
        k: -jvp(lambda t, k=k: laws(unflatten(t, layout))[k], (theta,), (g,))[1]
        for k in laws(unflatten(theta, layout))
    }
