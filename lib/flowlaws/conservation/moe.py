"""Chapter 4's experiment: the seed's MoE laws against the count, gate by gate.

Explained in: book/01_conservation/04_moe.ipynb.
"""
from __future__ import annotations

import torch

from flowlaws.common.models import MoE
from flowlaws.conservation.laws import LAW_TOL, orthogonality, random_inputs
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
