"""Chapter 4's experiment: the seed's MoE laws against the count, gate by gate.

Explained in: book/01_conservation/04_moe.ipynb.
"""
from __future__ import annotations

import torch

from flowlaws.common.models import MoE
from flowlaws.conservation.laws import LAW_TOL, orthogonality, random_inputs, seed_claim_fn
from flowlaws.conservation.lie_count import count

__all__ = [
    "MOE_GATINGS",
    "moe_claims_vs_count",
]


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
