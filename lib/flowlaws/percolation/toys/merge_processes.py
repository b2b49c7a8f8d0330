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
    "last_jump_mean",
    "block_percolation_verdicts",
    "critical_point",
    "largest_jump",
    "JUMP_SUMMARY_COLUMNS",
    "jump_summary",
    "block_jump_sweep",
    "erdos_renyi_curve",
    "block_merge_curve",
    "max_jump",
]


def critical_point(process: str, n: int = 2, weighting: str = "uniform") -> float:
    """The critical point of a process, on its own axis (mean field, ``N → ∞``).

    - ``"er"``: the giant component of Erdős–Rényi growth appears at ``p = edges/N = 1/2``.
    - ``"block"``, ``weighting="uniform"`` (Kingman's constant kernel): components stay
      comparable in size, and one of order ``N`` exists only once ``O(1)`` components are left,
      at merged fraction ``p = 1``, the end of the axis.
    - ``"block"``, ``weighting="size"``: choosing ``n`` components with probability ∝ size is
      adding a random hyperedge on ``n`` vertices. The giant of a random ``n``-uniform hypergraph
      appears at ``n(n − 1) · edges/N = 1``; until then the components are trees and each edge
      removes ``n − 1`` of them, so the merged fraction is ``(n − 1) · edges/N = 1/n``
      (``1/2`` for pairs, as for Erdős–Rényi).
    """
    if process == "er":
        return 0.5
    if process != "block" or weighting not in ("uniform", "size"):
        raise ValueError(f"unknown process {process!r} with weighting {weighting!r}")
    return 1.0 if weighting == "uniform" else 1.0 / n


def largest_jump(p: np.ndarray, order: np.ndarray, p_max: float = np.inf) -> tuple[float, float]:
    """The largest one-step increase of ``order`` among the steps that end at ``p ≤ p_max``,
    and the ``p`` where it ends. ``(0, nan)`` when no step qualifies."""
    jumps, ends = np.diff(order), np.asarray(p)[1:]
    keep = ends <= p_max
    if not keep.any():
        return 0.0, float("nan")
    k = int(np.argmax(np.where(keep, jumps, -np.inf)))
    return float(jumps[k]), float(ends[k])


def _mean_sem(values: list[float]) -> tuple[float, float]:
    return float(np.mean(values)), float(np.std(values, ddof=1) / math.sqrt(len(values)))


def block_jump_sweep(sizes: list[int], n_runs: int, *, process: str = "block", n: int = 2,
                     weighting: str = "uniform", window: float = 0.95, seed: int = 0
                     ) -> dict[str, list[float]]:
    """Jumps of ``C_max/N`` over ``n_runs`` runs, for each ``N``: the whole run and below ``p_c``.

    ``process`` is ``"block"`` (:func:`block_merge_curve` with block size ``n`` and
    ``weighting``, run to one component) or ``"er"`` (:func:`erdos_renyi_curve`, run until one
    component is left, so both processes end in the same state). Returns lists over ``sizes``:
    ``N``; ``max_mean``/``max_sem`` (the largest jump of the whole run); ``max_at`` (the median
    ``p`` where it happens); ``last_mean``/``last_sem`` (the final merge's, or last edge's, jump);
    ``window_mean``/``window_sem`` (the largest jump among the steps that end at
    ``p ≤ window · p_ref``) and ``order_at_window`` (mean ``C_max/N`` there), with ``p_ref`` the
    process's critical point (:func:`critical_point`).
    A transition that is discontinuous at its critical point keeps a largest jump of order one
    in every window around it; a jump that survives only at ``p = 1`` is the last merges.
    """
    if process not in ("block", "er"):
        raise ValueError(f"process must be 'block' or 'er', got {process!r}")
    if not 0 < window <= 1:
        raise ValueError(f"window must lie in (0, 1], got {window}")
    p_ref = critical_point(process, n, weighting)
    keys = ("N", "max_mean", "max_sem", "max_at", "last_mean", "last_sem", "window_mean",
            "window_sem", "order_at_window")
    out: dict[str, list[float]] = {k: [] for k in keys}
    for N in sizes:
        curves = [block_merge_curve(N, n, weighting=weighting, seed=seed + r)
                  if process == "block" else erdos_renyi_curve(N, None, seed=seed + r)
                  for r in range(n_runs)]
        whole = [largest_jump(p, c) for p, c in curves]
        inside = [largest_jump(p, c, window * p_ref)[0] for p, c in curves]
        stats = {"max": [j for j, _ in whole], "last": [c[-1] - c[-2] for _, c in curves],
                 "window": inside}
        for key, vals in stats.items():
            out[f"{key}_mean"].append(_mean_sem(vals)[0])
            out[f"{key}_sem"].append(_mean_sem(vals)[1])
        out["max_at"].append(float(np.median([at for _, at in whole])))
        out["order_at_window"].append(float(np.mean(
            [c[np.searchsorted(p, window * p_ref, side="right") - 1] for p, c in curves])))
        out["N"].append(float(N))
    return out


def _check_size(N: int) -> None:
    if not isinstance(N, int | np.integer) or N < 2:
        raise ValueError(f"N must be an int >= 2, got {N!r}")


def erdos_renyi_curve(
    N: int, p_max: float | None = 1.5, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(p, C_max/N)`` after each random edge (self-loops allowed), ``p = edges/N``.

    ``p_max`` stops after ``round(p_max N)`` edges; ``None`` adds edges until one component is
    left (about ``N ln N / 2`` of them), the state every merge process ends in. Returns two
    ``(n_edges + 1,)`` arrays.
    """
    _check_size(N)
    if p_max is not None and not p_max > 0:
        raise ValueError(f"p_max must be positive or None, got {p_max}")
    rng = np.random.default_rng(seed)
    uf, c_max = UnionFind(range(N)), [1]
    chunk = int(round(p_max * N)) if p_max is not None else N  # edges drawn per batch
    while True:
        for a, b in rng.integers(N, size=(chunk, 2)).tolist():
            uf.union(a, b)
            c_max.append(max(c_max[-1], uf.weights[uf[a]]))
            if p_max is None and c_max[-1] == N:
                return np.arange(len(c_max)) / N, np.asarray(c_max) / N
        if p_max is not None:
            return np.arange(len(c_max)) / N, np.asarray(c_max) / N


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


JUMP_SUMMARY_COLUMNS = {
    "process": "process",
    "p_c": "own p_c",
    "at": "largest jump at p (median, largest N)",
    "max": "largest jump, smallest → largest N",
    "window": "largest jump at p ≤ 0.95 p_c",
    "order": "C_max/N at p = 0.95 p_c",
}
"""The headers of :func:`jump_summary`'s rows, for :func:`flowlaws.book.tables.show_table`."""


def jump_summary(name: str, config: dict, sweep: dict[str, list[float]]) -> dict[str, object]:
    """One row comparing a process at its own critical point, from a :func:`block_jump_sweep`.

    ``config`` holds the sweep's ``process`` and, for block merges, ``n`` and ``weighting``.
    The row gives the critical point, where the largest jump sits at the largest ``N``, and,
    from the smallest to the largest ``N``, the largest jump, the largest jump below
    ``0.95 p_c`` and ``C_max/N`` there (the sweep's default window).

    Explained in: book/02_percolation/04_percolation.ipynb.
    """
    def span(key: str, fmt: str) -> str:
        return f"{sweep[key][0]:{fmt}} → {sweep[key][-1]:{fmt}}"

    p_c = critical_point(config["process"], config.get("n", 2), config.get("weighting", "uniform"))
    return {"process": name, "p_c": p_c, "at": sweep["max_at"][-1], "max": span("max_mean", ".3f"),
            "window": span("window_mean", ".4f"), "order": span("order_at_window", ".3f")}


def block_percolation_verdicts(sweeps: dict[str, dict[str, list[float]]], *,
                               window: float = 0.95) -> tuple[str, str, dict[str, list[float]]]:
    """``(verdict, first_verdict, jumps)`` on "a block process keeps a jump of order one as N
    grows", from :func:`block_jump_sweep` results by process name (``"Erdős–Rényi"`` is left
    out: it merges no blocks).

    The declared rule (``flowlaws.book.rules``, ``block_percolation``): a process whose largest
    jump sits at ``p > window`` at the largest ``N`` (uniform kernels, ``p_c = 1``) is read at
    ``p ≤ window · p_c`` (``window_mean``), another at its largest jump (``max_mean``); "holds"
    when some process's jump does not shrink from the smallest ``N`` to the largest, "fails" when
    every one shrinks. The first rule, before the window was written, read every process at its
    largest jump anywhere on the axis. ``jumps``: name → the jumps the declared rule read, by N.

    Explained in: book/02_percolation/04_percolation.ipynb.
    """
    blocks = {name: s for name, s in sweeps.items() if name != "Erdős–Rényi"}
    if not blocks:
        raise ValueError("sweeps holds no block merge process")
    jumps = {name: s["window_mean"] if s["max_at"][-1] > window else s["max_mean"]
             for name, s in blocks.items()}

    def verdict(series: list[list[float]]) -> str:
        return "fails" if all(j[-1] < j[0] for j in series) else "holds"

    return (verdict(list(jumps.values())), verdict([s["max_mean"] for s in blocks.values()]),
            jumps)


def last_jump_mean(N: int) -> float:
    """The mean size (as a share of ``N``) of the last merge's jump of ``C_max/N`` for uniform
    pairwise merges of ``N`` singletons, in closed form: the last two components have sizes
    ``m`` and ``N − m`` with ``m`` uniform on ``1 … N − 1`` (Kingman's coalescent), and the jump
    is the smaller one, ``E[min(m, N − m)] / N = Σ_m min(m, N − m) / (N (N − 1))``.

    Explained in: book/02_percolation/04_percolation.ipynb
    """
    _check_size(N)
    m = np.arange(1, N)
    return float(np.minimum(m, N - m).sum() / (N * (N - 1)))

