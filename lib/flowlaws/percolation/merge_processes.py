"""Percolation with block merges, next to Erdős–Rényi edge-by-edge growth.

Both processes start from ``N`` singletons and track the order parameter ``C_max/N`` (the
largest component's share) against a control parameter ``p``:

- **Erdős–Rényi** (:func:`erdos_renyi_curve`): add uniformly random edges one at a time
  (union-find); ``p = edges / N``. The giant component appears continuously at ``p = 1/2``;
  the largest one-step jump of ``C_max/N`` shrinks like ``N^{-1/3}`` (critical window).
- **Block merges** (:func:`block_merge_curve`): at each step ``n`` distinct components are
  chosen and merged at once (the symmetry forces ``n`` subnetworks to coincide together).
  The control parameter is the merged fraction ``p = (N − K)/(N − 1)`` with ``K`` components
  left, from 0 (all apart) to 1 (one component). Choice rule ``weighting``: ``"uniform"``
  (each current component equally likely, Kingman's constant kernel; the default) or
  ``"size"`` (probability ∝ size, the multiplicative kernel that is ER in mean field). With
  uniform choice, components stay comparable in size and the last merges join macroscopic
  blocks: the largest jump of ``C_max/N`` stays ``O(1)`` as ``N`` grows.

Explained in: book/02_percolation/04_percolation.ipynb.
"""
from __future__ import annotations

import math

import numpy as np
from networkx.utils import UnionFind

__all__ = [
    "block_jump_sweep",
    "erdos_renyi_curve",
    "block_merge_curve",
    "max_jump",
    "jump_scaling",
]


def block_jump_sweep(sizes: list[int], n_runs: int, *, process: str = "block", n: int = 2,
                     weighting: str = "uniform", seed: int = 0) -> dict[str, list[float]]:
    """Largest and last one-step jump of ``C_max/N`` over ``n_runs`` runs, for each ``N``.

    ``process`` is ``"block"`` (:func:`block_merge_curve` with block size
    ``n`` and ``weighting``) or ``"er"`` (:func:`erdos_renyi_curve`).
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


def _check_size(N: int) -> None:
    if not isinstance(N, int | np.integer) or N < 2:
        raise ValueError(f"N must be an int >= 2, got {N!r}")


def erdos_renyi_curve(
    N: int, p_max: float = 1.5, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(p, C_max/N)`` after each of ``round(p_max N)`` random edges (self-loops allowed).

    Returns two ``(n_edges + 1,)`` arrays, ``p = edges/N``.
    """
    _check_size(N)
    if p_max <= 0:
        raise ValueError(f"p_max must be positive, got {p_max}")
    rng = np.random.default_rng(seed)
    n_edges = int(round(p_max * N))
    ends = rng.integers(N, size=(n_edges, 2))
    uf, c_max = UnionFind(range(N)), np.ones(n_edges + 1, dtype=np.int64)
    for k, (a, b) in enumerate(ends.tolist(), start=1):
        uf.union(a, b)
        c_max[k] = max(c_max[k - 1], uf.weights[uf[a]])
    return np.arange(n_edges + 1) / N, c_max / N


def _pick(sizes: np.ndarray, n: int, weighting: str, rng: np.random.Generator) -> np.ndarray:
    if weighting == "uniform":
        return rng.choice(len(sizes), size=n, replace=False)
    return rng.choice(len(sizes), size=n, replace=False, p=sizes / sizes.sum())


def block_merge_curve(
    N: int, n: int = 2, *, weighting: str = "uniform", seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(p, C_max/N)`` of a process that merges ``n`` random components per step.

    Runs until fewer than ``n`` components remain (then merges the rest). Returns arrays of
    length ``steps + 1`` with ``p = (N − K)/(N − 1)``, ``K`` the number of components.
    """
    _check_size(N)
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"block size n must be an int >= 2, got {n!r}")
    if weighting not in ("uniform", "size"):
        raise ValueError(f"weighting must be 'uniform' or 'size', got {weighting!r}")
    rng = np.random.default_rng(seed)
    sizes, ps, cs = np.ones(N, dtype=np.int64), [0.0], [1]
    while len(sizes) > 1:
        chosen = _pick(sizes, min(n, len(sizes)), weighting, rng)
        merged = sizes[chosen].sum()
        sizes = np.append(np.delete(sizes, chosen), merged)
        ps.append((N - len(sizes)) / (N - 1))
        cs.append(max(cs[-1], int(merged)))
    return np.asarray(ps), np.asarray(cs) / N


def max_jump(order: np.ndarray) -> float:
    """The largest one-step increase of an order-parameter curve."""
    return float(np.max(np.diff(order))) if len(order) > 1 else 0.0


def jump_scaling(
    sizes: list[int], *, n_runs: int = 20, n: int = 2, seed: int = 0
) -> dict[str, np.ndarray]:
    """Mean and standard error of the largest jump of ``C_max/N`` for each ``N``, both processes.

    Returns ``{"N", "er_mean", "er_sem", "block_mean", "block_sem"}`` (arrays over ``sizes``).
    """
    out: dict[str, list[float]] = {k: [] for k in ("er_mean", "er_sem", "block_mean", "block_sem")}
    for N in sizes:
        er = [max_jump(erdos_renyi_curve(N, seed=seed + r)[1]) for r in range(n_runs)]
        bl = [max_jump(block_merge_curve(N, n, seed=seed + r)[1]) for r in range(n_runs)]
        for name, vals in (("er", er), ("block", bl)):
            out[f"{name}_mean"].append(float(np.mean(vals)))
            out[f"{name}_sem"].append(float(np.std(vals, ddof=1) / np.sqrt(n_runs)))
    return {"N": np.asarray(sizes), **{k: np.asarray(v) for k, v in out.items()}}
