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

import math
from collections.abc import Iterable

import networkx as nx
import numpy as np
import torch
from networkx.utils import UnionFind
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform

from flowlaws.percolation.dynamics.ensemble import TwoLayerShape, split_params

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
    "partition",
    "synchronized_adjacency",
    "cmax",
    "ensemble_cmax",
    "largest_component",
    "collapse_fractions",
    "mean_over_finite",
    "partition_with_dead",
    "merge_heights",
    "pair_distances",
    "cmax_curves",
]


DEFAULT_TOL = 0.05
DEFAULT_DEAD_TOL = 0.01


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
    if not 0 <= dead_tol < 1:
        raise ValueError(f"dead_tol must lie in [0, 1) (a fraction of the largest norm), "
                         f"got {dead_tol}")
    norms = distance_to_dead_set(V, U)
    scale = norms.amax(dim=-1, keepdim=True)
    return (norms < dead_tol * scale) | (scale == 0)


def synchronized_adjacency(V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL,
                           dead_tol: float = DEFAULT_DEAD_TOL) -> torch.Tensor:
    """``(..., width, width)`` bool: live neurons ``i ≠ j`` at relative distance below ``tol``.

    The edges of the attractor-equivalence graph, for networks with any leading dimensions.
    Dead neurons have no edges (their relative distance is meaningless).
    """
    if not 0 <= tol < 1:
        raise ValueError(f"tol must lie in [0, 1) (a relative distance), got {tol}")
    alive = ~dead_neurons(V, U, dead_tol)
    close = (relative_distance(V, U) < tol) & alive[..., :, None] & alive[..., None, :]
    return close & ~torch.eye(V.shape[-2], dtype=torch.bool, device=close.device)


def synchronized_pairs(
    V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL, *, include_dead: bool = False
) -> list[tuple[int, int]]:
    """Pairs ``i < j`` with relative distance below ``tol`` (one network: ``V`` ``(width, n_in)``).

    Dead neurons are left out unless ``include_dead`` (their relative distance is meaningless).
    """
    if include_dead:
        close = synchronized_adjacency(V, U, tol, dead_tol=0.0)  # nobody is dead below 0
    else:
        close = synchronized_adjacency(V, U, tol)
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


def cmax(V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL,
         dead_tol: float = DEFAULT_DEAD_TOL) -> torch.Tensor:
    """``(...)`` float64: the order parameter ``C_max`` of every network, batched.

    ``V`` ``(..., width, n_in)`` and ``U`` ``(..., n_out, width)`` with any leading dimensions
    (runs, checkpoints). ``C_max`` is the number of neurons in the largest merged group: the
    largest connected component of the attractor-equivalence graph (live neurons joined when
    their relative distance is below ``tol``; a dead neuron is a group of its own), computed for
    every network at once by the transitive closure of the adjacency matrix (repeated
    squaring). It equals ``len(partition(V, U, tol)[0])`` (the tests check this).

    **Diverged networks.** A network with a NaN or infinite weight has no ``C_max``: it gets
    NaN, never 0 or 1, so a blow-up cannot pass for "nothing merged". Drop such runs
    explicitly (:func:`flowlaws.percolation.cascade.variance.finite_runs`) and report how many.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    A = synchronized_adjacency(V, U, tol, dead_tol)
    width = A.shape[-1]
    A = (A | torch.eye(width, dtype=torch.bool, device=A.device)).float()
    for _ in range(max(1, math.ceil(math.log2(width)))):
        A = ((A @ A) > 0).float()
    sizes = A.sum(-1).amax(-1).double()
    finite = torch.isfinite(V).flatten(-2).all(-1) & torch.isfinite(U).flatten(-2).all(-1)
    return torch.where(finite, sizes, torch.full_like(sizes, float("nan")))


def ensemble_cmax(theta: torch.Tensor, shape: TwoLayerShape, tol: float = DEFAULT_TOL,
                  dead_tol: float = DEFAULT_DEAD_TOL) -> torch.Tensor:
    """``(...)`` :func:`cmax` of every flat state in ``theta`` ``(..., dim)`` (runs, times ...).

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    V, U = split_params(theta.reshape(-1, shape.dim), shape)
    return cmax(V, U, tol, dead_tol).reshape(theta.shape[:-1])


def largest_component(V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL) -> int:
    """``C_max`` of one network (``V`` ``(width, n_in)``); an error if it has diverged."""
    value = float(cmax(V, U, tol))
    if value != value:
        raise ValueError("the network has non-finite weights (it diverged): C_max is undefined")
    return int(value)


def collapse_fractions(
    states: torch.Tensor, shape: TwoLayerShape, *, tol: float = DEFAULT_TOL,
    dead_tol: float = DEFAULT_DEAD_TOL,
) -> tuple[np.ndarray, np.ndarray]:
    """Fractions of *merged* and of *dead* neurons, each ``(T, R)`` for ``states`` ``(T, R, dim)``.

    Merged: alive and at relative distance below ``tol`` from another alive neuron (it lies in
    a synchronized pair, :func:`synchronized_pairs`). Dead:
    :func:`dead_neurons`. Runs whose state is not finite (diverged) are NaN.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    V, U = split_params(states.reshape(-1, shape.dim), shape)
    dead = dead_neurons(V, U, dead_tol)
    merged = synchronized_adjacency(V, U, tol, dead_tol).any(dim=-1).double().mean(dim=-1)
    finite = torch.isfinite(states.reshape(-1, shape.dim)).all(dim=-1)
    nan = torch.tensor(float("nan"), dtype=torch.float64, device=merged.device)
    merged = torch.where(finite, merged, nan).reshape(states.shape[:2])
    dead = torch.where(finite, dead.double().mean(dim=-1), nan).reshape(states.shape[:2])
    return merged.cpu().numpy(), dead.cpu().numpy()


def mean_over_finite(values: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Mean over the runs that did not diverge (a diverged run is NaN), along ``axis``.

    Where every run diverged there is nothing to average: the result is NaN, and the caller
    reports the diverged runs by count (:func:`collapse_fractions`). ``np.nanmean`` gives the
    same numbers but warns "Mean of empty slice" there, on the reader's page.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    count = finite.sum(axis=axis)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    mean = np.divide(total, count, out=np.full(np.shape(count), np.nan), where=count > 0)
    return float(mean) if axis is None else mean


def partition_with_dead(
    V: torch.Tensor, U: torch.Tensor, tol: float = DEFAULT_TOL,
    dead_tol: float = DEFAULT_DEAD_TOL,
) -> list[frozenset]:
    """Merged groups of one network, with all dead neurons in ONE group (largest first).

    :func:`partition` leaves dead neurons as singletons (their relative
    distance is meaningless). Here they are joined: dead neurons all lie next to ``w = 0``, so
    they are (nearly) identical to each other, and dying becomes a merge into the dead group.
    ``V`` ``(width, n_in)``, ``U`` ``(n_out, width)``.

    Explained in: book/02_percolation/03_reeb.ipynb.
    """
    dead = torch.nonzero(dead_neurons(V, U, dead_tol)).flatten().tolist()
    pairs = synchronized_pairs(V, U, tol)
    return components(range(V.shape[-2]), pairs + list(zip(dead, dead[1:], strict=False)))


def merge_heights(theta: torch.Tensor, shape: TwoLayerShape) -> np.ndarray:
    """``(R, width − 1)`` single-linkage merge heights of the neurons of each network.

    Height ``k`` is the relative distance (:func:`relative_distance`) at
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


def pair_distances(theta: torch.Tensor, shape: TwoLayerShape,
                   pairs: list[tuple[int, int]]) -> torch.Tensor:
    """``(..., len(pairs))`` relative distances ``‖w_i − w_j‖/(‖w_i‖ + ‖w_j‖)`` of given pairs.

    ``theta`` is ``(..., dim)``; a state of ``(T, R, dim)`` gives ``(T, R, n_pairs)``.

    Explained in: book/02_percolation/06_adaptive.ipynb and 09_fragmentation.ipynb
    """
    w = neuron_vectors(*split_params(theta.reshape(-1, shape.dim), shape))
    i, j = (torch.tensor(idx) for idx in zip(*pairs, strict=True))
    d = (w[:, i] - w[:, j]).norm(dim=-1) / (w[:, i].norm(dim=-1) + w[:, j].norm(dim=-1))
    return d.reshape(*theta.shape[:-1], len(pairs))


def cmax_curves(states: torch.Tensor, shape: TwoLayerShape, tol: float = DEFAULT_TOL,
                dead_tol: float = DEFAULT_DEAD_TOL) -> np.ndarray:
    """``(R, T)`` :func:`ensemble_cmax` of every run at every checkpoint of ``states``
    ``(T, R, dim)`` (an ``AdaptivePath``'s ``theta`` or an ``SGDPath``'s ``states``, both of
    :mod:`flowlaws.percolation.dynamics`); NaN for a diverged run.

    Explained in: book/02_percolation/06_adaptive.ipynb
    """
    return ensemble_cmax(states, shape, tol, dead_tol).T.cpu().numpy()
