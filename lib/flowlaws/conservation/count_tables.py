"""Law counts against their closed forms, one row per model, and the seed's MoE laws against
the count, one row per gating (:func:`moe_claims_vs_count`).

Explained in: book/01_conservation/02_feedforward.ipynb, 03_attention.ipynb and 04_moe.ipynb.
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.func import jacrev

from flowlaws.book.progress import track
from flowlaws.common.models import Deep, MoE, MultiHeadAttention, SwiGLU, TwoLayer
from flowlaws.conservation.flat_params import model_layout
from flowlaws.conservation.laws import (
    LAW_TOL,
    _law_vector_fn,
    orthogonality,
    random_inputs,
    seed_claim_fn,
)
from flowlaws.conservation.lie_count import count
from flowlaws.conservation.spans import rank

__all__ = [
    "COLUMNS",
    "MOE_GATINGS",
    "closed_form",
    "count_table",
    "moe_claims_vs_count",
]


COLUMNS = ("model", "sizes", "D", "jacobian rank", "lie dim", "laws", "closed form", "certified")
"""The columns of a count table, in the order the chapters show them."""


def closed_form(model: nn.Module) -> int:
    """The number of independent conservation laws the book's theorems predict for ``model``.

    - ``TwoLayer`` ReLU: ``width`` (one rescaling law per hidden unit); GELU, SiLU, tanh: 0.
    - ``Deep`` ReLU: ``Σ widths``, one law per hidden unit, when no unit is dead or linear on
      the inputs (:func:`~flowlaws.conservation.relu_units.nondegenerate`).
    - ``TwoLayer`` and ``Deep``, linear: the rank of the gradients of the balancedness laws
      ``W_l W_l^T − W_{l+1}^T W_{l+1}`` at a generic point (a fixed Gaussian draw): at most
      ``Σ n_l(n_l+1)/2`` and less when a layer is too thin for them to be independent
      (``[1, 3, 1]``: 5, not 6). This one is computed, not a formula.
    - ``SwiGLU``: ``width`` (one law ``‖A[i,:]‖² − ‖C[:,i]‖²`` per hidden unit).
    - ``MultiHeadAttention`` (no PE or sinusoidal): ``heads · (d_k(d_k+1)/2 + d_v(d_v+1)/2)``;
      RoPE: ``heads · (d_k/2 + d_v(d_v+1)/2)``. These assume ``d_k, d_v ≤ d_model`` and at
      least two tokens (with one token the softmax is constant and more laws appear).

    A ``ValueError`` for any other model (``Deep`` with GELU, SiLU or tanh included).

    Explained in: book/01_conservation/02_feedforward.ipynb, book/01_conservation/03_attention.ipynb
    """
    if isinstance(model, (TwoLayer, Deep)) and model.activation == "linear":
        return _balancedness_rank(model)
    if isinstance(model, TwoLayer) and model.activation in ("relu", "gelu", "silu", "tanh"):
        return model.V.out_features if model.activation == "relu" else 0
    if isinstance(model, Deep) and model.activation == "relu":
        return sum(layer.out_features for layer in model.layers[:-1])
    if isinstance(model, SwiGLU):
        return model.A.out_features
    if isinstance(model, MultiHeadAttention):
        qk = model.d_k // 2 if model.pe == "rope" else model.d_k * (model.d_k + 1) // 2
        return model.heads * (qk + model.d_v * (model.d_v + 1) // 2)
    raise ValueError(f"no closed form for {type(model).__name__} "
                     f"{getattr(model, 'activation', '')}".rstrip())


def _balancedness_rank(model: nn.Module) -> int:
    """The rank of the balancedness laws' gradients at a fixed Gaussian point."""
    theta, layout = model_layout(model)
    generic = torch.randn(theta.shape, generator=torch.Generator().manual_seed(0),
                          dtype=torch.float64)
    return rank(jacrev(_law_vector_fn(model, layout))(generic))[0]


def count_table(
    cases: Sequence[tuple[str, str, nn.Module, Tensor]], seed: int = 0, progress: bool = True
) -> list[dict[str, object]]:
    """One row per ``(name, sizes, model, inputs)``: the count, its closed form, and the time.

    Each row has ``model`` and ``sizes`` (the labels given), ``D``, ``jacobian rank``,
    ``lie dim``, ``laws`` (:func:`count` with ``seed``), ``closed form``
    (:func:`closed_form`), ``agrees`` (the two equal), ``certified``, ``seconds`` and
    ``count`` (the :class:`~flowlaws.conservation.lie_count.LawCount` itself).
    Nothing is adjusted to agree.

    Explained in: book/01_conservation/02_feedforward.ipynb
    """
    rows = []
    for name, sizes, model, inputs in track(cases, desc="counting", enabled=progress):
        start = time.perf_counter()
        found = count(model, inputs, seed=seed)
        expected = closed_form(model)
        rows.append({
            "model": name, "sizes": sizes, "D": found.n_params,
            "jacobian rank": found.jacobian_rank, "lie dim": found.lie_dim,
            "laws": found.n_laws, "closed form": expected, "agrees": found.n_laws == expected,
            "certified": found.certified, "seconds": time.perf_counter() - start, "count": found,
        })
    return rows


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
    ``Σ_e W[e, :]``, for softmax and normalized-sigmoid gates, dense or top-k alike
    (:func:`~flowlaws.conservation.laws.seed_claims`). The count is checked against the laws
    that follow the gate (:func:`~flowlaws.conservation.laws.invariants`: ``Σ_e W_e`` for
    softmax with ``top_k`` ≠ 1, every gate entry for top-1, nothing for the sigmoid gate).
    Each row has ``gate``, ``top_k``, ``n_params``, ``claimed`` (the seed's number),
    ``known`` (the rank of the gate-following laws), ``n_laws`` (:func:`count`),
    ``experts_hold`` and ``gate_sum_hold`` (the seed's claims, :func:`orthogonality` below
    :data:`LAW_TOL`, with the cosines ``experts_cosine``, ``gate_sum_cosine``),
    ``certified`` (the count equals ``known``, trusted) and ``agrees`` (the count equals the
    seed's claim and every claimed law holds). Nothing is adjusted to agree.

    Explained in: book/01_conservation/04_moe.ipynb
    """
    rows = []
    for gate, top_k in gatings:
        torch.manual_seed(seed)
        model = MoE(d_model, experts, width, n_out, gate=gate, top_k=top_k).double()
        X = random_inputs(model, n_inputs, seed=seed)
        found = count(model, X, seed=seed)
        expert_keys = [f"experts.{e}.units" for e in range(experts)]
        seed_laws = seed_claim_fn(model)
        cos_e = orthogonality(model, X, expert_keys, candidate=seed_laws)
        cos_g = orthogonality(model, X, ["gate.sum"], candidate=seed_laws)
        claimed = experts * width + d_model
        rows.append(
            {
                "gate": gate,
                "top_k": top_k,
                "n_params": found.n_params,
                "claimed": claimed,
                "known": found.known,
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
