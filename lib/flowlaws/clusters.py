"""Invariant sets of a two-layer network and who has merged: the attractor-equivalence graph.

Neuron ``i`` of ``f(x) = U σ(V x)`` is the vector ``w_i = [V[i, :], U[:, i]]`` (incoming
weights, then outgoing; PyTorch's out × in convention, ``V`` ``(width, n_in)``, ``U``
``(n_out, width)``). Two invariant sets of gradient flow *and* of SGD (Chen et al., 2023):

- permutation set ``{w_i = w_j}``: identical neurons receive identical gradients, forever;
  its distance is ``‖w_i − w_j‖/√2`` (the orthogonal projection moves both to their mean);
- dead set ``{w_i = 0}`` (for ``σ(0) = 0``): a neuron with no weights gets no gradient;
  its distance is ``‖w_i‖``.

Identity test (Chen et al.'s relative distance): neurons ``i ≠ j`` are *synchronized* when
``d_ij = ‖w_i − w_j‖ / (‖w_i‖ + ‖w_j‖) < tol`` with ``tol = DEFAULT_TOL = 0.05``. Our
choice: ``d_ij`` lies in ``[0, 1]``, two independent Gaussian neurons sit near ``1/√2 ≈
0.71``, and 0.05 flags only pairs whose difference is 5% of their size. A neuron is *dead*
when ``‖w_i‖ < dead_tol · max_j ‖w_j‖`` (``DEFAULT_DEAD_TOL = 0.01``, relative to the layer).

The attractor-equivalence graph has the neurons as nodes and synchronized pairs as edges;
its connected components (union-find, :class:`networkx.utils.UnionFind`) are the merged
subnetworks; the order parameter is the size of the largest one, ``C_max``.

Explained in: book/02_percolation/02_trapping.ipynb.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx
import numpy as np
import torch
from networkx.utils import UnionFind

DEFAULT_TOL = 0.05
DEFAULT_DEAD_TOL = 0.01

__all__ = [
    "DEFAULT_TOL",
    "DEFAULT_DEAD_TOL",
    "neuron_vectors",
    "relative_distance",
    "distance_to_permutation_set",
    "distance_to_dead_set",
    "dead_neurons",
    "synchronized_pairs",
    "components",
    "equivalence_graph",
    "largest_component",
    "partition",
    "ensemble_largest_component",
]


def neuron_vectors(V: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """``(..., width, n_in + n_out)``: row ``i`` is ``[V[i, :], U[:, i]]``.

    Shapes: ``V`` ``(..., width, n_in)``, ``U`` ``(..., n_out, width)`` (leading ensemble dims
    allowed).
    """
    if V.shape[-2] != U.shape[-1]:
        raise ValueError(f"V has {V.shape[-2]} neurons but U has {U.shape[-1]}")
    return torch.cat([V, U.transpose(-1, -2)], dim=-1)


def relative_distance(V: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """``(..., width, width)`` Chen et al.'s ``‖w_i − w_j‖ / (‖w_i‖ + ‖w_j‖)``.

    Zero where both neurons vanish; NaN where either is not finite (a diverged run), so that
    no threshold test ``< tol`` counts a diverged network as merged.
    """
    w = neuron_vectors(V, U)
    norms = w.norm(dim=-1)
    denom = norms[..., :, None] + norms[..., None, :]
    dist = torch.cdist(w, w, compute_mode="donot_use_mm_for_euclid_dist")
    ratio = torch.where(denom > 0, dist / denom.clamp_min(1e-300), torch.zeros_like(dist))
    return torch.where(torch.isfinite(denom), ratio, torch.full_like(dist, float("nan")))


def distance_to_permutation_set(V: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """``(..., width, width)`` distance of the state to ``{w_i = w_j}``: ``‖w_i − w_j‖/√2``."""
    w = neuron_vectors(V, U)
    return torch.cdist(w, w, compute_mode="donot_use_mm_for_euclid_dist") / np.sqrt(2.0)


def distance_to_dead_set(V: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """``(..., width)`` distance of the state to ``{w_i = 0}``: ``‖w_i‖``."""
    return neuron_vectors(V, U).norm(dim=-1)


def dead_neurons(
    V: torch.Tensor, U: torch.Tensor, dead_tol: float = DEFAULT_DEAD_TOL
) -> torch.Tensor:
    """``(..., width)`` bool: ``‖w_i‖ < dead_tol · max_j ‖w_j‖`` (all dead if every norm is 0)."""
    if dead_tol < 0:
        raise ValueError(f"dead_tol must be >= 0, got {dead_tol}")
    norms = distance_to_dead_set(V, U)
    scale = norms.amax(dim=-1, keepdim=True)
    return (norms < dead_tol * scale) | (scale == 0)


def synchronized_pairs(
    V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL, *, include_dead: bool = False
) -> list[tuple[int, int]]:
    """Pairs ``i < j`` with relative distance below ``tol`` (one network: ``V`` ``(width, n_in)``).

    Dead neurons are left out unless ``include_dead`` (their relative distance is meaningless).
    """
    if tol < 0:
        raise ValueError(f"tol must be >= 0, got {tol}")
    close = relative_distance(V, U) < tol
    if not include_dead:
        alive = ~dead_neurons(V, U)
        close &= alive[:, None] & alive[None, :]
    i, j = torch.nonzero(torch.triu(close, diagonal=1), as_tuple=True)
    return list(zip(i.tolist(), j.tolist(), strict=True))


def components(nodes: Iterable, edges: Iterable[tuple]) -> list[frozenset]:
    """Connected components by union-find, largest first (ties by smallest member).

    Every node appears in exactly one component, isolated nodes as singletons.
    """
    uf = UnionFind(nodes)
    for a, b in edges:
        uf.union(a, b)
    comps = [frozenset(c) for c in uf.to_sets()]
    return sorted(comps, key=lambda c: (-len(c), min(c)))


def equivalence_graph(
    V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL
) -> nx.Graph:
    """The attractor-equivalence graph of one network: neurons, synchronized pairs as edges.

    Node attributes: ``dead`` (bool) and ``norm`` (``‖w_i‖``); edge attribute ``distance``.
    """
    G = nx.Graph()
    dead = dead_neurons(V, U)
    norms = distance_to_dead_set(V, U)
    for i in range(V.shape[-2]):
        G.add_node(i, dead=bool(dead[i]), norm=float(norms[i]))
    rel = relative_distance(V, U)
    for i, j in synchronized_pairs(V, U, tol):
        G.add_edge(i, j, distance=float(rel[i, j]))
    return G


def partition(V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL) -> list[frozenset]:
    """The merged subnetworks of one network (components of its equivalence graph)."""
    return components(range(V.shape[-2]), synchronized_pairs(V, U, tol))


def largest_component(V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL) -> int:
    """The order parameter ``C_max``: the number of neurons in the largest merged group."""
    return len(partition(V, U, tol)[0])


def ensemble_largest_component(
    V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL
) -> np.ndarray:
    """``(R,)`` ``C_max`` of every run; ``V`` ``(R, width, n_in)``, ``U`` ``(R, n_out, width)``."""
    return np.array([largest_component(V[r], U[r], tol) for r in range(V.shape[0])])
