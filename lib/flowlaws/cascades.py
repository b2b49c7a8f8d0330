"""Helpers of the percolation and DSI chapters: symmetric merges, jump sweeps, SGD cascades.

- :func:`ensemble_cmax`: the order parameter ``C_max`` of many networks at once (the same
  rule as :func:`flowlaws.clusters.ensemble_largest_component`, vectorised);
- :func:`merge_heights`: the single-linkage merge heights of the neurons (the tolerances at
  which components join), and :func:`cyclic_problem`, a network and data set with a cyclic
  symmetry whose neurons therefore merge in whole orbits;
- :func:`block_jump_sweep`: the largest and the last jump of ``C_max/N`` for block merges
  or Erdős–Rényi growth, over network sizes (plain lists, ready for :mod:`flowlaws.cache`).

Explained in: book/02_percolation/04_percolation.ipynb.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform

from flowlaws.clusters import DEFAULT_DEAD_TOL, DEFAULT_TOL, dead_neurons, relative_distance
from flowlaws.percolation import block_merge_curve, erdos_renyi_curve, max_jump
from flowlaws.sde import TwoLayerShape, split_params

__all__ = ["ensemble_cmax", "merge_heights", "cyclic_problem", "block_jump_sweep"]


def ensemble_cmax(theta: torch.Tensor, shape: TwoLayerShape, tol: float = DEFAULT_TOL,
                  dead_tol: float = DEFAULT_DEAD_TOL) -> torch.Tensor:
    """``(R,)`` ``C_max`` of every network in ``theta`` ``(R, dim)``, without a Python loop.

    Same graph as :func:`flowlaws.clusters.largest_component`: live neurons with relative
    distance below ``tol`` are joined; components by transitive closure (repeated squaring of
    the adjacency matrix). A network with a non-finite weight gets ``C_max = 0`` (diverged).

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    V, U = split_params(theta, shape)
    alive = ~dead_neurons(V, U, dead_tol)
    A = (relative_distance(V, U) < tol) & alive[:, :, None] & alive[:, None, :]
    A = (A | torch.eye(shape.width, dtype=torch.bool, device=theta.device)).float()
    for _ in range(max(1, math.ceil(math.log2(shape.width)))):
        A = ((A @ A) > 0).float()
    cmax = A.sum(-1).amax(-1)
    return torch.where(torch.isfinite(theta).all(dim=1), cmax, torch.zeros_like(cmax))


def merge_heights(theta: torch.Tensor, shape: TwoLayerShape) -> np.ndarray:
    """``(R, width − 1)`` single-linkage merge heights of the neurons of each network.

    Height ``k`` is the relative distance (:func:`flowlaws.clusters.relative_distance`) at
    which the number of components drops from ``width − k`` to ``width − k − 1``: at a
    tolerance ``tol`` the network has ``1 + #{heights ≥ tol}`` components (dead neurons
    counted like the others). Equal heights are merges that happen at the same instant.
    """
    rel = relative_distance(*split_params(theta, shape)).double().cpu().numpy()
    out = []
    for d in rel:
        d = 0.5 * (d + d.T)
        np.fill_diagonal(d, 0.0)
        out.append(linkage(squareform(d, checks=False), "single")[:, 2])
    return np.array(out)


def cyclic_problem(n: int, n_base: int = 32, *, spread: float = 0.5, seed: int = 0
                   ) -> tuple[TwoLayerShape, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A tanh network of ``n`` neurons on data with the cyclic symmetry ``x → Sx``.

    ``S`` rolls the ``n`` input coordinates. The inputs are ``n_base`` Gaussian points and all
    their rolls (``n · n_base`` rows), the target ``tanh(Σx/√n)`` is roll-invariant, and the
    initial state ``(1, dim)`` is an orbit: ``v_i = S^i v_0``, ``u_i = 1/n``, with
    ``v_0 = (1 + spread·ξ)/√n``. The loss is invariant under ``v_i → S v_{i−1}``, so gradient
    descent keeps the state an orbit and the neurons' distance matrix circulant.
    Returns ``(shape, X, Y, theta0)``, float32.
    """
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n_base, n, generator=g)
    X = torch.cat([torch.roll(base, k, dims=1) for k in range(n)])
    Y = torch.tanh(X.sum(1, keepdim=True) / math.sqrt(n))
    v0 = (1 + spread * torch.randn(n, generator=g)) / math.sqrt(n)
    V = torch.stack([torch.roll(v0, i) for i in range(n)])
    theta0 = torch.cat([V.flatten(), torch.full((n,), 1.0 / n)])[None]
    return TwoLayerShape(n, n, 1, "tanh"), X, Y, theta0


def block_jump_sweep(sizes: list[int], n_runs: int, *, process: str = "block", n: int = 2,
                     weighting: str = "uniform", seed: int = 0) -> dict[str, list[float]]:
    """Largest and last one-step jump of ``C_max/N`` over ``n_runs`` runs, for each ``N``.

    ``process`` is ``"block"`` (:func:`flowlaws.percolation.block_merge_curve` with block size
    ``n`` and ``weighting``) or ``"er"`` (:func:`flowlaws.percolation.erdos_renyi_curve`).
    Returns lists over ``sizes``: ``N``, ``max_mean``, ``max_sem``, ``last_mean``,
    ``last_sem`` (the last jump is that of the final merge; for ER the last edge's).
    """
    if process not in ("block", "er"):
        raise ValueError(f"process must be 'block' or 'er', got {process!r}")
    out: dict[str, list[float]] = {k: [] for k in ("N", "max_mean", "max_sem", "last_mean",
                                                   "last_sem")}
    for N in sizes:
        curves = [block_merge_curve(N, n, weighting=weighting, seed=seed + r)[1]
                  if process == "block" else erdos_renyi_curve(N, seed=seed + r)[1]
                  for r in range(n_runs)]
        for key, vals in (("max", [max_jump(c) for c in curves]),
                          ("last", [c[-1] - c[-2] for c in curves])):
            out[f"{key}_mean"].append(float(np.mean(vals)))
            out[f"{key}_sem"].append(float(np.std(vals, ddof=1) / math.sqrt(n_runs)))
        out["N"].append(float(N))
    return out
